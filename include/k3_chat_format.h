/* k3_chat_format.h - the Kimi K3 XTML chat format (see chat_xtml.c). */
#ifndef K3_CHAT_XTML_H
#define K3_CHAT_XTML_H

#include <stdio.h>
#include "k3_tokenizer.h"

/* Render messages (roles system/user/assistant/tool) with the optional
 * generation prompt; malloc'd ids or NULL with err set. */
int *k3_chat_render_xtml(const k3_tokenizer *t, const k3_chat_msg *msgs, int n_msgs,
                         int add_generation_prompt, int *n_out, k3_error *err);

/* The same with thinking as the reference template renders it: effort is
 * "low", "medium", "high" or "max" (thinking on: the thinking-effort system
 * message first, a think block in every assistant message holding its
 * reasoning trimmed, the generation prompt opening "think"), or NULL for
 * thinking off (exactly k3_chat_render_xtml). */
int *k3_chat_render_xtml_think(const k3_tokenizer *t, const k3_chat_msg *msgs, int n_msgs,
                               int add_generation_prompt, const char *effort, int *n_out, k3_error *err);
/* 1 when effort is one of low, medium, high, max. */
int k3_chat_think_effort_valid(const char *effort);
/* The ids between a thinking answer's reasoning and its response:
 * close(think) open(response). Returns the count or -1 with err set. */
int k3_chat_xtml_think_end_ids(const k3_tokenizer *t, int *ids, int max_ids, k3_error *err);

/* The ids that close an assistant message after its content:
 * close(response) close(message) <|end_of_msg|>. Returns the count, or -1
 * with err set (XTML tokens missing, more than max_ids, out of memory). */
int k3_chat_xtml_close_ids(const k3_tokenizer *t, int *ids, int max_ids, k3_error *err);

#endif
