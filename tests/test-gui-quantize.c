/* test-gui-quantize.c — the Quantize page of the real app, on the CPU.
 *
 * Runs HoneApplication under Xvfb in a temporary HOME with a tiny generated
 * llama model (hidden 256: group size 128 divides every row): without a
 * model the page is insensitive and says why; with the model loaded through
 * the Model page, a calibration text written to a temp folder is added and
 * its token count shown (checked against the engine's own tokenization and
 * the byte length); the one button calibrates, evaluates and exports; the
 * progress never falls and reaches the end with every layer and the export's
 * bytes reported; the report holds
 * finite numbers (the original's KL 0 and top-1 1, as the definitions say);
 * the export is a GGUF carrying hone.awq.group_size and nothing else is
 * left in the folder; "Load Quantized Model" loads it through the Model page
 * and then the page refuses to quantize it again. A second run is cancelled
 * after its first layer and leaves the export folder empty.
 *
 * HONE_QUANTIZE_SHOTS=<dir> (optionally HONE_DEFAULT_MODEL=<gguf>): also
 * quantizes that model on the built-in calibration set and writes
 * quantize-{light,dark}.png there:
 *   HONE_QUANTIZE_SHOTS=data/screenshots HONE_DEFAULT_MODEL=~/.cache/hone/models/SmolLM2-135M-Instruct.Q4_1.gguf \
 *   meson test -C build gui-quantize --test-args '-p /quantize/screenshots'   (under xvfb-run -a)
 */
#include <adwaita.h>
#include <glib/gstdio.h>
#include <math.h>
#include <string.h>

#include "hone-application.h"
#include "hone-gguf.h"
#include "hone-test-models.h"
#include "hone-window.h"
#include "hone-gui-harness.h"

#define N_LAYERS 3

static char *tmp_home;
static char *model_path;
static char *text_path;

typedef HoneGuiSteps Steps;
#define spin hone_gui_spin
#define run_app hone_gui_run_app

static void
load_model (HoneApplication *app, HoneWindow *window, const char *path)
{
  HoneEngine *engine = hone_application_get_engine (app);
  HoneModelPage *model_page = hone_window_get_model_page (window);

  hone_window_open_model (window, path);
  WAIT_UNTIL (hone_model_page_get_info (model_page) != NULL &&
              g_strcmp0 (hone_model_info_get_path (hone_model_page_get_info (model_page)), path) == 0, 20);
  hone_model_page_load (model_page);
  WAIT_UNTIL (hone_engine_get_state (engine) == HONE_ENGINE_STATE_READY &&
              g_strcmp0 (hone_engine_get_model_path (engine), path) == 0, 60);
}

static guint
count_entries (const char *dir)
{
  g_autoptr(GDir) d = g_dir_open (dir, 0, NULL);
  guint n = 0;

  g_assert_nonnull (d);
  while (g_dir_read_name (d))
    n++;
  return n;
}

/* The window's own paintable through its renderer (as hone-gui-screenshots). */
static void
shoot (GtkWidget *window, const char *dir, const char *name)
{
  GdkPaintable *paintable = gtk_widget_paintable_new (window);
  int w = gtk_widget_get_width (window), h = gtk_widget_get_height (window);
  GskRenderNode *node = NULL;
  GdkTexture *texture;
  g_autofree char *file = g_strdup_printf ("%s.png", name);
  g_autofree char *path = g_build_filename (dir, file, NULL);

  for (int tries = 0; !node && tries < 100; tries++)
    {
      GtkSnapshot *snapshot = gtk_snapshot_new ();
      g_main_context_iteration (NULL, FALSE);
      gdk_paintable_snapshot (paintable, snapshot, w, h);
      node = gtk_snapshot_free_to_node (snapshot);
    }
  g_assert_nonnull (node);
  texture = gsk_renderer_render_texture (gtk_native_get_renderer (GTK_NATIVE (window)), node,
                                         &GRAPHENE_RECT_INIT (0, 0, w, h));
  g_assert_true (gdk_texture_save_to_png (texture, path));
  g_test_message ("wrote %s (%dx%d)", path, w, h);
  g_object_unref (texture);
  gsk_render_node_unref (node);
  g_object_unref (paintable);
}

static void
shoot_both (HoneWindow *window, const char *dir)
{
  AdwStyleManager *sm = adw_style_manager_get_default ();

  g_mkdir_with_parents (dir, 0755);
  adw_style_manager_set_color_scheme (sm, ADW_COLOR_SCHEME_FORCE_LIGHT);
  spin (400);
  shoot (GTK_WIDGET (window), dir, "quantize-light");
  adw_style_manager_set_color_scheme (sm, ADW_COLOR_SCHEME_FORCE_DARK);
  spin (400);
  shoot (GTK_WIDGET (window), dir, "quantize-dark");
  adw_style_manager_set_color_scheme (sm, ADW_COLOR_SCHEME_DEFAULT);
}

/* A button under @root: with object data @key = @value, or with @action. */
static GtkWidget *
find_button (GtkWidget *root, const char *key, gpointer value, const char *action)
{
  GtkWidget *found = NULL;
  GPtrArray *stack = g_ptr_array_new ();

  g_ptr_array_add (stack, root);
  while (stack->len && !found)
    {
      GtkWidget *cur = g_ptr_array_steal_index (stack, stack->len - 1);
      if (GTK_IS_BUTTON (cur) &&
          ((key && g_object_get_data (G_OBJECT (cur), key) == value) ||
           (action && g_strcmp0 (gtk_actionable_get_action_name (GTK_ACTIONABLE (cur)), action) == 0)))
        found = cur;
      for (GtkWidget *c = gtk_widget_get_first_child (cur); c; c = gtk_widget_get_next_sibling (c))
        g_ptr_array_add (stack, c);
    }
  g_ptr_array_unref (stack);
  return found;
}

/* ---- no model: insensitive, with the reason -------------------------------- */

static void
not_ready_steps (HoneApplication *app, HoneWindow *window, gpointer data)
{
  HoneQuantizePage *page = hone_window_get_quantize_page (window);

  hone_window_show_page (window, "quantize");
  g_assert_cmpstr (hone_window_get_visible_page (window), ==, "quantize");
  g_assert_true (gtk_widget_get_visible (GTK_WIDGET (page)));
  g_assert_false (hone_quantize_page_get_ready (page));
  g_assert_nonnull (hone_quantize_page_get_notice (page));
  /* The one button does nothing without a model. */
  hone_quantize_page_start (page);
  g_assert_false (hone_quantize_page_get_running (page));
  g_assert_false (gtk_widget_activate_action (GTK_WIDGET (page), "quantize.start", NULL) &&
                  hone_quantize_page_get_running (page));
  /* The explanation is on screen, with a way to the Model page. */
  {
    GtkWidget *go = find_button (GTK_WIDGET (page), NULL, NULL, "win.show-page");
    g_assert_nonnull (go);
    g_assert_true (gtk_widget_is_drawable (go));
    g_signal_emit_by_name (go, "clicked");
    g_assert_cmpstr (hone_window_get_visible_page (window), ==, "model");
  }
}

static void
test_not_ready (void)
{
  run_app (not_ready_steps, NULL);
}

/* ---- the whole run ----------------------------------------------------------- */

/* The page's progress as the run reports it: never falling, and whether a
 * value between the start of the export (0.92 of the bar) and its end was
 * shown (the export reports the bytes it wrote). */
typedef struct {
  double last;
  gboolean mid_export;
} BarTrace;

static void
on_progress (GObject *page, GParamSpec *pspec, gpointer data)
{
  BarTrace *t = data;
  const double p = hone_quantize_page_get_progress (HONE_QUANTIZE_PAGE (page));
  g_assert_cmpfloat (p, >=, t->last);
  if (p > 0.925 && p < 0.999)
    t->mid_export = TRUE;
  t->last = p;
}

static void
run_steps (HoneApplication *app, HoneWindow *window, gpointer data)
{
  const char *out_dir = data;
  HoneEngine *engine = hone_application_get_engine (app);
  HoneQuantizePage *page = hone_window_get_quantize_page (window);
  g_autofree char *text = NULL;
  g_autoptr(GArray) ids = NULL;
  g_autoptr(GError) error = NULL;
  g_autoptr(HoneGguf) gguf = NULL;
  HoneQuantEvalScore sc[3];
  gsize text_len;
  const char *out;
  BarTrace bar = { 0 };
  gulong bar_id;

  load_model (app, window, model_path);
  hone_window_show_page (window, "quantize");
  WAIT_UNTIL (hone_quantize_page_get_ready (page), 30);
  g_assert_null (hone_quantize_page_get_notice (page));

  /* The document and its token count under the model's tokenizer. */
  hone_quantize_page_add_document (page, text_path);
  hone_quantize_page_add_document (page, text_path);   /* a duplicate is ignored */
  g_assert_cmpuint (hone_quantize_page_get_n_documents (page), ==, 1);
  WAIT_UNTIL (hone_quantize_page_get_document_tokens (page, 0) >= 0, 30);
  g_assert_true (g_file_get_contents (text_path, &text, &text_len, NULL));
  /* Documents are read as calibration reads them: surrounding white space dropped. */
  ids = hone_engine_tokenize (engine, g_strstrip (text), FALSE, FALSE, &error);
  g_assert_no_error (error);
  g_assert_cmpint (hone_quantize_page_get_document_tokens (page, 0), ==, (gint64) ids->len);
  g_assert_cmpint (hone_quantize_page_get_document_tokens (page, 0), >, 0);
  g_assert_cmpint (hone_quantize_page_get_document_tokens (page, 0), <=, (gint64) text_len);
  g_assert_cmpuint (hone_quantize_page_get_n_documents (page), ==, 1);

  hone_quantize_page_set_output_folder (page, out_dir);
  g_assert_true (gtk_widget_activate_action (GTK_WIDGET (page), "quantize.start", NULL));
  g_assert_true (hone_quantize_page_get_running (page));
  bar_id = g_signal_connect (page, "notify::progress", G_CALLBACK (on_progress), &bar);
  WAIT_UNTIL (!hone_quantize_page_get_running (page), 240);
  g_signal_handler_disconnect (page, bar_id);

  /* Progress: every layer reported, the export's bytes, and the end reached. */
  g_assert_cmpint (hone_quantize_page_get_layers_done (page), ==, N_LAYERS);
  g_assert_cmpfloat (hone_quantize_page_get_progress (page), ==, 1.0);
  g_assert_true (bar.mid_export);

  /* The report: finite numbers; the original against itself is KL 0, top-1 1. */
  for (int set = HONE_QUANTIZE_EVAL_HELDOUT; set <= HONE_QUANTIZE_EVAL_GENERIC; set++)
    {
      g_assert_true (hone_quantize_page_get_scores (page, set, sc));
      for (int i = 0; i < 3; i++)
        {
          g_test_message ("set %d model %d: ppl %.4f KL %.5f top-1 %.3f (%" G_GINT64_FORMAT " tokens)",
                          set, i, sc[i].ppl, sc[i].kl, sc[i].top1, sc[i].n_tokens);
          g_assert_true (isfinite (sc[i].ppl) && sc[i].ppl > 1.0);
          g_assert_true (isfinite (sc[i].kl) && sc[i].kl >= 0.0);
          g_assert_true (sc[i].top1 >= 0.0 && sc[i].top1 <= 1.0);
          g_assert_cmpint (sc[i].n_tokens, >, 0);
        }
      g_assert_cmpfloat (sc[0].kl, ==, 0.0);
      g_assert_cmpfloat (sc[0].top1, ==, 1.0);
    }
  /* The verdict shown is the one of both sets (held-out and generic text) */
  {
    HoneQuantEvalScore held[3], gen[3];
    gboolean good;
    g_autofree char *words = NULL;
    g_assert_true (hone_quantize_page_get_scores (page, HONE_QUANTIZE_EVAL_HELDOUT, held));
    g_assert_true (hone_quantize_page_get_scores (page, HONE_QUANTIZE_EVAL_GENERIC, gen));
    words = hone_quant_eval_verdict (held, gen, &good);
    g_test_message ("verdict: %s", words);
    g_assert_true (hone_gui_shows_label (GTK_WIDGET (page), words));
  }

  /* The export: one GGUF file with the AWQ marker, nothing else left. */
  out = hone_quantize_page_get_output_path (page);
  g_assert_nonnull (out);
  g_assert_true (g_str_has_prefix (out, out_dir));
  g_assert_true (g_str_has_suffix (out, ".gguf"));
  g_assert_true (g_file_test (out, G_FILE_TEST_IS_REGULAR));
  g_assert_cmpuint (count_entries (out_dir), ==, 1);
  gguf = hone_gguf_open (out, &error);
  g_assert_no_error (error);
  g_assert_cmpint (hone_gguf_find_kv (gguf, "hone.awq.group_size"), >=, 0);

  /* Load Quantized Model: through the Model page, into the engine. */
  g_assert_true (gtk_widget_activate_action (GTK_WIDGET (page), "quantize.load-result", NULL));
  g_assert_cmpstr (hone_window_get_visible_page (window), ==, "model");
  WAIT_UNTIL (hone_engine_get_state (engine) == HONE_ENGINE_STATE_READY &&
              g_strcmp0 (hone_engine_get_model_path (engine), out) == 0, 60);
  /* An AWQ model is not quantized again: insensitive, and it says why. */
  WAIT_UNTIL (hone_quantize_page_get_notice (page) != NULL &&
              strstr (hone_quantize_page_get_notice (page), "AWQ") != NULL, 30);
  g_assert_false (hone_quantize_page_get_ready (page));
}

static void
test_run (void)
{
  g_autofree char *out_dir = g_build_filename (tmp_home, "out-run", NULL);

  g_mkdir_with_parents (out_dir, 0755);
  run_app (run_steps, out_dir);
}

/* ---- Cancel mid-run ------------------------------------------------------------ */

static void
cancel_after_first_layer (HoneQuantizePage *page, GParamSpec *pspec, gpointer data)
{
  if (hone_quantize_page_get_layers_done (page) >= 1)
    gtk_widget_activate_action (GTK_WIDGET (page), "quantize.cancel", NULL);
}

static void
cancel_steps (HoneApplication *app, HoneWindow *window, gpointer data)
{
  const char *out_dir = data;
  HoneQuantizePage *page = hone_window_get_quantize_page (window);
  g_autofree char *missing = g_build_filename (tmp_home, "no-such-document.txt", NULL);
  gulong id;

  load_model (app, window, model_path);
  hone_window_show_page (window, "quantize");
  WAIT_UNTIL (hone_quantize_page_get_ready (page), 30);
  hone_quantize_page_add_document (page, text_path);
  /* A document that cannot be read says so in its row (and a toast)… */
  hone_quantize_page_add_document (page, missing);
  g_assert_cmpuint (hone_quantize_page_get_n_documents (page), ==, 2);
  WAIT_UNTIL (hone_quantize_page_get_document_tokens (page, 1) != -1, 30);
  g_assert_cmpint (hone_quantize_page_get_document_tokens (page, 1), ==, -2);
  /* …and goes again through its row's button, as a user would remove it. */
  {
    GtkWidget *remove = find_button (GTK_WIDGET (page), "serial", GUINT_TO_POINTER (2), NULL);
    g_assert_nonnull (remove);
    g_signal_emit_by_name (remove, "clicked");
  }
  g_assert_cmpuint (hone_quantize_page_get_n_documents (page), ==, 1);
  hone_quantize_page_set_output_folder (page, out_dir);
  id = g_signal_connect (page, "notify::progress", G_CALLBACK (cancel_after_first_layer), NULL);
  hone_quantize_page_start (page);
  g_assert_true (hone_quantize_page_get_running (page));
  WAIT_UNTIL (!hone_quantize_page_get_running (page), 240);
  g_signal_handler_disconnect (page, id);
  g_test_message ("cancelled after %d of %d layers", hone_quantize_page_get_layers_done (page), N_LAYERS);
  g_assert_cmpint (hone_quantize_page_get_layers_done (page), >=, 1);
  g_assert_null (hone_quantize_page_get_output_path (page));
  g_assert_false (hone_quantize_page_get_scores (page, HONE_QUANTIZE_EVAL_HELDOUT, (HoneQuantEvalScore[3]) { 0 }));
  /* Nothing half-written: no export, no temporary sibling. */
  g_assert_cmpuint (count_entries (out_dir), ==, 0);
  /* And the page is ready for another go. */
  g_assert_true (hone_quantize_page_get_ready (page));
}

static void
test_cancel (void)
{
  g_autofree char *out_dir = g_build_filename (tmp_home, "out-cancel", NULL);
  g_autoptr(GSettings) settings = g_settings_new ("io.github.hone.Hone");

  g_mkdir_with_parents (out_dir, 0755);
  /* The AutoAWQ folder this time; more work, so the cancel lands mid-run. */
  g_settings_set_string (settings, "quantize-format", "awq");
  g_settings_set_int (settings, "quantize-samples", 16);
  run_app (cancel_steps, out_dir);
}

/* ---- screenshots (opt-in) ------------------------------------------------------ */

static void
shots_steps (HoneApplication *app, HoneWindow *window, gpointer data)
{
  const char *model = data;
  HoneQuantizePage *page = hone_window_get_quantize_page (window);
  const char *root = g_getenv ("HONE_SOURCE_ROOT");
  g_autofree char *texts = g_build_filename (root ? root : ".", "data", "calibration", "texts", NULL);
  g_autofree char *out_dir = g_build_filename (tmp_home, "out-shots", NULL);

  gtk_window_set_default_size (GTK_WINDOW (window), 1000, 1240);
  g_mkdir_with_parents (out_dir, 0755);
  load_model (app, window, model);
  hone_window_show_page (window, "quantize");
  WAIT_UNTIL (hone_quantize_page_get_ready (page), 60);
  hone_quantize_page_add_document (page, texts);
  WAIT_UNTIL (hone_quantize_page_get_document_tokens (page, 0) != -1, 120);
  hone_quantize_page_set_output_folder (page, out_dir);
  hone_quantize_page_start (page);
  WAIT_UNTIL (!hone_quantize_page_get_running (page), 1800);
  g_assert_nonnull (hone_quantize_page_get_output_path (page));
  spin (6000);   /* let the toasts go */
  shoot_both (window, g_getenv ("HONE_QUANTIZE_SHOTS"));
}

/* HONE_QUANTIZE_SHOTS=<dir> [HONE_DEFAULT_MODEL=<gguf>]: the built-in
 * calibration set on that model (else the tiny one), then the page shot. */
static void
test_shots (void)
{
  g_autoptr(GSettings) settings = g_settings_new ("io.github.hone.Hone");

  g_settings_set_string (settings, "quantize-format", "gguf");
  if (g_getenv ("HONE_DEFAULT_MODEL"))
    {
      g_settings_set_int (settings, "quantize-samples", 8);
      g_settings_set_int (settings, "quantize-seq-len", 128);
    }
  run_app (shots_steps, (gpointer) (g_getenv ("HONE_DEFAULT_MODEL") ? g_getenv ("HONE_DEFAULT_MODEL") : model_path));
}

int
main (int argc, char *argv[])
{
  HoneTestModelSpec spec;
  g_autoptr(GError) error = NULL;
  g_autofree char *data = NULL, *config = NULL, *cache = NULL;
  g_autoptr(GSettings) settings = NULL;
  GString *text;
  int status;

  tmp_home = g_dir_make_tmp ("hone-gui-quantize-XXXXXX", NULL);
  data = g_build_filename (tmp_home, "data", NULL);
  config = g_build_filename (tmp_home, "config", NULL);
  cache = g_build_filename (tmp_home, "cache", NULL);
  g_setenv ("HOME", tmp_home, TRUE);
  g_setenv ("XDG_DATA_HOME", data, TRUE);
  g_setenv ("XDG_CONFIG_HOME", config, TRUE);
  g_setenv ("XDG_CACHE_HOME", cache, TRUE);
  g_setenv ("GSETTINGS_BACKEND", "memory", TRUE);

  g_test_init (&argc, &argv, NULL);
  if (!gtk_init_check ())
    {
      g_printerr ("no display: run under xvfb-run\n");
      return 77;
    }

  hone_test_model_spec_init (&spec, HONE_ARCH_LLAMA, HONE_DTYPE_Q8_0);
  spec.n_layers = N_LAYERS;
  model_path = hone_test_model_write_gguf (tmp_home, &spec, &error);
  g_assert_no_error (error);

  /* A calibration text of a few thousand bytes (the tiny tokenizer is
   * nearly byte-level): enough for a few samples and held-out ones. */
  text = g_string_new (NULL);
  for (int i = 0; i < 60; i++)
    g_string_append_printf (text, "Paragraph %d. The whetstone keeps the edge of blade %d keen; "
                            "oil it, hold it at %d degrees and draw it %d times.\n", i, i * 7, 10 + i % 15, 3 + i % 9);
  text_path = g_build_filename (tmp_home, "calibration.txt", NULL);
  g_assert_true (g_file_set_contents (text_path, text->str, text->len, NULL));
  g_string_free (text, TRUE);

  /* Small and quick: the memory backend is shared with the app. */
  settings = g_settings_new ("io.github.hone.Hone");
  g_settings_set_int (settings, "quantize-samples", 4);
  g_settings_set_int (settings, "quantize-seq-len", 32);

  g_test_add_func ("/quantize/not-ready", test_not_ready);
  g_test_add_func ("/quantize/run-report-export-load", test_run);
  g_test_add_func ("/quantize/cancel", test_cancel);
  if (g_getenv ("HONE_QUANTIZE_SHOTS"))
    g_test_add_func ("/quantize/screenshots", test_shots);
  status = g_test_run ();
  hone_test_rm_rf (tmp_home);
  g_free (model_path);
  g_free (text_path);
  g_free (tmp_home);
  return status;
}
