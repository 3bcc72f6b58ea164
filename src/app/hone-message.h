/* hone-message.h — one chat message (user, assistant or system) and its stats.
 *
 * A plain GObject the message rows bind to: content grows while an answer
 * streams ("notify::content"), and the request's cost (TTFT, decode speed,
 * tokens) is attached when it finishes.
 */
#pragma once

#include <glib-object.h>
#include <json-glib/json-glib.h>

G_BEGIN_DECLS

typedef enum {
  HONE_MESSAGE_DONE,        /* complete (or a user message) */
  HONE_MESSAGE_STREAMING,   /* tokens are arriving */
  HONE_MESSAGE_STOPPED,     /* the user stopped it; content is partial */
  HONE_MESSAGE_FAILED,      /* the request failed; content may be partial */
} HoneMessageState;

/* Why a finished answer ended early (HONE_MESSAGE_DONE only). */
typedef enum {
  HONE_MESSAGE_CUT_NONE,      /* the model ended its turn, or a stop string */
  HONE_MESSAGE_CUT_LENGTH,    /* the answer reached the length limit (max tokens) */
  HONE_MESSAGE_CUT_CONTEXT,   /* the conversation filled the context */
} HoneMessageCut;

#define HONE_TYPE_MESSAGE (hone_message_get_type ())
G_DECLARE_FINAL_TYPE (HoneMessage, hone_message, HONE, MESSAGE, GObject)

HoneMessage *hone_message_new (const char *role, const char *content);

const char  *hone_message_get_role (HoneMessage *self);
const char  *hone_message_get_content (HoneMessage *self);
void         hone_message_set_content (HoneMessage *self, const char *content);
void         hone_message_append (HoneMessage *self, const char *piece);
HoneMessageState hone_message_get_state (HoneMessage *self);
void         hone_message_set_state (HoneMessage *self, HoneMessageState state);

HoneMessageCut hone_message_get_cut (HoneMessage *self);
void         hone_message_set_cut (HoneMessage *self, HoneMessageCut cut);

/* Request stats (assistant messages); has_stats is FALSE until set. */
gboolean     hone_message_get_has_stats (HoneMessage *self);
void         hone_message_set_stats (HoneMessage *self, double ttft_ms, double decode_tps,
                                     int generated_tokens, int prompt_tokens);
void         hone_message_get_stats (HoneMessage *self, double *ttft_ms, double *decode_tps,
                                     int *generated_tokens, int *prompt_tokens);

/* {"role", "content", "state"?, "cut"?: "length" | "context", "stats"?: {"ttft_ms", "decode_tps", "tokens", "prompt_tokens"}} */
JsonNode    *hone_message_to_json (HoneMessage *self);
HoneMessage *hone_message_new_from_json (JsonNode *node, GError **error);

G_END_DECLS
