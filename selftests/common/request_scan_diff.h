/* request_scan_diff.h — the body check (lib/json_tok.c's reader), one-shot
 * (fg_request_parse) and fed in pieces (fg_request_scan_*), checked against
 * the reference reader (fg_request_parse_reference: yajl, what the check
 * was before) on the same bytes: for any way of cutting the body into
 * reads, the same verdict, the same message and parameter, and the same
 * fg_req_info byte for byte. Each piece is
 * handed over in a buffer that moves between reads (as the proxy's body
 * buffer does when it grows), so a scanner that kept a pointer into an old
 * one is caught by the sanitizers. Shared by test_proxy_http,
 * test_request_scan (the fuzz corpus) and fuzz_request_json. Header-only:
 * each includer gets its own copy of these few static functions. */
#ifndef FAIRGATE_REQUEST_SCAN_DIFF_H
#define FAIRGATE_REQUEST_SCAN_DIFF_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "agent/http/http_request.h"

#define SCAN_DIFF_MSG 384

/* The one-shot answer every split must reproduce. */
struct scan_ref {
	int rc;
	char msg[SCAN_DIFF_MSG];
	const char *param;
	struct fg_req_info info;
};

/* Feed body[0, len) in pieces ending at cuts[0..n) (increasing, < len),
 * then finish; "" when it agrees with ref, else what differs (in why). */
static bool scan_diff_pieces(enum fg_api api, const char *body, size_t len, const size_t *cuts,
			     size_t n, const struct scan_ref *ref, char *why, size_t whylen)
{
	struct fg_req_scan *s = fg_request_scan_new(api);
	char *buf = NULL;
	struct fg_req_info info;
	char msg[SCAN_DIFF_MSG] = "";
	const char *param = NULL;

	if (!s) {
		snprintf(why, whylen, "fg_request_scan_new failed");
		return false;
	}
	for (size_t i = 0; i < n; i++) {
		/* a fresh buffer each time: the bytes so far, somewhere new */
		char *moved = malloc(cuts[i] ? cuts[i] : 1);
		memcpy(moved, body, cuts[i]);
		free(buf);
		buf = moved;
		fg_request_scan_feed(s, buf, cuts[i]);
	}
	char *whole = malloc(len ? len : 1);
	memcpy(whole, body, len);
	free(buf);
	int rc = fg_request_scan_finish(s, whole, len, &info, msg, sizeof(msg), &param);
	free(whole);
	bool same = (rc != 0) == (ref->rc != 0) && !strcmp(msg, ref->msg) &&
		    (param == ref->param || (param && ref->param && !strcmp(param, ref->param))) &&
		    !memcmp(&info, &ref->info, sizeof(info));
	if (!same)
		snprintf(why, whylen, "rc %d/%d, msg \"%s\" / \"%s\", param %s/%s, info %s", rc, ref->rc,
			 msg, ref->msg, param ? param : "-", ref->param ? ref->param : "-",
			 memcmp(&info, &ref->info, sizeof(info)) ? "differs" : "same");
	return same;
}

static void scan_ref_of(enum fg_api api, const char *body, size_t len, struct scan_ref *ref)
{
	memset(ref, 0, sizeof(*ref));
	ref->rc = fg_request_parse_reference(api, body, len, &ref->info, ref->msg, sizeof(ref->msg),
					     &ref->param);
}

/* The one-shot fast reader against the reference. */
static bool scan_diff_oneshot(enum fg_api api, const char *body, size_t len,
			      const struct scan_ref *ref, char *why, size_t whylen)
{
	struct fg_req_info info;
	char msg[SCAN_DIFF_MSG] = "";
	const char *param = NULL;
	char *copy = malloc(len ? len : 1);

	memcpy(copy, body, len); /* exactly len bytes: ASan sees any read past them */
	int rc = fg_request_parse(api, copy, len, &info, msg, sizeof(msg), &param);
	free(copy);
	bool same = (rc != 0) == (ref->rc != 0) && !strcmp(msg, ref->msg) &&
		    (param == ref->param || (param && ref->param && !strcmp(param, ref->param))) &&
		    !memcmp(&info, &ref->info, sizeof(info));
	if (!same)
		snprintf(why, whylen, "one-shot: rc %d/%d, msg \"%s\" / \"%s\", param %s/%s, info %s",
			 rc, ref->rc, msg, ref->msg, param ? param : "-",
			 ref->param ? ref->param : "-",
			 memcmp(&info, &ref->info, sizeof(info)) ? "differs" : "same");
	return same;
}

/* Every cut into two reads (bodies up to `every_up_to` bytes), one byte per
 * read, and `random_splits` random cuttings drawn from seed. false with
 * why set at the first disagreement. */
static bool scan_diff(enum fg_api api, const char *body, size_t len, size_t every_up_to,
		      unsigned random_splits, uint64_t seed, char *why, size_t whylen)
{
	struct scan_ref ref;
	size_t *cuts = calloc(len + 1, sizeof(*cuts));
	bool ok = true;

	if (!cuts) {
		snprintf(why, whylen, "out of memory");
		return false;
	}
	scan_ref_of(api, body, len, &ref);
	if (!scan_diff_oneshot(api, body, len, &ref, why, whylen) ||
	    !scan_diff_pieces(api, body, len, cuts, 0, &ref, why, whylen)) {
		ok = false;
		goto out;
	}
	for (size_t c = 1; len <= every_up_to && c < len; c++)
		if (!scan_diff_pieces(api, body, len, &c, 1, &ref, why, whylen)) {
			size_t l = strlen(why);
			snprintf(why + l, whylen - l, " (two reads, cut at %zu)", c);
			ok = false;
			goto out;
		}
	size_t n = 0;
	for (size_t c = 1; c < len; c++)
		cuts[n++] = c;
	if (!scan_diff_pieces(api, body, len, cuts, n, &ref, why, whylen)) {
		size_t l = strlen(why);
		snprintf(why + l, whylen - l, " (one byte per read)");
		ok = false;
		goto out;
	}
	for (unsigned r = 0; r < random_splits; r++) {
		n = 0;
		for (size_t c = 0;;) {
			seed = seed * 6364136223846793005ull + 1442695040888963407ull;
			c += 1 + (size_t)((seed >> 33) % (len / 4 + 8));
			if (c >= len)
				break;
			cuts[n++] = c;
		}
		if (!scan_diff_pieces(api, body, len, cuts, n, &ref, why, whylen)) {
			size_t l = strlen(why);
			snprintf(why + l, whylen - l, " (%zu random reads)", n + 1);
			ok = false;
			goto out;
		}
	}
out:
	free(cuts);
	return ok;
}

#endif
