/* hone-awq-data.h — calibration documents for AWQ: read, tokenize, cut into samples.
 *
 * Inputs: files or folders (searched recursively, in name order, hidden
 * entries skipped) of .txt/.md/.markdown/.rst/.text (UTF-8 text), .pdf (text
 * layer through poppler-glib, loaded at run time so it stays optional),
 * .json/.jsonl (the string fields named text, content, body, … of every
 * object; every long string when none is named so). Each document is
 * tokenized with the model's tokenizer (no BOS), documents are joined with
 * EOS and the stream is cut into samples of seq_len tokens. Every tenth
 * sample (at least one) is held out for evaluation; calibration samples are
 * taken evenly from the rest, so every document is represented.
 *
 * Errors name the document: HONE_ERROR_IO (unreadable), _FILE_UNSUPPORTED
 * (binary file, unknown type given explicitly, encrypted PDF, PDF support
 * absent), _FILE_CORRUPT (damaged PDF or JSON), _INVALID_ARGUMENT (a document
 * without text, too short, or too few tokens in all for one calibration and
 * one held-out sample).
 */
#pragma once

#include <glib.h>
#include <gio/gio.h>
#include "hone-tokenizer.h"

G_BEGIN_DECLS

#define HONE_AWQ_MIN_DOC_TOKENS 16

typedef struct {
  int seq_len;
  int n_samples;            /* calibration samples (fewer when the documents are short) */
  gint32 *samples;          /* n_samples × seq_len */
  int n_heldout;
  gint32 *heldout;          /* n_heldout × seq_len */
  int n_documents;
  gint64 n_tokens;          /* tokens of all documents */
  GPtrArray *warnings;      /* documents skipped inside folders, with the reason */
} HoneAwqData;

void         hone_awq_data_free (HoneAwqData *data);

/* The text of one document (any supported type). */
char        *hone_awq_document_text (const char *path, GCancellable *cancellable, GError **error);

/* Load @paths (NULL-terminated). max_samples: calibration samples wanted;
 * max_heldout: cap on held-out samples (0 = no cap). */
HoneAwqData *hone_awq_data_load (const HoneTokenizer *tok, const char *const *paths, int max_samples, int seq_len,
                                 int max_heldout, GCancellable *cancellable, GError **error);

/* Samples of seq_len tokens from one text (evaluation of a generic text). */
gint32      *hone_awq_tokenize_samples (const HoneTokenizer *tok, const char *text, int seq_len, int max_samples,
                                        int *n_samples, GError **error);

/* The built-in calibration set (data/calibration): the folder of texts and
 * the generic evaluation text; NULL when not found. */
char        *hone_awq_builtin_dir (void);
char        *hone_awq_builtin_generic_text (void);

G_DEFINE_AUTOPTR_CLEANUP_FUNC (HoneAwqData, hone_awq_data_free)

G_END_DECLS
