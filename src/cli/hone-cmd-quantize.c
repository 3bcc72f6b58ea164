/* hone-cmd-quantize.c — `hone quantize`: AWQ int4 calibrated on your documents.
 *
 * The work runs on a worker thread; the main thread waits in a main loop so
 * that Ctrl-C (SIGINT/SIGTERM) can cancel it cleanly: the calibration stops
 * at the next check and an export in progress leaves nothing behind.
 */
#include <inttypes.h>
#include "hone-cli.h"
#include "hone-awq.h"
#include "hone-awq-data.h"
#include "hone-awq-export.h"
#include "hone-quant-eval.h"

/* Calibration tokens (samples × length) below which `hone quantize` warns. */
#define HONE_QUANTIZE_FEW_TOKENS 2048

#include <glib-unix.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

/* Defaults: AutoAWQ's 128 samples × 512 tokens, the loss over all of them, when
 * calibration runs on the GPU (94.7 s for an 8B model on an H200); on the CPU
 * that would take hours on a few cores, so fewer and shorter samples. */
#define GPU_SAMPLES 128
#define GPU_SEQ_LEN 512
#define GPU_LOSS_TOKENS 0
#define CPU_SAMPLES 16
#define CPU_SEQ_LEN 256
#define CPU_LOSS_TOKENS 512
#define EVAL_SAMPLES 8

typedef struct {
  char *model_path;
  char **docs;
  int group_size, samples, seq_len, threads, bits, loss_tokens, eval_samples;
  char *format, *out, *also_gguf;
  gboolean eval, rtn, quiet;

  GCancellable *cancellable;
  GMainLoop *loop;
  GError *error;
  int status;
} Job;

static void
progress_cb (int layer, int n_layers, double elapsed, double eta, gpointer data)
{
  Job *j = data;
  if (j->quiet)
    return;
  fprintf (stderr, "\r%s", "");
  fprintf (stderr, _("layer %d/%d · %.0f s elapsed · ETA %.0f s   "), layer + 1, n_layers, elapsed, eta);
  if (layer + 1 == n_layers)
    fputc ('\n', stderr);
  fflush (stderr);
}

/* An export's progress on a terminal, rewritten in place. */
static void
export_progress_cb (double fraction, gpointer data)
{
  fprintf (stderr, "\r%3.0f %%", 100 * fraction);
  fflush (stderr);
}

/* Writes @res as asked (--format, --also-gguf), with the progress on a terminal. */
static gboolean
write_result (Job *j, const HoneAwqResult *res, GError **error)
{
  const HoneProgressFunc progress = !j->quiet && isatty (STDERR_FILENO) ? export_progress_cb : NULL;
  gboolean ok;

  if (g_strcmp0 (j->format, "gguf") == 0)
    ok = hone_awq_export_gguf (res, j->out, j->cancellable, progress, NULL, error);
  else
    ok = hone_awq_export_safetensors (res, j->out, j->cancellable, progress, NULL, error);
  if (ok && j->also_gguf)
    ok = hone_awq_export_gguf (res, j->also_gguf, j->cancellable, progress, NULL, error);
  if (progress)
    fputs ("\r      \r", stderr);
  return ok;
}

static void
print_row (const char *name, const HoneQuantEvalScore *s, const HoneQuantEvalScore *ref)
{
  printf ("  %-9s ppl %8.4f (%+6.2f %%)  KL %.5f  top-1 %.2f %%\n", name, s->ppl,
          100.0 * (s->ppl / ref->ppl - 1.0), s->kl, 100.0 * s->top1);
}

static gboolean
evaluate (Job *j, HoneModel *orig, HoneAwqResult *awq, const HoneAwqData *data, GError **error)
{
  g_autoptr(HoneAwqResult) rtn = NULL;
  g_autoptr(HoneModel) m_rtn = NULL, m_awq = NULL;
  g_autofree char *generic = hone_awq_builtin_generic_text ();
  HoneAwqOptions o;
  HoneModel *models[3];
  HoneQuantEvalScore sc[3], gsc[3];
  gboolean have_generic = FALSE, good;
  g_autofree char *words = NULL;
  int n_gen = 0;
  g_autofree gint32 *gen = NULL;

  hone_awq_options_init (&o);
  o.group_size = j->group_size;
  o.n_threads = j->threads;
  o.search_scales = o.search_clip = FALSE;
  rtn = hone_awq_quantize (orig, NULL, 0, 0, &o, NULL, NULL, j->cancellable, error);
  if (rtn == NULL)
    return FALSE;
  m_rtn = hone_awq_result_open_model (rtn, j->cancellable, error);
  if (m_rtn == NULL)
    return FALSE;
  m_awq = hone_awq_result_open_model (awq, j->cancellable, error);
  if (m_awq == NULL)
    return FALSE;
  models[0] = orig;
  models[1] = m_rtn;
  models[2] = m_awq;
  if (!j->quiet)
    fprintf (stderr, _("Evaluating original, RTN and AWQ on %d held-out samples…\n"), data->n_heldout);
  if (!hone_quant_eval (models, 3, data->heldout, data->n_heldout, data->seq_len, j->threads, sc,
                        j->cancellable, error))
    return FALSE;
  printf (_("Held-out text (%" PRId64 " tokens), group size %d:\n"), sc[0].n_tokens, j->group_size);
  print_row ("original", &sc[0], &sc[0]);
  print_row ("RTN", &sc[1], &sc[0]);
  print_row ("AWQ", &sc[2], &sc[0]);
  if (sc[1].ppl > sc[0].ppl)
    printf (_("  AWQ perplexity loss = %.1f %% of RTN's\n"),
            100.0 * (sc[2].ppl - sc[0].ppl) / (sc[1].ppl - sc[0].ppl));
  if (generic)
    {
      gen = hone_awq_tokenize_samples (orig->tokenizer, generic, data->seq_len, j->eval_samples, &n_gen, NULL);
      if (gen && hone_quant_eval (models, 3, gen, n_gen, data->seq_len, j->threads, gsc, j->cancellable, error))
        {
          have_generic = TRUE;
          printf (_("Generic text (%" PRId64 " tokens):\n"), gsc[0].n_tokens);
          print_row ("original", &gsc[0], &gsc[0]);
          print_row ("RTN", &gsc[1], &gsc[0]);
          print_row ("AWQ", &gsc[2], &gsc[0]);
          if (gsc[1].ppl > gsc[0].ppl)
            printf (_("  AWQ perplexity loss = %.1f %% of RTN's\n"),
                    100.0 * (gsc[2].ppl - gsc[0].ppl) / (gsc[1].ppl - gsc[0].ppl));
        }
      else if (error && *error)
        return FALSE;
    }
  words = hone_quant_eval_verdict (sc, have_generic ? gsc : NULL, &good);
  printf (_("Verdict: %s\n"), words);
  fflush (stdout);
  return TRUE;
}

static gboolean
quit_loop (gpointer loop)
{
  g_main_loop_quit (loop);
  return G_SOURCE_REMOVE;
}

static gpointer
worker (gpointer data)
{
  Job *j = data;
  g_autoptr(HoneModel) model = NULL;
  g_autoptr(HoneAwqData) cal = NULL;
  g_autoptr(HoneAwqResult) res = NULL;
  g_autofree char *builtin = NULL;
  HoneAwqOptions o;
  GError **error = &j->error;
  gboolean ok = FALSE;

  if (hone_awq_path_is_quantized (j->model_path, error))
    goto done;
  model = hone_model_open (j->model_path, error);
  if (model == NULL)
    goto done;
  hone_awq_options_init (&o);
  o.group_size = j->group_size;
  o.bits = j->bits;
  o.n_threads = j->threads;
  o.loss_tokens = j->loss_tokens;
  if (j->rtn)
    o.search_scales = o.search_clip = FALSE;
  if (!hone_awq_check (model, &o, error))
    goto done;
  if (j->rtn && !j->eval && (j->docs == NULL || j->docs[0] == NULL))
    {
      /* rounding to nearest reads no documents: it runs where the built-in set is not installed */
      if (!j->quiet)
        {
          fprintf (stderr, _("%s: rounding to nearest needs no documents; group size %d\n"), model->name,
                   j->group_size);
          fputs (hone_awq_gpu_available () ? _("Rounding to nearest (no calibration) on the GPU\n")
                                           : _("Rounding to nearest (no calibration) on the CPU\n"), stderr);
        }
      res = hone_awq_quantize (model, NULL, 0, 0, &o, progress_cb, j, j->cancellable, error);
      if (res == NULL)
        goto done;
      goto export;
    }
  if (j->docs == NULL || j->docs[0] == NULL)
    {
      builtin = hone_awq_builtin_dir ();
      if (builtin == NULL)
        {
          g_set_error (error, HONE_ERROR, HONE_ERROR_IO,
                       _("The built-in calibration set (data/calibration) was not found; pass --docs"));
          goto done;
        }
      j->docs = g_new0 (char *, 2);
      j->docs[0] = g_build_filename (builtin, "texts", NULL);
    }
  cal = hone_awq_data_load (model->tokenizer, (const char *const *) j->docs, j->samples, j->seq_len,
                            j->eval_samples, j->cancellable, error);
  if (cal == NULL)
    goto done;
  for (guint i = 0; i < cal->warnings->len; i++)
    fprintf (stderr, _("hone: skipped %s\n"), (const char *) cal->warnings->pdata[i]);
  /* Few tokens let the scale search fit these documents: 4 × 128 made the default model's generic-text
   * perplexity rise +57.5 % where plain rounding's rose +15.0 % (RESULTS.md, session 33). */
  if (!j->rtn && (gint64) cal->n_samples * cal->seq_len < HONE_QUANTIZE_FEW_TOKENS)
    fprintf (stderr,
             _("hone: only %" PRId64 " calibration tokens: AWQ may fit these documents more than general use "
               "(the defaults take 4096 on the CPU, 65536 with a GPU); --eval shows how it does on generic text\n"),
             (gint64) cal->n_samples * cal->seq_len);
  if (!j->quiet)
    {
      const gboolean gpu = hone_awq_gpu_available ();
      fprintf (stderr,
               _("%s: %d documents, %" PRId64 " tokens → %d calibration samples × %d tokens, "
                 "%d held out; group size %d\n"),
               model->name, cal->n_documents, cal->n_tokens, cal->n_samples, cal->seq_len, cal->n_heldout,
               j->group_size);
      if (j->rtn)
        fputs (gpu ? _("Rounding to nearest (no calibration) on the GPU\n")
                   : _("Rounding to nearest (no calibration) on the CPU\n"), stderr);
      else
        fputs (gpu ? _("Calibrating on the GPU\n") : _("Calibrating on the CPU\n"), stderr);
    }
  res = hone_awq_quantize (model, cal->samples, cal->n_samples, cal->seq_len, &o, progress_cb, j,
                           j->cancellable, error);
  if (res == NULL)
    goto done;
export:
  if (!j->quiet)
    fprintf (stderr, j->rtn ? _("Rounded in %.1f s; writing %s…\n") : _("Calibrated in %.1f s; writing %s…\n"),
             res->seconds, j->out);
  ok = write_result (j, res, error);
  if (ok && j->eval)
    ok = evaluate (j, model, res, cal, error);

done:
  j->status = ok ? 0 : 1;
  /* Through an idle source: the loop may not be running yet. */
  g_idle_add (quit_loop, j->loop);
  return NULL;
}

static gboolean
on_signal (gpointer data)
{
  Job *j = data;
  fprintf (stderr, "\n%s\n", _("Cancelling…"));
  g_cancellable_cancel (j->cancellable);
  return G_SOURCE_CONTINUE;
}

int
hone_cmd_quantize (int argc, char **argv)
{
  Job j = { 0 };
  char *model = NULL;
  GOptionEntry entries[] = {
    { "model", 'm', 0, G_OPTION_ARG_FILENAME, &model, N_("Model to quantize (GGUF or HF folder; default: the default model)"), N_("PATH") },
    { "docs", 'd', 0, G_OPTION_ARG_FILENAME_ARRAY, &j.docs, N_("Calibration documents: files or folders of .txt .md .pdf .json .jsonl (repeatable; default: the built-in set)"), N_("PATH") },
    { "group-size", 'g', 0, G_OPTION_ARG_INT, &j.group_size, N_("Weights per scale: 32, 64 or 128 (default 128, or 64 when 128 does not divide the rows)"), N_("G") },
    { "bits", 0, 0, G_OPTION_ARG_INT, &j.bits, N_("Bits per weight (4)"), N_("B") },
    { "samples", 'n', 0, G_OPTION_ARG_INT, &j.samples, N_("Calibration samples (default 128 with a GPU, 16 on the CPU)"), N_("N") },
    { "seq-len", 'l', 0, G_OPTION_ARG_INT, &j.seq_len, N_("Tokens per sample (default 512 with a GPU, 256 on the CPU)"), N_("L") },
    { "loss-tokens", 0, 0, G_OPTION_ARG_INT, &j.loss_tokens, N_("Tokens the scale search's loss runs over (0 = all: the default with a GPU; 512 on the CPU)"), N_("T") },
    { "format", 'f', 0, G_OPTION_ARG_STRING, &j.format, N_("awq (AutoAWQ GEMM safetensors folder) or gguf (Q4_1)"), N_("FORMAT") },
    { "output", 'o', 0, G_OPTION_ARG_FILENAME, &j.out, N_("Output folder (awq) or file (gguf)"), N_("OUT") },
    { "also-gguf", 0, 0, G_OPTION_ARG_FILENAME, &j.also_gguf, N_("Also write the same weights as a Q4_1 GGUF (runs in Hone)"), N_("FILE") },
    { "threads", 't', 0, G_OPTION_ARG_INT, &j.threads, N_("CPU threads (0: one per usable CPU)"), N_("N") },
    { "eval", 0, 0, G_OPTION_ARG_NONE, &j.eval, N_("Compare original, RTN and AWQ on held-out text: perplexity, KL, top-1"), NULL },
    { "eval-samples", 0, 0, G_OPTION_ARG_INT, &j.eval_samples, N_("Held-out samples to keep and evaluate (default 8)"), N_("N") },
    { "rtn", 0, 0, G_OPTION_ARG_NONE, &j.rtn, N_("Round to nearest only (no calibration), for comparison"), NULL },
    { "quiet", 'q', 0, G_OPTION_ARG_NONE, &j.quiet, N_("No progress on stderr"), NULL },
    { NULL },
  };
  g_autoptr(GOptionContext) ctx = hone_cli_context_new (_("-o OUT"),
      _("Quantize a model to int4 with AWQ, calibrated on your own documents, and export it as an "
        "AutoAWQ GEMM checkpoint or a Q4_1 GGUF. Ctrl-C cancels cleanly."));
  GThread *thread;
  guint sig_int, sig_term;
  GError *error = NULL;
  int status;

  j.bits = 4;
  j.group_size = 0;
  j.samples = -1;
  j.seq_len = -1;
  j.loss_tokens = -1;
  j.eval_samples = EVAL_SAMPLES;
  g_option_context_add_main_entries (ctx, entries, GETTEXT_PACKAGE);
  if (!hone_cli_parse (ctx, &argc, &argv))
    return 1;
  if (j.out == NULL || argc != 1)
    {
      status = hone_cli_fail_literal (_("usage: hone quantize [-m MODEL] [--docs PATH…] [--group-size G] "
                                        "[--samples N --seq-len L] [--format awq|gguf] -o OUT"));
      goto out;
    }
  if (j.format == NULL)
    j.format = g_strdup (g_str_has_suffix (j.out, ".gguf") ? "gguf" : "awq");
  if (strcmp (j.format, "awq") != 0 && strcmp (j.format, "gguf") != 0)
    {
      status = hone_cli_fail_literal (_("--format must be awq or gguf"));
      goto out;
    }
  {
    const gboolean gpu = (j.samples < 0 || j.seq_len < 0 || j.loss_tokens < 0) && hone_awq_gpu_available ();
    if (j.samples < 0)
      j.samples = gpu ? GPU_SAMPLES : CPU_SAMPLES;
    if (j.seq_len < 0)
      j.seq_len = gpu ? GPU_SEQ_LEN : CPU_SEQ_LEN;
    if (j.loss_tokens < 0)
      j.loss_tokens = gpu ? GPU_LOSS_TOKENS : CPU_LOSS_TOKENS;
  }
  if (j.samples <= 0 || j.seq_len <= 0 || j.threads < 0 || j.loss_tokens < 0 || j.eval_samples <= 0)
    {
      status = hone_cli_fail_literal (_("--samples, --seq-len and --eval-samples must be > 0; --threads, --loss-tokens ≥ 0"));
      goto out;
    }
  j.model_path = hone_cli_resolve_model (model, &error);
  if (j.model_path == NULL)
    {
      status = hone_cli_fail (error);
      goto out;
    }
  if (hone_awq_path_is_quantized (j.model_path, &error))
    {
      status = hone_cli_fail (error);
      goto out;
    }
  if (j.group_size == 0)
    {
      /* 128 where it divides the rows (the AutoAWQ default), else 64. */
      g_autoptr(HoneModel) m = hone_model_open (j.model_path, &error);
      if (m == NULL)
        {
          status = hone_cli_fail (error);
          goto out;
        }
      j.group_size = (m->config.hidden % 128 == 0 && m->config.ffn % 128 == 0
                      && (m->config.n_heads * m->config.head_dim) % 128 == 0) ? 128 : 64;
    }

  j.cancellable = g_cancellable_new ();
  j.loop = g_main_loop_new (NULL, FALSE);
  sig_int = g_unix_signal_add (SIGINT, on_signal, &j);
  sig_term = g_unix_signal_add (SIGTERM, on_signal, &j);
  thread = g_thread_new ("hone-quantize", worker, &j);
  g_main_loop_run (j.loop);
  g_thread_join (thread);
  g_source_remove (sig_int);
  g_source_remove (sig_term);
  status = j.status;
  if (status != 0 && j.error)
    status = hone_cli_fail (g_steal_pointer (&j.error));
  else if (status != 0)
    status = hone_cli_fail_literal (_("quantization failed"));
  g_clear_object (&j.cancellable);
  g_main_loop_unref (j.loop);

out:
  g_free (model);
  g_free (j.model_path);
  g_strfreev (j.docs);
  g_free (j.format);
  g_free (j.out);
  g_free (j.also_gguf);
  return status;
}
