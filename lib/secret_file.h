/* secret_file.h — the first line of a file that holds a credential (the
 * engine's API key, the /metrics bearer token): read whole at start and on
 * every policy apply, so a rotated file takes effect on the next reload. */
#ifndef FAIRGATE_SECRET_FILE_H
#define FAIRGATE_SECRET_FILE_H

#include <stddef.h>

/* The longest credential accepted, in bytes (without a terminating NUL). */
#define FG_SECRET_LINE_MAX 1024

/* Read the first line of PATH into OUT (NUL-terminated; at most
 * FG_SECRET_LINE_MAX bytes and cap - 1), without its line end and trailing
 * blanks. The line must be non-empty and made of visible ASCII only
 * (0x21..0x7e): it goes into an HTTP header, where a space, a control
 * byte or a second line would change what the peer reads. A file that
 * others (not owner or group) may read is accepted with a warning on
 * stderr: Kubernetes mounts Secret volumes 0644 by default, inside the
 * pod's own mount namespace. WHAT names the file in messages. Returns the
 * length, or -1 with ERR set. */
int fg_secret_line_read(const char *path, const char *what, char *out, size_t cap, char *err,
			size_t errlen);

#endif
