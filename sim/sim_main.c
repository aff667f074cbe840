/* sim_main.c — STUB: not implemented yet; its owner replaces this file. */
#include <stdio.h>
int main(void) { fprintf(stderr, "fairgate-sim: not built yet\n"); return 1; }
