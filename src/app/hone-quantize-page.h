/* hone-quantize-page.h — the Quantize page: AWQ int4 of the loaded model,
 * calibrated on the user's documents.
 *
 * Documents (files, folders, drag and drop) with their token counts under
 * the model's tokenizer; group size / samples / sequence length folded away;
 * one button that calibrates, evaluates (original, RTN and AWQ: perplexity,
 * KL, top-1 on held-out and generic text, with a verdict in words) and
 * exports (AutoAWQ folder or Q4_1 GGUF), with per-layer progress, ETA and
 * Cancel; then "Load Quantized Model" through the Model page. The work runs
 * on a worker thread (GTask); progress comes back through the main context.
 */
#pragma once

#include <adwaita.h>

#include "hone-engine.h"
#include "hone-quant-eval.h"

G_BEGIN_DECLS

#define HONE_TYPE_QUANTIZE_PAGE (hone_quantize_page_get_type ())
G_DECLARE_FINAL_TYPE (HoneQuantizePage, hone_quantize_page, HONE, QUANTIZE_PAGE, AdwBin)

typedef enum {
  HONE_QUANTIZE_EVAL_HELDOUT,   /* held out from the user's documents */
  HONE_QUANTIZE_EVAL_GENERIC,   /* the built-in generic text */
} HoneQuantizeEvalSet;

GtkWidget  *hone_quantize_page_new (void);
void        hone_quantize_page_setup (HoneQuantizePage *self, HoneEngine *engine, GSettings *settings);

/* TRUE when the loaded model can be quantized (the page is sensitive). */
gboolean    hone_quantize_page_get_ready (HoneQuantizePage *self);
/* Why it cannot (NULL when ready). */
const char *hone_quantize_page_get_notice (HoneQuantizePage *self);

void        hone_quantize_page_add_document (HoneQuantizePage *self, const char *path);
guint       hone_quantize_page_get_n_documents (HoneQuantizePage *self);
/* Tokens of document @i under the model's tokenizer: −1 while counting,
 * −2 when it could not be read. */
gint64      hone_quantize_page_get_document_tokens (HoneQuantizePage *self, guint i);

void        hone_quantize_page_set_output_folder (HoneQuantizePage *self, const char *folder);

/* The one button: calibrate → evaluate → export. */
void        hone_quantize_page_start (HoneQuantizePage *self);
void        hone_quantize_page_cancel (HoneQuantizePage *self);
/* Cancels a run (window closing). */
void        hone_quantize_page_shutdown (HoneQuantizePage *self);
gboolean    hone_quantize_page_get_running (HoneQuantizePage *self);
double      hone_quantize_page_get_progress (HoneQuantizePage *self);     /* 0..1 of the whole run */
int         hone_quantize_page_get_layers_done (HoneQuantizePage *self);
/* The last export (NULL until a run succeeded). */
const char *hone_quantize_page_get_output_path (HoneQuantizePage *self);
/* The last report: original, RTN, AWQ. FALSE when there is none. */
gboolean    hone_quantize_page_get_scores (HoneQuantizePage *self, HoneQuantizeEvalSet set,
                                           HoneQuantEvalScore out[3]);
/* Opens the last export on the Model page and loads it. */
void        hone_quantize_page_load_result (HoneQuantizePage *self);

G_END_DECLS
