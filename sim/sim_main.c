/* sim_main.c — fairgate-sim: command line, policy, signals, the loop.
 *
 * An OpenAI-compatible server that behaves like one vLLM replica whose
 * timings come from the policy's `replica` block through the cost model
 * (policy/cost_model.h). See README.md, section "fairgate-sim".
 */
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include "lib/event_loop.h"
#include "policy/cost_model.h"
#include "policy/policy.h"
#include "sim/sim_cli.h"
#include "sim/sim_server.h"
#include "sim/truth.h"

static void usage(FILE *out)
{
	fprintf(out,
"usage: fairgate-sim [options]\n"
"\n"
"An OpenAI-compatible engine simulator: one vLLM replica (continuous batching,\n"
"chunked prefill, paged KV with preemption by recompute, prefix cache with\n"
"cache_salt) in virtual time priced by the policy's cost model.\n"
"\n"
"  --policy FILE                 policy file; its `replica` block sets the model,\n"
"                                hardware and KV pool (default: the seed replica)\n"
"  --listen ADDR:PORT            default 127.0.0.1:8001 ([::1]:PORT for IPv6)\n"
"  --speedup X                   virtual seconds per real second (default 1);\n"
"                                0 or inf = as fast as possible\n"
"  --scheduling-policy P         fcfs (default) | priority\n"
"  --max-num-seqs N              running batch cap (default 256)\n"
"  --max-num-batched-tokens N    per-step token budget (default 8192)\n"
"  --max-model-len N             prompt + output cap (default 131072)\n"
"  --block-size N                KV block size in tokens (default 16)\n"
"  --kv-pool-tokens N            override replica.kv_pool_tokens\n"
"  --no-enable-prefix-caching    disable the prefix cache\n"
"  --enable-prompt-tokens-details  report usage.prompt_tokens_details.cached_tokens\n"
"  --enable-force-include-usage  usage in every chunk of every stream, as if\n"
"                                include_usage and continuous_usage_stats were set\n"
"  --image-tokens N              prompt tokens per image part (default 0: a\n"
"                                text-only model, which refuses media parts)\n"
"  --audio-tokens N              per audio part (default 0)\n"
"  --video-tokens N              per video part (default 0)\n"
"  --api-key KEY                 require \"Authorization: Bearer KEY\" under /v1,\n"
"                                /v2, /inference, /cohere, as vLLM (repeatable;\n"
"                                default: $VLLM_API_KEY, else none)\n"
"  --best-of ignore|refuse       ignore (vLLM >= 0.12, default) or refuse\n"
"                                best_of != 1 (vLLM 0.8-0.11's V1 engine)\n"
"  --output-len fixed|uniform    output = max_tokens, or seeded uniform in\n"
"                                [1, max_tokens] (finish_reason \"stop\" if shorter)\n"
"  --default-max-tokens N        chat requests without max_tokens (default 256)\n"
"  --seed N                      output lengths and token ids (default 0)\n"
"  --served-model-name NAME      default: replica.model.name\n"
"  --max-body-bytes N            request body limit (default 33554432)\n"
"  --log-requests                one line per finished request on stderr\n"
"  --show-hidden-metrics-for-version 0.11\n"
"                                also export vllm:time_per_output_token_seconds\n"
"\n"
"The hardware it really is (default: the policy's replica block exactly):\n"
"  --truth FILE                  YAML: prefill_mfu, decode_mbu, step_overhead_ms,\n"
"                                seq_overhead_us (bare or under `truth:`)\n"
"  --true-prefill-mfu X          prefill MFU the hardware reaches, (0, 1]\n"
"  --true-decode-mbu X           decode MBU, (0, 1]\n"
"  --true-step-overhead-ms X     fixed time of every engine step\n"
"  --true-seq-overhead-us X      time per scheduled sequence per step\n"
"                                (the flags override the file)\n"
"  -h, --help\n");
}

static int parse_u64(const char *s, uint64_t lo, uint64_t hi, uint64_t *out)
{
	char *end;

	errno = 0;
	unsigned long long v = strtoull(s, &end, 10);
	if (errno || end == s || *end || s[0] == '-' || v < lo || v > hi)
		return -1;
	*out = v;
	return 0;
}

static void on_signal(struct fg_loop *loop, int fd, uint32_t events, void *ctx)
{
	struct signalfd_siginfo si;

	(void)events;
	(void)ctx;
	if (read(fd, &si, sizeof(si)) == (ssize_t)sizeof(si))
		fg_loop_stop(loop);
}

enum {
	OPT_POLICY = 256, OPT_LISTEN, OPT_SPEEDUP, OPT_SCHED, OPT_MAX_SEQS, OPT_MAX_BATCHED,
	OPT_MAX_LEN, OPT_BLOCK, OPT_POOL, OPT_NO_PREFIX, OPT_DETAILS, OPT_OUTPUT_LEN,
	OPT_DEFAULT_MAX, OPT_SEED, OPT_MODEL, OPT_MAX_BODY, OPT_LOG, OPT_FORCE_USAGE,
	OPT_IMAGE_TOKENS, OPT_AUDIO_TOKENS, OPT_VIDEO_TOKENS, OPT_BEST_OF, OPT_API_KEY,
	OPT_TRUTH, OPT_TRUE_MFU, OPT_TRUE_MBU, OPT_TRUE_STEP, OPT_TRUE_SEQ, OPT_HIDDEN,
};

static const struct option long_opts[] = {
	{ "policy", required_argument, NULL, OPT_POLICY },
	{ "listen", required_argument, NULL, OPT_LISTEN },
	{ "speedup", required_argument, NULL, OPT_SPEEDUP },
	{ "scheduling-policy", required_argument, NULL, OPT_SCHED },
	{ "max-num-seqs", required_argument, NULL, OPT_MAX_SEQS },
	{ "max-num-batched-tokens", required_argument, NULL, OPT_MAX_BATCHED },
	{ "max-model-len", required_argument, NULL, OPT_MAX_LEN },
	{ "block-size", required_argument, NULL, OPT_BLOCK },
	{ "kv-pool-tokens", required_argument, NULL, OPT_POOL },
	{ "no-enable-prefix-caching", no_argument, NULL, OPT_NO_PREFIX },
	{ "enable-prompt-tokens-details", no_argument, NULL, OPT_DETAILS },
	{ "output-len", required_argument, NULL, OPT_OUTPUT_LEN },
	{ "default-max-tokens", required_argument, NULL, OPT_DEFAULT_MAX },
	{ "seed", required_argument, NULL, OPT_SEED },
	{ "served-model-name", required_argument, NULL, OPT_MODEL },
	{ "max-body-bytes", required_argument, NULL, OPT_MAX_BODY },
	{ "log-requests", no_argument, NULL, OPT_LOG },
	{ "enable-force-include-usage", no_argument, NULL, OPT_FORCE_USAGE },
	{ "image-tokens", required_argument, NULL, OPT_IMAGE_TOKENS },
	{ "audio-tokens", required_argument, NULL, OPT_AUDIO_TOKENS },
	{ "video-tokens", required_argument, NULL, OPT_VIDEO_TOKENS },
	{ "best-of", required_argument, NULL, OPT_BEST_OF },
	{ "api-key", required_argument, NULL, OPT_API_KEY },
	{ "truth", required_argument, NULL, OPT_TRUTH },
	{ "true-prefill-mfu", required_argument, NULL, OPT_TRUE_MFU },
	{ "true-decode-mbu", required_argument, NULL, OPT_TRUE_MBU },
	{ "true-step-overhead-ms", required_argument, NULL, OPT_TRUE_STEP },
	{ "true-seq-overhead-us", required_argument, NULL, OPT_TRUE_SEQ },
	{ "show-hidden-metrics-for-version", required_argument, NULL, OPT_HIDDEN },
	{ "help", no_argument, NULL, 'h' },
	{ NULL, 0, NULL, 0 },
};

static int bad(const char *opt, const char *arg)
{
	fprintf(stderr, "fairgate-sim: invalid value '%s' for --%s\n", arg, opt);
	return 2;
}

int main(int argc, char **argv)
{
	struct sim_server_options o = { .port = 8001, .speedup = 1, .default_max_tokens = 256,
					.max_body = 32u << 20 };
	const char *policy_path = NULL, *truth_path = NULL;
	struct sim_truth truth = { 0 }, truth_flags = { 0 };
	bool truth_flag_set[4] = { false };
	char why[200];
	uint64_t pool_override = 0, v;
	int c, rc = 1;

	strcpy(o.host, "127.0.0.1");
	sim_engine_config_defaults(&o.engine, 0);
	while ((c = getopt_long(argc, argv, "h", long_opts, NULL)) != -1) {
		switch (c) {
		case OPT_POLICY: policy_path = optarg; break;
		case OPT_LISTEN: {
			struct fg_hostport hp;
			char why[128];
			if (sim_cli_parse_addr(optarg, true, &hp, why, sizeof(why)) ||
			    strlen(hp.host) >= sizeof(o.host)) {
				fprintf(stderr, "fairgate-sim: --listen %s: %s\n", optarg, why);
				return 2;
			}
			strcpy(o.host, hp.host);
			o.port = hp.port;
			break;
		}
		case OPT_SPEEDUP:
			if (!strcmp(optarg, "inf")) {
				o.speedup = 0;
			} else {
				char *end;
				o.speedup = strtod(optarg, &end);
				if (*end || end == optarg || !isfinite(o.speedup) || o.speedup < 0)
					return bad("speedup", optarg);
			}
			break;
		case OPT_SCHED:
			if (!strcmp(optarg, "fcfs"))
				o.engine.policy = SIM_SCHED_FCFS;
			else if (!strcmp(optarg, "priority"))
				o.engine.policy = SIM_SCHED_PRIORITY;
			else
				return bad("scheduling-policy", optarg);
			break;
		case OPT_MAX_SEQS:
			if (parse_u64(optarg, 1, 1u << 20, &v))
				return bad("max-num-seqs", optarg);
			o.engine.max_num_seqs = (uint32_t)v;
			break;
		case OPT_MAX_BATCHED:
			if (parse_u64(optarg, 1, 1u << 24, &v))
				return bad("max-num-batched-tokens", optarg);
			o.engine.max_num_batched_tokens = (uint32_t)v;
			break;
		case OPT_MAX_LEN:
			if (parse_u64(optarg, 2, 1u << 24, &v))
				return bad("max-model-len", optarg);
			o.engine.max_model_len = (uint32_t)v;
			break;
		case OPT_BLOCK:
			if (parse_u64(optarg, 1, 1024, &v))
				return bad("block-size", optarg);
			o.engine.block_size = (uint32_t)v;
			break;
		case OPT_POOL:
			if (parse_u64(optarg, 1, 1ull << 34, &pool_override))
				return bad("kv-pool-tokens", optarg);
			break;
		case OPT_NO_PREFIX: o.engine.enable_prefix_caching = false; break;
		case OPT_DETAILS: o.prompt_tokens_details = true; break;
		case OPT_OUTPUT_LEN:
			if (!strcmp(optarg, "fixed"))
				o.engine.output_len = SIM_OUTPUT_FIXED;
			else if (!strcmp(optarg, "uniform"))
				o.engine.output_len = SIM_OUTPUT_UNIFORM;
			else
				return bad("output-len", optarg);
			break;
		case OPT_DEFAULT_MAX:
			if (parse_u64(optarg, 1, 1u << 24, &v))
				return bad("default-max-tokens", optarg);
			o.default_max_tokens = (uint32_t)v;
			break;
		case OPT_SEED:
			if (parse_u64(optarg, 0, UINT64_MAX, &o.engine.seed))
				return bad("seed", optarg);
			break;
		case OPT_MODEL:
			if (!*optarg || strlen(optarg) >= sizeof(o.model) || strchr(optarg, '"') ||
			    strchr(optarg, '\\'))
				return bad("served-model-name", optarg);
			strcpy(o.model, optarg);
			break;
		case OPT_MAX_BODY:
			if (parse_u64(optarg, 1024, 1ull << 31, &v))
				return bad("max-body-bytes", optarg);
			o.max_body = (size_t)v;
			break;
		case OPT_LOG: o.log_requests = true; break;
		case OPT_FORCE_USAGE: o.force_include_usage = true; break;
		case OPT_IMAGE_TOKENS:
		case OPT_AUDIO_TOKENS:
		case OPT_VIDEO_TOKENS: {
			enum sim_modality m = c == OPT_IMAGE_TOKENS   ? SIM_MM_IMAGE
					      : c == OPT_AUDIO_TOKENS ? SIM_MM_AUDIO
								  : SIM_MM_VIDEO;
			char name[16];
			snprintf(name, sizeof(name), "%s-tokens", sim_modality_name(m));
			if (parse_u64(optarg, 0, 1u << 20, &v))
				return bad(name, optarg);
			o.media_tokens[m] = (uint32_t)v;
			break;
		}
		case OPT_TRUTH: truth_path = optarg; break;
		case OPT_TRUE_MFU:
		case OPT_TRUE_MBU:
		case OPT_TRUE_STEP:
		case OPT_TRUE_SEQ: {
			static const char *const key[] = { "prefill_mfu", "decode_mbu",
							   "step_overhead_ms", "seq_overhead_us" };
			static const char *const flag[] = { "true-prefill-mfu", "true-decode-mbu",
							    "true-step-overhead-ms",
							    "true-seq-overhead-us" };
			int k = c - OPT_TRUE_MFU;
			char *end;
			double x = strtod(optarg, &end);
			if (end == optarg || *end ||
			    sim_truth_set(&truth_flags, key[k], x, why, sizeof(why))) {
				fprintf(stderr, "fairgate-sim: --%s %s: %s\n", flag[k], optarg,
					end == optarg || *end ? "not a number" : why);
				return 2;
			}
			truth_flag_set[k] = true;
			break;
		}
		case OPT_HIDDEN:
			o.metrics.show_hidden_0_11 = !strcmp(optarg, "0.11");
			break;
		case OPT_API_KEY:
			if (!*optarg || strlen(optarg) > SIM_MAX_API_KEY_LEN ||
			    o.n_api_keys == SIM_MAX_API_KEYS)
				return bad("api-key", "(a key)");
			o.api_keys[o.n_api_keys++] = optarg;
			break;
		case OPT_BEST_OF:
			if (!strcmp(optarg, "ignore"))
				o.refuse_best_of = false;
			else if (!strcmp(optarg, "refuse"))
				o.refuse_best_of = true;
			else
				return bad("best-of", optarg);
			break;
		case 'h': usage(stdout); return 0;
		default: usage(stderr); return 2;
		}
	}
	/* vLLM reads VLLM_API_KEY when no --api-key is given */
	const char *env_key = getenv("VLLM_API_KEY");
	if (!o.n_api_keys && env_key && *env_key) {
		if (strlen(env_key) > SIM_MAX_API_KEY_LEN)
			return bad("api-key", "(VLLM_API_KEY)");
		o.api_keys[o.n_api_keys++] = env_key;
	}
	if (optind < argc) {
		fprintf(stderr, "fairgate-sim: unexpected argument '%s'\n", argv[optind]);
		return 2;
	}

	struct fg_policy *policy = calloc(1, sizeof(*policy));
	struct fg_cost_model cm;
	if (!policy) {
		fprintf(stderr, "fairgate-sim: out of memory\n");
		return 1;
	}
	fg_policy_defaults(policy);
	if (policy_path) {
		struct fg_policy_error perr;
		char msg[600];
		if (fg_policy_parse_file(policy_path, policy, &perr)) {
			fg_policy_error_format(&perr, msg, sizeof(msg));
			fprintf(stderr, "fairgate-sim: %s\n", msg);
			fg_policy_free(policy);
			return 1;
		}
	}
	/* the file, then the flags over it */
	if (truth_path && sim_truth_load(truth_path, &truth, why, sizeof(why))) {
		fprintf(stderr, "fairgate-sim: --truth %s\n", why);
		fg_policy_free(policy);
		return 1;
	}
	if (truth_flag_set[0])
		truth.prefill_mfu = truth_flags.prefill_mfu;
	if (truth_flag_set[1])
		truth.decode_mbu = truth_flags.decode_mbu;
	if (truth_flag_set[2])
		truth.step_overhead_s = truth_flags.step_overhead_s;
	if (truth_flag_set[3])
		truth.seq_overhead_s = truth_flags.seq_overhead_s;
	struct fg_cost_model policy_cm;
	fg_cost_model_init(&policy_cm, &policy->replica);
	sim_truth_hardware(&truth, &policy->replica, &cm);
	o.engine.step_overhead_s = truth.step_overhead_s;
	o.engine.seq_overhead_s = truth.seq_overhead_s;
	o.metrics.true_prompt_token_s = cm.prompt_token_s;
	o.metrics.policy_prompt_token_s = policy_cm.prompt_token_s;
	o.metrics.true_decode_step_s = cm.decode_step_s;
	o.metrics.policy_decode_step_s = policy_cm.decode_step_s;
	o.engine.kv_pool_tokens = pool_override ? pool_override : policy->replica.kv_pool_tokens;
	if (!o.model[0]) {
		snprintf(o.model, sizeof(o.model), "%s",
			 policy->replica.model.name[0] ? policy->replica.model.name : "fairgate-sim");
		if (strchr(o.model, '"') || strchr(o.model, '\\'))
			strcpy(o.model, "fairgate-sim");
	}
	fg_policy_free(policy);

	sigset_t mask;
	sigemptyset(&mask);
	sigaddset(&mask, SIGINT);
	sigaddset(&mask, SIGTERM);
	sigprocmask(SIG_BLOCK, &mask, NULL);
	sim_cli_raise_fd_limit();
	signal(SIGPIPE, SIG_IGN);
	int sfd = signalfd(-1, &mask, SFD_NONBLOCK | SFD_CLOEXEC);

	struct fg_loop *loop = fg_loop_new();
	char err[256];
	struct sim_server *srv = NULL;
	/* SIGINT and SIGTERM are blocked: without the signalfd in the loop
	 * nothing could stop us but SIGKILL, so refuse to run */
	if (sfd < 0 || !loop || fg_loop_add(loop, sfd, EPOLLIN, on_signal, NULL)) {
		fprintf(stderr, "fairgate-sim: cannot watch SIGINT/SIGTERM: %s\n", strerror(errno));
		goto out;
	}
	srv = sim_server_new(loop, &o, &cm, err, sizeof(err));
	if (!srv) {
		fprintf(stderr, "fairgate-sim: %s\n", err);
		goto out;
	}
	char speedup[32];
	if (o.speedup > 0)
		snprintf(speedup, sizeof(speedup), "%g", o.speedup);
	else
		strcpy(speedup, "inf");
	fprintf(stderr,
		"fairgate-sim: listening on %s%s%s:%u model=%s speedup=%s policy=%s "
		"prompt_token=%.3fus decode_step(ref)=%.3fms kv_pool=%llu tokens (%llu blocks of %u)\n",
		strchr(o.host, ':') ? "[" : "", o.host, strchr(o.host, ':') ? "]" : "",
		sim_server_port(srv), o.model, speedup,
		o.engine.policy == SIM_SCHED_PRIORITY ? "priority" : "fcfs", cm.prompt_token_s * 1e6,
		cm.decode_step_s * 1e3, (unsigned long long)o.engine.kv_pool_tokens,
		(unsigned long long)(o.engine.kv_pool_tokens / o.engine.block_size),
		o.engine.block_size);
	if (!sim_truth_is_policy(&truth))
		fprintf(stderr,
			"fairgate-sim: truth differs from the policy: prompt_token %.3fus (policy "
			"%.3fus), decode_step(ref) %.3fms (policy %.3fms), step overhead %.3fms, "
			"per sequence %.3fus\n", cm.prompt_token_s * 1e6,
			policy_cm.prompt_token_s * 1e6, cm.decode_step_s * 1e3,
			policy_cm.decode_step_s * 1e3, truth.step_overhead_s * 1e3,
			truth.seq_overhead_s * 1e6);
	rc = fg_loop_run(loop) ? 1 : 0;
out:
	sim_server_free(srv);
	fg_loop_free(loop);
	if (sfd >= 0)
		close(sfd);
	return rc;
}
