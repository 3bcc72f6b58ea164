/* hone-model-page.h — the Model page: open a GGUF file or a HF folder, see
 * its card and a memory estimate for the chosen context, pick the engine
 * options (device, context, memory budget, int8 KV, speculative, prefill/decode
 * split), load with progress and Cancel, unload. */
#pragma once

#include <adwaita.h>

#include "hone-engine.h"

G_BEGIN_DECLS

#define HONE_TYPE_MODEL_PAGE (hone_model_page_get_type ())
G_DECLARE_FINAL_TYPE (HoneModelPage, hone_model_page, HONE, MODEL_PAGE, AdwBin)

GtkWidget     *hone_model_page_new (void);
void           hone_model_page_setup (HoneModelPage *self, HoneEngine *engine, GSettings *settings);
/* Reads the card of @path (async) and shows it; adds it to the recent models. */
void           hone_model_page_open (HoneModelPage *self, const char *path);
/* Loads the shown model with the current options. */
void           hone_model_page_load (HoneModelPage *self);
void           hone_model_page_cancel_load (HoneModelPage *self);
void           hone_model_page_unload (HoneModelPage *self);
HoneModelInfo *hone_model_page_get_info (HoneModelPage *self);   /* the card shown, may be NULL */
/* The switch for an engine option ("int8-kv", "speculative", "pd-split"). */
GtkWidget     *hone_model_page_get_option_switch (HoneModelPage *self, const char *option);
/* The device chooser (an AdwComboRow): "Automatic (<what it picks now>)", then
 * hone_engine_list_devices() in order. */
GtkWidget     *hone_model_page_get_device_row (HoneModelPage *self);

G_END_DECLS
