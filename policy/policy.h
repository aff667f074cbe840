/* policy.h — the in-memory form of a fairgate policy file.
 *
 * One struct tree that the parser (policy_parse.c) fills and everything else
 * reads: the cost model takes `replica`, the agent takes `agent`, the queue and
 * buckets take `tiers`/`tenants`. Fixed-size arrays on purpose, except the
 * tenants: a policy is one heap block plus its tenant array, sized to the
 * policy (up to 65,536 tenants of ~640 bytes would be 42 MB inline for a
 * policy of three), so a hot reload is "parse into a new block, swap a
 * pointer", and nothing is half-applied when the new file is bad. A policy
 * the parser filled is given back with fg_policy_free (or fg_policy_release
 * when its block is not the caller's malloc).
 *
 * Units: seconds, bytes, tokens, units (1 unit = replica time of one uncached
 * prompt token). No I/O in this header's users inside policy/.
 */
#ifndef FAIRGATE_POLICY_H
#define FAIRGATE_POLICY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "maps/fairgate_limits.h"

/* What the kernel's maps hold, a policy must fit: these are the ABI's. */
#define FG_NAME_MAX FG_NAME_LEN               /* tenant/tier name incl. NUL */
#define FG_MAX_TENANTS FG_MAP_MAX_TENANTS     /* also the tenant ids */
/* Slots a per-tenant array gets for a policy of n tenants: its size (at
 * least one, so an empty policy still has a valid array), capped at the limit. */
static inline uint32_t fg_tenant_slots(uint32_t n)
{
	return n > FG_MAX_TENANTS ? FG_MAX_TENANTS : n ? n : 1;
}
#define FG_MAX_PORTS FG_MAX_PROTECTED_PORTS
#define FG_MAX_IFACES FG_MAX_GATE_IFACES
#define FG_IFNAME_MAX 16         /* interface name incl. NUL (IF_NAMESIZE) */
#define FG_MAX_TIERS 16
#define FG_MAX_KEYS 8            /* API keys per tenant */
#define FG_MAX_SOURCES 16        /* CIDRs per tenant */
#define FG_MAX_POLICY_SOURCES FG_MAP_MAX_STATIC /* CIDRs of all tenants together */
#define FG_MAX_TRUSTED 16
/* agent.workers: proxy threads, each with its own epoll loop and listener
 * (agent/proxy/workers.c); 0 in the policy = the CPUs the agent may use,
 * capped here */
#define FG_MAX_WORKERS 64
#define FG_AUTO_WORKERS_CAP 16
#define FG_HOSTPORT_MAX 64
#define FG_PATH_MAX 256          /* file paths inside the policy, incl. NUL */
#define FG_MAX_PASSTHROUGH 16    /* agent.passthrough entries */
#define FG_URL_PATH_MAX 128      /* a passthrough path, incl. NUL */

struct fg_model {
	char name[64];
	double params;          /* parameter count */
	uint32_t layers;
	uint32_t kv_heads;
	uint32_t head_dim;
	double weight_bytes;    /* bytes per weight (1 = FP8) */
	double kv_bytes;        /* bytes per KV element (2 = FP16/BF16) */
	/* what admission assumes of the tokenizer before it has seen a tenant's
	 * usage (policy/pricing.c): the prior of every tenant's chars/token, the
	 * chat template's tokens per message and per request, and the fixed
	 * count an image or audio part becomes (0 = the model takes none) */
	double chars_per_token;
	uint32_t message_tokens;
	uint32_t reply_tokens;
	uint32_t image_tokens;
	uint32_t audio_tokens;
};

struct fg_replica {
	struct fg_model model;
	uint32_t gpus;
	double peak_flops;      /* per GPU, FLOP/s */
	double hbm_bytes_per_s; /* per GPU */
	double usd_per_hour;    /* per GPU */
	double prefill_mfu;
	double decode_mbu;
	uint32_t decode_batch;  /* reference batch for pricing */
	uint32_t decode_context;/* reference context (tokens) for pricing */
	uint64_t kv_pool_tokens;
	double ceiling;         /* fraction of replica time that may be sold */
	double cached_prompt_weight;
};

struct fg_tier {
	char name[FG_NAME_MAX];
	double weight;
	uint64_t max_context;    /* tokens: prompt + max output */
	uint64_t kv_cap_tokens;  /* resident KV per tenant per replica */
	double burst_s;          /* bucket depth in seconds of quota */
	double max_queue_s;      /* longest wait in the gateway queue */
	int32_t priority;        /* vLLM priority (lower = earlier) */
	uint32_t default_max_tokens; /* reserved output when the request names none */
	double tpot_p99_ms;      /* latency SLO bought: decode batch capped (0 = none) */
};

struct fg_cidr {
	uint8_t family;          /* AF_INET or AF_INET6 */
	uint8_t prefixlen;
	uint8_t addr[16];        /* network order; IPv4 in the first 4 bytes */
};

enum fg_cache_mode { FG_CACHE_SALTED = 0, FG_CACHE_SHARED = 1 };

struct fg_tenant {
	char name[FG_NAME_MAX];
	uint32_t id;             /* index in policy->tenants, also the BPF map key */
	uint32_t tier;           /* index in policy->tiers */
	double units_per_s;      /* resolved (from `replicas` too) */
	double replicas;         /* as given, 0 if the quota was units_per_s */
	double burst_s;          /* resolved: tenant override, else tier */
	uint32_t n_keys;
	uint8_t keys[FG_MAX_KEYS][32]; /* SHA-256 of API keys */
	uint32_t n_sources;
	struct fg_cidr sources[FG_MAX_SOURCES];
	enum fg_cache_mode cache;
	double fleet_floor_units_per_s; /* agent.fleet: this node's share never drops below */
};

struct fg_hostport {
	char host[FG_HOSTPORT_MAX]; /* numeric address as written, without the [] of
				     * an IPv6 address (ready for inet_pton); "" if unset */
	uint16_t port;
};

/* agent.fleet: one bucket per tenant across every node, leased from Redis
 * (policy/fleet_grant.h has the rules). Without the block, each node's
 * buckets hold the whole contract, as on a single node. */
#define FG_FLEET_NODE_MAX 64
struct fg_fleet_cfg {
	bool enabled;                    /* the block is present */
	char redis_host[FG_HOSTPORT_MAX];/* a name (resolved by the grant thread) or an address */
	uint16_t redis_port;
	char redis_unix[FG_PATH_MAX];    /* or a unix socket path; "" = TCP */
	char node[FG_FLEET_NODE_MAX];    /* this node's name in the fleet; "" = hostname */
	double period_s;                 /* T: a grant covers this long (2) */
	double buffer_s;                 /* held beyond the period's expected spend (1) */
	double node_timeout_s;           /* a node silent this long is presumed gone (300) */
	double call_timeout_s;           /* one Redis round trip, connect included (0.5) */
	char password_file[FG_PATH_MAX]; /* AUTH with its first line; "" = none */
};

/* agent.limits: what one client, all clients together and one tenant may
 * hold of the agent. 0 in a field the policy leaves out means "derived at
 * start" where a field says so (the agent knows its fd limit and its
 * container's memory limit; the policy does not). */
struct fg_agent_limits {
	uint32_t max_connections;            /* client connections; 0 = from RLIMIT_NOFILE at start */
	uint32_t max_connections_per_source; /* from one client address (0: half the total) */
	uint64_t max_buffered_bytes;         /* request body bytes held, all clients;
					      * 0 = half the cgroup memory limit at start */
	uint32_t max_inflight_per_tenant;    /* admitted, not yet answered (256) */
};

enum fg_agent_mode { FG_MODE_FRONT = 0, FG_MODE_TRANSPARENT = 1 };
enum fg_xdp_mode { FG_XDP_NATIVE = 0, FG_XDP_GENERIC = 1 };
enum fg_metering { FG_METER_REPLICA_TIME = 0, FG_METER_RAW_TOKENS = 1, FG_METER_REQUESTS = 2 };
enum fg_sched_policy { FG_ENGINE_FCFS = 0, FG_ENGINE_PRIORITY = 1 };
/* How replica_time metering prices output tokens (cost_model.h). */
enum fg_output_pricing { FG_OUTPUT_CONTEXT = 0, FG_OUTPUT_FLAT = 1 };
/* agent.calibration: measure the engine (policy/calibration.c) and report
 * (advise, the default: no price moves unasked), let prices follow
 * (on: policy/calib_follow.c), or neither (off). */
enum fg_calib_mode { FG_CALIB_ADVISE = 0, FG_CALIB_OFF = 1, FG_CALIB_ON = 2 };

/* HTTP methods a passthrough entry allows, one bit each. */
enum fg_method_bit {
	FG_M_GET = 1u << 0, FG_M_HEAD = 1u << 1, FG_M_POST = 1u << 2, FG_M_PUT = 1u << 3,
	FG_M_PATCH = 1u << 4, FG_M_DELETE = 1u << 5, FG_M_OPTIONS = 1u << 6,
};

/* A path the proxy does not price by itself but the operator lets through
 * (agent.passthrough), with its price: `units` per request, charged to the
 * tenant whose key it carries (auth) or to nobody (no key asked, units 0). */
struct fg_passthrough {
	char path[FG_URL_PATH_MAX]; /* canonical, without the trailing '*' of a prefix */
	bool prefix;                /* written with a trailing star: every path it begins */
	uint32_t methods;           /* enum fg_method_bit */
	double units;
	int auth;                   /* 1: the request must carry a tenant key (an int: the enum decoder writes one) */
};

struct fg_agent {
	enum fg_agent_mode mode;
	struct fg_hostport listen;
	struct fg_hostport engine;
	uint32_t n_protected_ports;
	uint16_t protected_ports[FG_MAX_PORTS];
	uint32_t n_interfaces;
	char interfaces[FG_MAX_IFACES][FG_IFNAME_MAX];
	bool interfaces_auto;               /* `interfaces: auto`: the agent attaches gate
					     * where its namespace's default route goes */
	enum fg_xdp_mode xdp_mode;
	double deny_allowance_per_s;
	double shed_rst_per_s;              /* RSTs per tenant per second gate may send; 0 = off */
	struct fg_hostport metrics_listen;
	uint32_t n_trusted_proxies;
	struct fg_cidr trusted_proxies[FG_MAX_TRUSTED];
	uint64_t long_context_threshold;    /* 0 = no long-context routing */
	struct fg_hostport long_context_upstream;
	double engine_queue_steps;
	enum fg_metering metering;
	enum fg_output_pricing output_pricing; /* context: by the KV each token decodes against */
	enum fg_calib_mode calibration;     /* advise: measured prices reported, not charged */
	enum fg_sched_policy engine_scheduling; /* what the engine runs */
	uint64_t max_body_bytes;
	double kv_headroom;                 /* fraction of the pool the node may reserve */
	double peak_window_s;               /* peak units/s measured over windows this long (60) */
	char salt_secret_file[FG_PATH_MAX]; /* per-tenant cache salts derive from it; "" = unset */
	/* proxy timeouts, seconds (agent.timeouts: header_s, body_s, idle_s,
	 * upstream_s, tokenize_s, request_s) */
	double header_timeout_s;            /* request line + headers must arrive within */
	double body_timeout_s;              /* the body must arrive within, after the headers */
	double idle_timeout_s;              /* keep-alive connection with no request */
	double upstream_timeout_s;          /* engine silent (no byte) for this long: 504 */
	double tokenize_timeout_s;          /* the engine's /tokenize must answer within */
	double request_timeout_s;           /* a request's whole life, from its first byte (3600) */
	uint32_t n_passthrough;
	struct fg_passthrough passthrough[FG_MAX_PASSTHROUGH];
	/* transparent mode: with no agent listener, steer lets connections
	 * through to the engine (1, the default) or refuses them (0) */
	int steer_fail_open;
	struct fg_fleet_cfg fleet;
	struct fg_agent_limits limits;
	/* the engine's own key (vLLM's --api-key), sent instead of the tenant's,
	 * which is never forwarded; "" = the engine takes no key */
	char engine_api_key_file[FG_PATH_MAX];
	/* /metrics answers only a bearer token equal to this file's first line;
	 * "" = /metrics is open to whoever reaches metrics_listen */
	char metrics_token_file[FG_PATH_MAX];
	uint32_t workers;                   /* agent.workers (1); 0 = auto */
};

struct fg_policy {
	struct fg_replica replica;
	uint32_t n_tiers;
	struct fg_tier tiers[FG_MAX_TIERS];
	uint32_t n_tenants;
	struct fg_tenant *tenants;  /* n_tenants of them, owned (policy_tenants.c) */
	uint32_t tenants_cap;       /* room allocated, >= n_tenants */
	struct fg_agent agent;
};

/* Where a policy file went wrong: one line, "FILE:LINE:COL: message". */
struct fg_policy_error {
	char file[256];
	unsigned line;   /* 1-based; 0 = whole file */
	unsigned col;    /* 1-based */
	char message[256];
};

/* Fill `out` with defaults (the seed's replica, no tiers, no tenants). */
void fg_policy_defaults(struct fg_policy *out);

/* The tenant array (policy_tenants.c). fg_policy_alloc_tenants gives the
 * policy zeroed room for `n` tenants (what it held is freed; n_tenants is
 * left for the caller to count up): 0, or -1 when memory is short.
 * fg_policy_release frees what the policy owns besides its own block;
 * fg_policy_free releases and frees the block (NULL is fine).
 * fg_policy_copy makes dst (uninitialised) a deep copy of src: 0 or -1. */
int fg_policy_alloc_tenants(struct fg_policy *p, uint32_t n);
/* One more tenant for a policy built by hand (tests, the simulator's
 * scenarios): zeroed, its id the next, n_tenants counted; NULL when memory
 * is short or the policy holds FG_MAX_TENANTS. */
struct fg_tenant *fg_policy_add_tenant(struct fg_policy *p);
void fg_policy_release(struct fg_policy *p);
void fg_policy_free(struct fg_policy *p);
int fg_policy_copy(struct fg_policy *dst, const struct fg_policy *src);

/* A tenant name's hash (FNV-1a), for the open-addressing indexes by name
 * (the parser's duplicate check, the proxy's tenant table). */
uint32_t fg_tenant_name_hash(const char *name);
/* Tenant ids in the order of their names (malloc'd, n_tenants of them; NULL
 * when memory is short or there are none), so that matching the names of
 * two policies, or finding duplicates, is a sort and searches, not a scan
 * per tenant: at 65,536 tenants a scan per tenant is 2^31 compares.
 * fg_policy_find_sorted searches such an order: the tenant or NULL (with
 * no order, NULL from fg_policy_name_order, a scan). */
uint32_t *fg_policy_name_order(const struct fg_policy *p);
const struct fg_tenant *fg_policy_find_sorted(const struct fg_policy *p, const uint32_t *order,
					      const char *name);

/* Parse YAML (or JSON, which is YAML) into *out. Returns 0, or -1 with *err
 * filled; *out is unspecified on error (owning no tenants), so parse into a
 * scratch copy. *out is zeroed (calloc) or a policy parsed or built before,
 * whose tenants are released first. */
int fg_policy_parse_buffer(const char *buf, size_t len, const char *filename,
			   struct fg_policy *out, struct fg_policy_error *err);
int fg_policy_parse_file(const char *path, struct fg_policy *out,
			 struct fg_policy_error *err);
/* A policy in two files: the tenants file is a mapping with the one key
 * `tenants` (a Kubernetes Secret beside the policy's ConfigMap, say), the
 * policy file has every other key and no `tenants`. They combine into one
 * policy whose tenant list is the tenants file's; every error names the
 * file its line is in. With tenants_buf / tenants_path NULL these are
 * fg_policy_parse_buffer / fg_policy_parse_file. */
int fg_policy_parse_split(const char *buf, size_t len, const char *filename,
			  const char *tenants_buf, size_t tenants_len, const char *tenants_filename,
			  struct fg_policy *out, struct fg_policy_error *err);
int fg_policy_parse_files(const char *path, const char *tenants_path, struct fg_policy *out,
			  struct fg_policy_error *err);
/* A policy (or tenants) file's text, NUL-terminated, for parsing later;
 * -1 with err naming the file (line 0) when it cannot be read. */
int fg_policy_read_file(const char *path, char **text, size_t *len, struct fg_policy_error *err);

/* "FILE:LINE:COL: message" into buf. */
void fg_policy_error_format(const struct fg_policy_error *err, char *buf, size_t len);

/* Lookups; NULL / -1 when absent. */
const struct fg_tenant *fg_policy_tenant_by_name(const struct fg_policy *p, const char *name);
const struct fg_tenant *fg_policy_tenant_by_key_hash(const struct fg_policy *p, const uint8_t hash[32]);
int fg_policy_tier_by_name(const struct fg_policy *p, const char *name);

#endif
