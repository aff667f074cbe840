/* policy_watch.c — the policy files' inotify watch; see policy_watch.h.
 *
 * Kubernetes updates a mounted ConfigMap or Secret by writing a new
 * timestamped directory and renaming the `..data` symlink over the old one:
 * the path fairgated was given (policy.yaml -> ..data/policy.yaml) is never
 * written in place, so the watch is on the directory that holds it, for any
 * entry created, moved in or out, written or removed (an editor's
 * write-and-rename and a plain overwrite are seen the same way). A volume
 * mounted with subPath is never updated by the kubelet at all.
 *
 * Events re-arm a settle timer; when it fires the files are read and, if
 * either text differs from the last one tried, parsed and applied. A text
 * is tried once: a bad edit is one log line and changes nothing, and the
 * next edit is tried afresh. */
#include "agent/policy_watch.h"

#include <errno.h>
#include <libgen.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <unistd.h>

#include "agent/policy_apply.h"

#define WATCH_MASK (IN_CREATE | IN_MOVED_TO | IN_MOVED_FROM | IN_CLOSE_WRITE | IN_DELETE | \
		    IN_DELETE_SELF | IN_MOVE_SELF)

struct fg_policy_watch {
	struct fg_agent_state *st;
	int fd;
	int wd[2];
	char dir[2][PATH_MAX];
	uint64_t settle_timer;
	char *text, *tenants_text;    /* last tried */
	uint64_t applied, refused;
	uint64_t last_change_ns;
	bool last_ok;
	char last_result[600];
};

static bool same_text(const char *a, const char *b)
{
	return (!a && !b) || (a && b && !strcmp(a, b));
}

static void remember(struct fg_policy_watch *w, char *text, char *tenants_text)
{
	free(w->text);
	free(w->tenants_text);
	w->text = text;
	w->tenants_text = tenants_text;
}

static void refused(struct fg_policy_watch *w, const char *why)
{
	w->refused++;
	w->last_ok = false;
	snprintf(w->last_result, sizeof(w->last_result), "%s", why);
	fprintf(stderr, "fairgated: policy watch: not applied, the running policy stays: %s\n", why);
}

static void check_files(struct fg_loop *loop, void *ctx)
{
	struct fg_policy_watch *w = ctx;
	const struct fg_agent_opts *o = &w->st->opts;
	struct fg_policy_error perr;
	char *text = NULL, *ttext = NULL, err[512];
	size_t len = 0, tlen = 0;

	(void)loop;
	w->settle_timer = 0;
	if (fg_policy_read_file(o->policy_path, &text, &len, &perr) ||
	    (o->tenants_path && fg_policy_read_file(o->tenants_path, &ttext, &tlen, &perr))) {
		/* gone or unreadable: not a text to remember; the next event retries */
		fg_policy_error_format(&perr, err, sizeof(err));
		w->last_change_ns = fg_now_ns();
		refused(w, err);
		free(text);
		return;
	}
	if (same_text(text, w->text) && same_text(ttext, w->tenants_text)) {
		free(text);
		free(ttext);
		return;
	}
	w->last_change_ns = fg_now_ns();
	fprintf(stderr, "fairgated: policy watch: %s%s%s changed\n", o->policy_path,
		o->tenants_path ? " or " : "", o->tenants_path ? o->tenants_path : "");
	struct fg_policy *np = fg_agent_parse_policy(o, text, len, o->policy_path, ttext, tlen,
						     o->tenants_path, err, sizeof(err));
	json_t *r = np ? fg_agent_apply_policy(w->st, np, o->policy_path, err, sizeof(err)) : NULL;
	remember(w, text, ttext);
	if (!r) {
		refused(w, err);
		return;
	}
	w->applied++;
	w->last_ok = true;
	snprintf(w->last_result, sizeof(w->last_result), "applied: %lld tenants (%zu added, %zu removed)",
		 (long long)json_integer_value(json_object_get(r, "tenants")),
		 json_array_size(json_object_get(r, "added")),
		 json_array_size(json_object_get(r, "removed")));
	json_decref(r);
}

static void on_events(struct fg_loop *loop, int fd, uint32_t events, void *ctx)
{
	struct fg_policy_watch *w = ctx;
	char buf[4096] __attribute__((aligned(__alignof__(struct inotify_event))));
	bool any = false;
	ssize_t n;

	(void)events;
	while ((n = read(fd, buf, sizeof(buf))) > 0) {
		for (char *p = buf; p < buf + n;) {
			const struct inotify_event *ev = (const struct inotify_event *)p;
			if (ev->mask & (IN_DELETE_SELF | IN_MOVE_SELF | IN_IGNORED))
				for (int i = 0; i < 2; i++)
					if (w->wd[i] == ev->wd) {
						fprintf(stderr, "fairgated: policy watch: %s went away; "
							"changes there are no longer seen\n", w->dir[i]);
						w->wd[i] = -1;
					}
			any = true;
			p += sizeof(*ev) + ev->len;
		}
	}
	if (!any)
		return;
	if (w->settle_timer)
		fg_loop_timer_cancel(loop, w->settle_timer);
	w->settle_timer = fg_loop_timer(loop, FG_WATCH_SETTLE_NS, check_files, w);
}

static int add_dir(struct fg_policy_watch *w, int i, const char *path, char *err, size_t errlen)
{
	char copy[PATH_MAX];

	snprintf(copy, sizeof(copy), "%s", path);
	snprintf(w->dir[i], sizeof(w->dir[i]), "%s", dirname(copy));
	if (i == 1 && !strcmp(w->dir[0], w->dir[1]))
		return 0; /* one directory holds both */
	w->wd[i] = inotify_add_watch(w->fd, w->dir[i], WATCH_MASK);
	if (w->wd[i] < 0) {
		snprintf(err, errlen, "watching %s: %s", w->dir[i], strerror(errno));
		return -1;
	}
	return 0;
}

int fg_policy_watch_start(struct fg_agent_state *st, const char *text, const char *tenants_text,
			  char *err, size_t errlen)
{
	struct fg_policy_watch *w = calloc(1, sizeof(*w));

	if (!w) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	w->st = st;
	w->wd[0] = w->wd[1] = -1;
	w->text = text ? strdup(text) : NULL;
	w->tenants_text = tenants_text ? strdup(tenants_text) : NULL;
	w->fd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
	if (w->fd < 0) {
		snprintf(err, errlen, "inotify: %s", strerror(errno));
		goto fail;
	}
	if (add_dir(w, 0, st->opts.policy_path, err, errlen) ||
	    (st->opts.tenants_path && add_dir(w, 1, st->opts.tenants_path, err, errlen)))
		goto fail;
	if (fg_loop_add(st->loop, w->fd, EPOLLIN, on_events, w)) {
		snprintf(err, errlen, "watching the policy files: %s", strerror(errno));
		goto fail;
	}
	/* a change between reading the files and watching them is seen too */
	w->settle_timer = fg_loop_timer(st->loop, 0, check_files, w);
	st->watch = w;
	fprintf(stderr, "fairgated: watching %s%s%s for policy changes\n", w->dir[0],
		w->wd[1] >= 0 ? " and " : "", w->wd[1] >= 0 ? w->dir[1] : "");
	return 0;
fail:
	if (w->fd >= 0)
		close(w->fd);
	remember(w, NULL, NULL);
	free(w);
	return -1;
}

void fg_policy_watch_stop(struct fg_agent_state *st)
{
	struct fg_policy_watch *w = st->watch;

	if (!w)
		return;
	if (w->settle_timer)
		fg_loop_timer_cancel(st->loop, w->settle_timer);
	fg_loop_del(st->loop, w->fd);
	close(w->fd);
	remember(w, NULL, NULL);
	free(w);
	st->watch = NULL;
}

void fg_policy_watch_get(const struct fg_agent_state *st, struct fg_policy_watch_status *out)
{
	const struct fg_policy_watch *w = st->watch;

	memset(out, 0, sizeof(*out));
	out->last_change_age_s = -1;
	if (!w)
		return;
	out->on = true;
	out->applied = w->applied;
	out->refused = w->refused;
	out->last_ok = w->last_ok;
	if (w->last_change_ns)
		out->last_change_age_s = (double)(fg_now_ns() - w->last_change_ns) / 1e9;
	snprintf(out->last_result, sizeof(out->last_result), "%s", w->last_result);
}
