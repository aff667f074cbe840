/* fg-decision-bench.c — what the admission decision costs per request, by
 * body size: the same calls fairgated makes between "request received" and
 * "request ready for the engine" (SHA-256 of the API key, the one-pass JSON
 * validation and prompt measurement, pricing through the cost model, the
 * bucket's reserve, the cache_salt / include_usage / output-cap rewrite splicing
 * the forwarded body), timed in-process over many iterations and reported
 * as medians of several runs, next to a plain memcpy of the same body as a
 * floor.
 *
 *   fg-decision-bench [--runs R] [--json]
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "agent/http/http_request.h"
#include "agent/proxy/identity.h"
#include "policy/admission.h"
#include "policy/cost_model.h"
#include "policy/pricing.h"

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static char *make_body(size_t size)
{
	static const char words[] = "the quick brown fox jumps over the lazy dog ";
	const char *head = "{\"model\":\"llama-3.3-70b\",\"messages\":[{\"role\":\"system\",\"content\":\"You are helpful.\"},"
			   "{\"role\":\"user\",\"content\":\"";
	const char *tail = "\"}],\"max_tokens\":256,\"stream\":true}";
	size_t hl = strlen(head), tl = strlen(tail);
	char *b = malloc(size + 1);

	memcpy(b, head, hl);
	for (size_t i = hl; i < size - tl; i++)
		b[i] = words[(i - hl) % (sizeof(words) - 1)];
	memcpy(b + size - tl, tail, tl);
	b[size] = 0;
	return b;
}

static volatile size_t sink;

/* One decision, as the proxy makes it; returns 0 when admitted. */
static int decide(const char *body, size_t len, const struct fg_cost_model *cm,
		  const struct fg_model *rule, const struct fg_calibration *cal,
		  struct fg_bucket *bucket, uint64_t now_ns)
{
	static const char key[] = "sk-bench-key-0123456789";
	uint8_t hash[32];
	struct fg_req_info info;
	char msg[256];
	const char *param;

	fg_sha256(key, sizeof(key) - 1, hash);
	if (fg_request_parse(FG_API_CHAT, body, len, &info, msg, sizeof(msg), &param))
		return -1;
	struct fg_prompt_est est = fg_estimate_prompt(rule, fg_chars_per_token(cal, 1, rule->chars_per_token),
						      &info.shape);
	struct fg_price p = fg_price_request(cm, FG_METER_REPLICA_TIME, &est, &info.shape, 256, 32768);
	struct fg_decision d = fg_admission_decide(bucket, p.units, now_ns);
	struct fg_rewrite rw = { .cache_salt = "fg1-bench-0123456789abcdef0123456789abcdef0123456789abcdef01234567",
				 .force_usage = info.stream, .max_tokens = p.per_choice };
	size_t out_len = 0;
	char *out = fg_request_forward_body(&info, body, len, &rw, &out_len);
	sink += out_len + hash[0];
	free(out);
	fg_bucket_settle(bucket, d.cost, 0, now_ns); /* keep the bucket full */
	return d.verdict == FG_ADMIT ? 0 : -1;
}

static int cmp(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

int main(int argc, char **argv)
{
	static const size_t sizes[] = { 1024, 64 * 1024, 1024 * 1024 };
	static const int iters[] = { 20000, 500, 30 };
	int runs = 7, json = 0;
	struct fg_policy *pol = malloc(sizeof(*pol));
	struct fg_cost_model cm;
	struct fg_calibration cal;
	struct fg_bucket bucket;

	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--runs") && i + 1 < argc)
			runs = atoi(argv[++i]);
		else if (!strcmp(argv[i], "--json"))
			json = 1;
		else {
			fprintf(stderr, "usage: fg-decision-bench [--runs R] [--json]\n");
			return 2;
		}
	}
	if (runs < 1 || runs > 101)
		runs = 7;
	fg_policy_defaults(pol);
	fg_cost_model_init(&cm, &pol->replica);
	fg_calibration_init(&cal);
	fg_bucket_init(&bucket, 1e12, 1e15, 0);

	if (!json)
		printf("%-8s %14s %14s %12s\n", "body", "decision us", "memcpy us", "MB/s");
	else
		printf("[");
	for (size_t s = 0; s < sizeof(sizes) / sizeof(sizes[0]); s++) {
		char *body = make_body(sizes[s]);
		char *copy = malloc(sizes[s]);
		double med[2];
		double *t = calloc((size_t)runs, sizeof(*t)), *c = calloc((size_t)runs, sizeof(*c));
		if (decide(body, sizes[s], &cm, &pol->replica.model, &cal, &bucket, 1)) {
			fprintf(stderr, "fg-decision-bench: the %zu-byte body was refused\n", sizes[s]);
			return 1;
		}
		for (int r = 0; r < runs; r++) {
			double t0 = now_s();
			for (int i = 0; i < iters[s]; i++)
				decide(body, sizes[s], &cm, &pol->replica.model, &cal, &bucket, (uint64_t)i + 2);
			t[r] = (now_s() - t0) / iters[s];
			t0 = now_s();
			for (int i = 0; i < iters[s]; i++) {
				memcpy(copy, body, sizes[s]);
				sink += (size_t)copy[i % sizes[s]];
			}
			c[r] = (now_s() - t0) / iters[s];
		}
		qsort(t, (size_t)runs, sizeof(*t), cmp);
		qsort(c, (size_t)runs, sizeof(*c), cmp);
		med[0] = t[runs / 2];
		med[1] = c[runs / 2];
		if (json)
			printf("%s{\"body_bytes\":%zu,\"decision_us\":%.3f,\"memcpy_us\":%.3f}", s ? "," : "",
			       sizes[s], med[0] * 1e6, med[1] * 1e6);
		else
			printf("%-8s %14.2f %14.2f %12.0f\n",
			       sizes[s] >= 1048576 ? "1 MiB" : sizes[s] >= 65536 ? "64 KiB" : "1 KiB",
			       med[0] * 1e6, med[1] * 1e6, (double)sizes[s] / med[0] / 1e6);
		free(t);
		free(c);
		free(body);
		free(copy);
	}
	if (json)
		printf("]\n");
	free(pol);
	return 0;
}
