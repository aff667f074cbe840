#!/usr/bin/env bash
# sim_media.sh — image, audio and video content parts over HTTP: a text-only
# sim (the default) refuses them as vLLM refuses them for a model that is
# not multimodal; with --image-tokens N each image part is N prompt tokens
# whatever the size of its data URL (whose bytes are not text tokens), on
# chat, responses and /tokenize alike; a modality the model lacks is vLLM's
# "At most 0" 400; the same image hits the prefix cache, another does not.
source "$(dirname "$0")/sim_env.inc"

img=$(head -c 112500 /dev/urandom | base64 -w0)   # a ~150 KB data URL
printf '{"messages":[{"role":"user","content":[{"type":"text","text":"describe"},{"type":"image_url","image_url":{"url":"data:image/png;base64,%s"}}]}],"max_tokens":2}' "$img" >"$tmp/chat_img.json"
printf '{"input":[{"role":"user","content":[{"type":"input_text","text":"describe"},{"type":"input_image","image_url":"data:image/png;base64,%s"}]}],"max_output_tokens":2}' "$img" >"$tmp/resp_img.json"

start_sim text --speedup inf
out=$(curl -s -w '\n%{http_code}' "$URL/v1/chat/completions" --data-binary @"$tmp/chat_img.json")
expect_eq "text-only sim: an image part is a 400" "${out##*$'\n'}" 400
expect_eq "  with vLLM's message" "$(jq -r .error.message <<<"${out%$'\n'*}")" "llama-3.3-70b is not a multimodal model"
expect_eq "  on responses too" \
	"$(curl -s -o /dev/null -w '%{http_code}' "$URL/v1/responses" --data-binary @"$tmp/resp_img.json")" 400
stop_clean "text-only"

start_sim vision --speedup inf --image-tokens 576 --enable-prompt-tokens-details
# 3 + (4 + 576 + ceil(8/4)) = 585, whatever the 150 KB of base64
curl -s -o "$tmp/c1" "$URL/v1/chat/completions" --data-binary @"$tmp/chat_img.json"
expect_eq "an image part is 576 tokens, not its data URL's bytes" "$(jq .usage.prompt_tokens "$tmp/c1")" 585
expect_eq "prompt_tokens_details has only cached_tokens, as vLLM's" \
	"$(jq -c '.usage.prompt_tokens_details | keys' "$tmp/c1")" '["cached_tokens"]'
expect_eq "/tokenize counts the same" \
	"$(jq -c 'del(.max_tokens)' "$tmp/chat_img.json" | curl -s "$URL/tokenize" --data-binary @- | jq .count)" 585
expect_eq "responses count the same" \
	"$(curl -s "$URL/v1/responses" --data-binary @"$tmp/resp_img.json" | jq .usage.input_tokens)" 585
curl -s -o "$tmp/c2" "$URL/v1/chat/completions" --data-binary @"$tmp/chat_img.json"
expect_eq "the same image again hits the prefix cache (36 of 36.5 blocks)" \
	"$(jq .usage.prompt_tokens_details.cached_tokens "$tmp/c2")" 576
img2=$(head -c 3000 /dev/urandom | base64 -w0)
body2=$(printf '{"messages":[{"role":"user","content":[{"type":"text","text":"describe"},{"type":"image_url","image_url":{"url":"data:image/png;base64,%s"}}]}],"max_tokens":2}' "$img2")
expect_eq "another image shares no block past the framing" \
	"$(curl -s "$URL/v1/chat/completions" -d "$body2" | jq .usage.prompt_tokens_details.cached_tokens)" 0
out=$(curl -s -w '\n%{http_code}' "$URL/v1/chat/completions" \
	-d '{"messages":[{"role":"user","content":[{"type":"input_audio","input_audio":{"data":"UklGRg==","format":"wav"}}]}]}')
expect_eq "no --audio-tokens: an audio part is vLLM's 400" \
	"${out##*$'\n'} $(jq -r '.error.param + ": " + .error.message' <<<"${out%$'\n'*}")" \
	"400 audio: At most 0 audio(s) may be provided in one prompt."
stop_clean "vision"

start_sim omni --speedup inf --image-tokens 100 --audio-tokens 50 --video-tokens 300
expect_eq "audio_url, input_audio and video_url parts count their modality's tokens" \
	"$(curl -s "$URL/v1/chat/completions" -d '{"messages":[{"role":"user","content":[{"type":"audio_url","audio_url":{"url":"https://x/a.wav"}},{"type":"input_audio","input_audio":{"data":"UklGRg==","format":"wav"}},{"type":"video_url","video_url":{"url":"https://x/v.mp4"}}]}],"max_tokens":1}' | jq .usage.prompt_tokens)" \
	$((3 + 4 + 50 + 50 + 300))
stop_clean "omni"
