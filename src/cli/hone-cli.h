/* hone-cli.h — what the `hone` subcommands share: option groups, model
 * resolution, loading, and the one-line error convention
 * ("hone: <message>" on stderr, exit status 1). */
#pragma once

#include <glib.h>
#include <gio/gio.h>
#include "hone.h"
#include "hone-i18n.h"

G_BEGIN_DECLS

/* Subcommands: argv[0] is the subcommand name. Return the exit status. */
int hone_cmd_run (int argc, char **argv);
int hone_cmd_chat (int argc, char **argv);
int hone_cmd_info (int argc, char **argv);
int hone_cmd_ppl (int argc, char **argv);
int hone_cmd_tokenize (int argc, char **argv);
int hone_cmd_template (int argc, char **argv);
int hone_cmd_bench (int argc, char **argv);
int hone_cmd_fetch (int argc, char **argv);
int hone_cmd_quantize (int argc, char **argv);   /* @awq */
int hone_cmd_gen_model (int argc, char **argv);  /* @cuda2 */

/* Options every model-running command takes. */
typedef struct {
  char *model;          /* -m; NULL → the default model */
  int threads;          /* -t; 0 = all cores */
  int context;          /* -c; 0 = engine default */
  char *device;         /* --device; after hone_cli_load_engine, the device used */
  gboolean precise;     /* --precise (run, ppl, chat): CPU f32 activations */
  char *device_note;    /* why "auto" ended on the CPU (hone_cli_load_engine), or NULL */
} HoneCliModelOptions;

/* Sampling flags (run, chat). */
typedef struct {
  double temp, top_p, min_p, repeat_penalty, presence_penalty, frequency_penalty;
  int top_k, repeat_last_n, n_predict;
  gint64 seed;          /* -1 = random */
  char **stop;
} HoneCliSampling;

void     hone_cli_model_options_add (GOptionContext *ctx, HoneCliModelOptions *opts, gboolean with_model);
void     hone_cli_model_options_clear (HoneCliModelOptions *opts);
void     hone_cli_sampling_add (GOptionContext *ctx, HoneCliSampling *s);
void     hone_cli_sampling_clear (HoneCliSampling *s);
/* Build validated sampler params (INVALID_ARGUMENT naming the flag). */
gboolean hone_cli_sampling_to_params (const HoneCliSampling *s, HoneSamplerParams *params, GError **error);

/* One line on stderr when a generation ended for a reason the user did not
 * pick: the context filled up, or (@note_max_tokens, for chat) the -n limit
 * cut the answer. Nothing for an end of turn or a stop string. */
void     hone_cli_note_stop (const HoneRequestMetrics *m, int context_length, int max_tokens,
                             gboolean note_max_tokens);

/* A GOptionContext with the translation domain set and help on stdout. */
GOptionContext *hone_cli_context_new (const char *parameter_string, const char *summary);
/* Parse; on a bad flag prints one "hone: …" line and returns FALSE. */
gboolean hone_cli_parse (GOptionContext *ctx, int *argc, char ***argv);

/* The given path or the default model (NO_MODEL with a `hone fetch` hint). */
char    *hone_cli_resolve_model (const char *given, GError **error);
/* A new engine with the options applied and the model loaded. --device auto
 * (the default) is resolved by the engine at the load; afterwards opts->device
 * is the device the model runs on and opts->device_note, when "auto" ended on
 * the CPU for a reason, the reason — printed as one line "hone: running on
 * the CPU: …" on stderr. A GPU's out-of-memory error says how to run anyway. */
HoneEngine *hone_cli_load_engine (HoneCliModelOptions *opts, GError **error);

/* All of stdin (NUL-terminated). */
char    *hone_cli_read_stdin (gsize *length, GError **error);

/* Print "hone: <message>" (one line; newlines in the message become spaces),
 * free the error, return 1. */
int      hone_cli_fail (GError *error);
int      hone_cli_fail_literal (const char *message);

/* JSON node → pretty or compact string. */
char    *hone_cli_json_to_string (JsonNode *node, gboolean pretty);

G_END_DECLS
