/* openai_error.h — the simulator's errors in OpenAI's shape, as vLLM sends
 * them: {"error":{"message","type","param","code"}} with the HTTP status as
 * the code and the exception's class name as the type. */
#ifndef FAIRGATE_SIM_OPENAI_ERROR_H
#define FAIRGATE_SIM_OPENAI_ERROR_H

struct sim_error {
	int status;              /* HTTP status */
	const char *type;        /* "BadRequestError", "NotFoundError", ... */
	char param[32];          /* "" = null */
	char message[512];
};

/* Fill *err (printf-style message). Returns -1 for `return sim_error_set(...)`. */
int sim_error_set(struct sim_error *err, int status, const char *param, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

/* The error as a malloc'd JSON string (NULL when out of memory). */
char *sim_error_json(const struct sim_error *err);

#endif
