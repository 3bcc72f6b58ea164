/* hone-message-row.h — one message in the chat view.
 *
 * Shows the role, the content as Markdown-lite (code blocks monospace with a
 * copy button), and for answers the request's stats (TTFT, tok/s, tokens).
 * Buttons: copy; edit-and-resend on the user's messages; regenerate on
 * answers. The row only emits signals; the chat page acts on them.
 */
#pragma once

#include <adwaita.h>

#include "hone-message.h"

G_BEGIN_DECLS

#define HONE_TYPE_MESSAGE_ROW (hone_message_row_get_type ())
G_DECLARE_FINAL_TYPE (HoneMessageRow, hone_message_row, HONE, MESSAGE_ROW, AdwBin)

/* Signals: "edit" (), "regenerate" (). */
GtkWidget   *hone_message_row_new (HoneMessage *message);
HoneMessage *hone_message_row_get_message (HoneMessageRow *self);
void         hone_message_row_set_show_stats (HoneMessageRow *self, gboolean show);
/* Whether regenerate is offered (only on the last answer). */
void         hone_message_row_set_can_regenerate (HoneMessageRow *self, gboolean can);

/* "120 ms to first token · 35.2 tokens/s · 64 tokens" (translated). */
char        *hone_message_row_format_stats (HoneMessage *message);

G_END_DECLS
