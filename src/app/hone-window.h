/* hone-window.h — the main window: header bar with an AdwViewSwitcherTitle
 * over an AdwViewStack (Chat, Model, Performance, Quantize),
 * toasts, and a drop target that opens dropped models. */
#pragma once

#include <adwaita.h>

#include "hone-application.h"
#include "hone-chat-page.h"
#include "hone-model-page.h"
#include "hone-performance-page.h"
#include "hone-quantize-page.h"

G_BEGIN_DECLS

#define HONE_TYPE_WINDOW (hone_window_get_type ())
G_DECLARE_FINAL_TYPE (HoneWindow, hone_window, HONE, WINDOW, AdwApplicationWindow)

HoneWindow          *hone_window_new (HoneApplication *application);
void                 hone_window_add_toast (HoneWindow *self, const char *message);
/* "chat", "model", "performance", "quantize". */
void                 hone_window_show_page (HoneWindow *self, const char *name);
const char          *hone_window_get_visible_page (HoneWindow *self);
/* Shows the Model page with the card of @path. */
void                 hone_window_open_model (HoneWindow *self, const char *path);
HoneChatPage        *hone_window_get_chat_page (HoneWindow *self);
HoneModelPage       *hone_window_get_model_page (HoneWindow *self);
HonePerformancePage *hone_window_get_performance_page (HoneWindow *self);
HoneQuantizePage    *hone_window_get_quantize_page (HoneWindow *self);

G_END_DECLS
