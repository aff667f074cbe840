/* chat_prompt.c — see chat_prompt.h. */
#include "chat_prompt.h"

#include <stdlib.h>
#include <string.h>

enum part_kind { PART_TEXT, PART_MEDIA };

struct part {
	enum part_kind kind;
	enum sim_modality modality;
	const char *data;   /* text, or the media item's source */
	size_t len;
};

/* A URL given as {"url": "..."} or, as vLLM also takes, a plain string. */
static const char *url_of(json_t *v, size_t *len)
{
	if (json_is_object(v))
		v = json_object_get(v, "url");
	if (!json_is_string(v))
		return NULL;
	*len = json_string_length(v);
	return json_string_value(v);
}

static int bad_part(struct sim_error *err, const char *param, size_t msg, size_t i,
		    const char *what)
{
	return sim_error_set(err, 400, param, "%s[%zu].content[%zu]: %s", param, msg, i, what);
}

/* Classify one content part; -1 with *err if vLLM (or the served model)
 * would refuse it. */
static int read_part(json_t *p, size_t msg, size_t i, const struct sim_request_limits *lim,
		     const char *param, struct part *out, struct sim_error *err)
{
	const char *type = json_string_value(json_object_get(p, "type"));
	json_t *v;

	if (!json_is_object(p) || !type)
		return bad_part(err, param, msg, i, "must be an object with a type");
	if (!strcmp(type, "text") || !strcmp(type, "input_text") || !strcmp(type, "output_text") ||
	    !strcmp(type, "refusal")) {
		v = json_object_get(p, strcmp(type, "refusal") ? "text" : "refusal");
		if (!json_is_string(v))
			return bad_part(err, param, msg, i, strcmp(type, "refusal")
								   ? "text must be a string"
								   : "refusal must be a string");
		out->kind = PART_TEXT;
		out->data = json_string_value(v);
		out->len = json_string_length(v);
		return 0;
	}
	out->kind = PART_MEDIA;
	if (!strcmp(type, "image_url") || !strcmp(type, "input_image")) {
		out->modality = SIM_MM_IMAGE;
		out->data = url_of(json_object_get(p, "image_url"), &out->len);
		if (!out->data && !strcmp(type, "input_image") && json_object_get(p, "file_id"))
			return bad_part(err, param, msg, i,
					"input_image by file_id is not supported (fairgate-sim "
					"has no file store)");
		if (!out->data)
			return bad_part(err, param, msg, i, "image_url must carry a url");
	} else if (!strcmp(type, "audio_url") || !strcmp(type, "video_url")) {
		out->modality = type[0] == 'a' ? SIM_MM_AUDIO : SIM_MM_VIDEO;
		out->data = url_of(json_object_get(p, type), &out->len);
		if (!out->data)
			return bad_part(err, param, msg, i, "the part must carry a url");
	} else if (!strcmp(type, "input_audio")) {
		out->modality = SIM_MM_AUDIO;
		v = json_object_get(json_object_get(p, "input_audio"), "data");
		if (!json_is_string(v))
			return bad_part(err, param, msg, i, "input_audio.data must be a string");
		out->data = json_string_value(v);
		out->len = json_string_length(v);
	} else {
		return sim_error_set(err, 400, param,
				     "%s[%zu].content[%zu]: content part type '%s' is not "
				     "supported by fairgate-sim", param, msg, i, type);
	}
	/* the checks of vLLM's multimodal processor */
	bool multimodal = false;
	for (int m = 0; m < SIM_MM_N; m++)
		multimodal |= lim->media_tokens[m] > 0;
	if (!multimodal)
		return sim_error_set(err, 400, NULL, "%s is not a multimodal model",
				     lim->model ? lim->model : "fairgate-sim");
	if (!lim->media_tokens[out->modality])
		return sim_error_set(err, 400, sim_modality_name(out->modality),
				     "At most 0 %s(s) may be provided in one prompt.",
				     sim_modality_name(out->modality));
	return 0;
}

/* One message's content: media placeholders first, then the text parts
 * joined with "\n" (so tokens straddle part boundaries like any text). */
static int render_content(json_t *content, size_t msg, const struct sim_request_limits *lim,
			  const char *param, struct sim_prompt *out, struct sim_error *err)
{
	size_t i, text_len = 0, n_text = 0;
	json_t *p;

	if (!content || json_is_null(content))
		return 0;
	if (json_is_string(content)) {
		if (sim_tokens_text(&out->tokens, json_string_value(content),
				    json_string_length(content), UINT32_MAX))
			return sim_error_set(err, 500, NULL, "out of memory");
		return 0;
	}
	if (!json_is_array(content))
		return sim_error_set(err, 400, param,
				     "%s[%zu].content must be a string or an array of parts", param,
				     msg);
	json_array_foreach(content, i, p) {
		struct part pt;
		if (read_part(p, msg, i, lim, param, &pt, err))
			return -1;
		if (pt.kind == PART_TEXT) {
			text_len += pt.len + (n_text++ ? 1 : 0);
			continue;
		}
		uint32_t count = lim->media_tokens[pt.modality];
		if (sim_tokens_media(&out->tokens, pt.modality, pt.data, pt.len, count, UINT32_MAX))
			return sim_error_set(err, 500, NULL, "out of memory");
		out->media_tokens[pt.modality] += count;
	}
	if (!n_text)
		return 0;
	char *joined = malloc(text_len + 1);
	size_t off = 0;
	if (!joined)
		return sim_error_set(err, 500, NULL, "out of memory");
	json_array_foreach(content, i, p) {
		struct part pt;
		read_part(p, msg, i, lim, param, &pt, err); /* checked above */
		if (pt.kind != PART_TEXT)
			continue;
		if (off)
			joined[off++] = '\n';
		memcpy(joined + off, pt.data, pt.len);
		off += pt.len;
	}
	int rc = sim_tokens_text(&out->tokens, joined, off, UINT32_MAX);
	free(joined);
	return rc ? sim_error_set(err, 500, NULL, "out of memory") : 0;
}

int sim_chat_opts_parse(json_t *root, struct sim_chat_opts *o, struct sim_error *err)
{
	o->add_generation_prompt = true;
	o->continue_final_message = false;
	if (sim_field_bool(root, "add_generation_prompt", &o->add_generation_prompt, err) ||
	    sim_field_bool(root, "continue_final_message", &o->continue_final_message, err))
		return -1;
	if (o->add_generation_prompt && o->continue_final_message)
		return sim_error_set(err, 400, NULL,
				     "Cannot set both `continue_final_message` and "
				     "`add_generation_prompt` to True.");
	return 0;
}

int sim_chat_render(const struct sim_chat_msg *msgs, size_t n, const struct sim_chat_opts *o,
		    const struct sim_request_limits *lim, const char *param,
		    struct sim_prompt *out, struct sim_error *err)
{
	memset(out, 0, sizeof(*out));
	for (size_t i = 0; i < n; i++) {
		if (sim_tokens_chat_message_begin(&out->tokens, msgs[i].role, UINT32_MAX))
			return sim_error_set(err, 500, NULL, "out of memory");
		if (render_content(msgs[i].content, i, lim, param, out, err))
			return -1;
		if (o->continue_final_message && i + 1 == n)
			break; /* the model continues this message */
		if (sim_tokens_chat_message_end(&out->tokens, UINT32_MAX))
			return sim_error_set(err, 500, NULL, "out of memory");
	}
	if (o->add_generation_prompt &&
	    sim_tokens_chat_generation_prompt(&out->tokens, UINT32_MAX))
		return sim_error_set(err, 500, NULL, "out of memory");
	return 0;
}

int sim_chat_render_messages(json_t *root, const struct sim_chat_opts *o,
			     const struct sim_request_limits *lim, struct sim_prompt *out,
			     struct sim_error *err)
{
	json_t *msgs = json_object_get(root, "messages");
	struct sim_chat_msg *list;
	size_t i;
	json_t *m;

	memset(out, 0, sizeof(*out));
	if (!msgs)
		return sim_error_set(err, 400, "messages", "messages: field required");
	if (!json_is_array(msgs) || !json_array_size(msgs))
		return sim_error_set(err, 400, "messages", "messages must be a non-empty array");
	list = calloc(json_array_size(msgs), sizeof(*list));
	if (!list)
		return sim_error_set(err, 500, NULL, "out of memory");
	json_array_foreach(msgs, i, m) {
		const char *role = json_string_value(json_object_get(m, "role"));
		if (!json_is_object(m) || !role || !*role) {
			free(list);
			return sim_error_set(err, 400, "messages",
					     "messages[%zu] must be an object with a role", i);
		}
		list[i].role = role;
		list[i].content = json_object_get(m, "content");
	}
	int rc = sim_chat_render(list, json_array_size(msgs), o, lim, "messages", out, err);
	free(list);
	return rc;
}

void sim_prompt_free(struct sim_prompt *p)
{
	sim_tokens_free(&p->tokens);
	memset(p->media_tokens, 0, sizeof(p->media_tokens));
}
