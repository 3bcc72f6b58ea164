/* hone-quantize-page.c — see hone-quantize-page.h. */
#include <inttypes.h>
#include "hone-quantize-page.h"

#include <math.h>
#include <string.h>

#include "hone-awq.h"
#include "hone-awq-data.h"
#include "hone-awq-export.h"
#include "hone-error.h"
#include "hone-i18n.h"
#include "hone-window.h"

/* Held-out samples kept for the evaluation (and generic-text samples): the
 * CPU runs three models over each, so a few are enough for a verdict. */
#define EVAL_SAMPLES 8

typedef enum {
  PHASE_READ,
  PHASE_CALIBRATE,
  PHASE_EVALUATE,
  PHASE_EXPORT,
} Phase;

/* Share of the whole run each phase takes on the progress bar. */
static const double phase_start[] = { 0.0, 0.05, 0.75, 0.92 };
static const double phase_end[]   = { 0.05, 0.75, 0.92, 1.0 };

typedef struct {
  guint serial;
  char *path;
  gint64 tokens;          /* −1 counting, −2 unreadable */
  GtkWidget *row;
  GCancellable *cancellable;
} Doc;

struct _HoneQuantizePage {
  AdwBin parent_instance;

  HoneEngine *engine;
  GSettings *settings;

  /* the loaded model, opened again here for its tokenizer and weights */
  char *model_path;
  HoneModel *model;
  char *problem;           /* why it cannot be quantized */
  GCancellable *open_cancellable;

  GPtrArray *docs;         /* Doc* */
  guint doc_serial;

  /* the run */
  GCancellable *run_cancellable;
  guint run_serial;
  double progress;
  int layers_done;
  char *output_path;
  gboolean output_loadable;
  gboolean have_report;
  HoneQuantEvalScore scores[2][3];
  gboolean have_generic;

  GtkNativeDialog *chooser;
  gboolean disposed;

  /* template */
  GtkWidget *notice_group;
  GtkWidget *notice_row;
  GtkWidget *content_box;
  GtkWidget *documents_list;
  GtkWidget *settings_row;
  GtkWidget *group_row;
  GtkStringList *group_model;
  GtkAdjustment *samples_adjustment;
  GtkAdjustment *seq_len_adjustment;
  GtkWidget *format_row;
  GtkStringList *format_model;
  GtkWidget *folder_row;
  GtkWidget *quantize_button;
  GtkWidget *progress_box;
  GtkWidget *progress_bar;
  GtkWidget *status_label;
  GtkWidget *cancel_button;
  GtkWidget *report_group;
  GtkWidget *verdict_row;
  GtkWidget *heldout_orig_row;
  GtkWidget *heldout_rtn_row;
  GtkWidget *heldout_awq_row;
  GtkWidget *generic_row;
  GtkWidget *generic_orig_row;
  GtkWidget *generic_rtn_row;
  GtkWidget *generic_awq_row;
  GtkWidget *output_row;
  GtkWidget *load_button;
};

G_DEFINE_FINAL_TYPE (HoneQuantizePage, hone_quantize_page, ADW_TYPE_BIN)

enum {
  PROP_0,
  PROP_RUNNING,
  PROP_PROGRESS,
  N_PROPS
};

static GParamSpec *props[N_PROPS];

static const int group_sizes[] = { 0, 32, 64, 128 };   /* the group combo's items */

static void update_state (HoneQuantizePage *self);
static void count_document (HoneQuantizePage *self, Doc *doc);

/* ---- helpers -------------------------------------------------------------- */

static void
toast (HoneQuantizePage *self, const char *message)
{
  g_autofree char *escaped = g_markup_escape_text (message, -1);  /* toast titles are markup */
  GtkWidget *overlay = gtk_widget_get_ancestor (GTK_WIDGET (self), ADW_TYPE_TOAST_OVERLAY);
  if (overlay)
    adw_toast_overlay_add_toast (ADW_TOAST_OVERLAY (overlay), adw_toast_new (escaped));
  else
    g_debug ("%s", message);
}

static void
error_dialog (HoneQuantizePage *self, const char *heading, const char *message)
{
  GtkRoot *root = gtk_widget_get_root (GTK_WIDGET (self));
  GtkWidget *dialog;

  if (!GTK_IS_WINDOW (root))
    {
      g_message ("%s: %s", heading, message);   /* the window is gone */
      return;
    }
  dialog = adw_message_dialog_new (GTK_WINDOW (root), heading, message);
  adw_message_dialog_add_response (ADW_MESSAGE_DIALOG (dialog), "close", _("_Close"));
  gtk_window_present (GTK_WINDOW (dialog));
}

static void
set_subtitle (GtkWidget *row, const char *text)
{
  g_autofree char *escaped = g_markup_escape_text (text ? text : "—", -1);   /* rows use markup */
  adw_action_row_set_subtitle (ADW_ACTION_ROW (row), escaped);
}

static void
set_title (GtkWidget *row, const char *text)
{
  g_autofree char *escaped = g_markup_escape_text (text ? text : "", -1);
  adw_preferences_row_set_title (ADW_PREFERENCES_ROW (row), escaped);
}

static char *
format_duration (double seconds)
{
  int s = (int) ceil (MAX (seconds, 0));
  if (s < 60)
    return g_strdup_printf (_("%d s"), s);
  if (s < 3600)
    return g_strdup_printf (_("%d min %d s"), s / 60, s % 60);
  return g_strdup_printf (_("%d h %d min"), s / 3600, (s / 60) % 60);
}

static gboolean
is_cancelled (const GError *error)
{
  return g_error_matches (error, HONE_ERROR, HONE_ERROR_CANCELLED) ||
         g_error_matches (error, G_IO_ERROR, G_IO_ERROR_CANCELLED);
}

static gboolean
running (HoneQuantizePage *self)
{
  return self->run_cancellable != NULL;
}

/* 128 where it divides every row (AutoAWQ's default), else 64, else 32. */
static int
auto_group_size (const HoneModel *model)
{
  const HoneModelConfig *c = &model->config;
  int qdim = c->n_heads * c->head_dim;
  static const int sizes[] = { 128, 64, 32 };

  for (guint i = 0; i < G_N_ELEMENTS (sizes); i++)
    if (c->hidden % sizes[i] == 0 && qdim % sizes[i] == 0 && c->ffn % sizes[i] == 0)
      return sizes[i];
  return 32;
}

static int
chosen_group_size (HoneQuantizePage *self)
{
  guint i = adw_combo_row_get_selected (ADW_COMBO_ROW (self->group_row));
  int g = i < G_N_ELEMENTS (group_sizes) ? group_sizes[i] : 0;
  if (g == 0)
    g = self->model ? auto_group_size (self->model) : 128;
  return g;
}

static gboolean
format_is_gguf (HoneQuantizePage *self)
{
  return adw_combo_row_get_selected (ADW_COMBO_ROW (self->format_row)) == 0;
}

static char *
output_folder (HoneQuantizePage *self)
{
  g_autofree char *folder = self->settings ? g_settings_get_string (self->settings, "quantize-folder") : NULL;

  if (folder && *folder)
    return g_steal_pointer (&folder);
  if (self->model_path)
    return g_path_get_dirname (self->model_path);
  return g_strdup (g_get_home_dir ());
}

/* <folder>/<model>-AWQ-g128[.Q4_1.gguf], with -2, -3… when taken: an export
 * replaces what it targets, and an earlier export is worth keeping. */
static char *
output_path (HoneQuantizePage *self, int group_size, gboolean gguf)
{
  g_autofree char *folder = output_folder (self);
  g_autofree char *base = g_path_get_basename (self->model_path ? self->model_path : "model");
  char *path = NULL;

  if (g_str_has_suffix (base, ".gguf") || g_str_has_suffix (base, ".GGUF"))
    base[strlen (base) - 5] = '\0';
  for (int n = 1; n < 1000; n++)
    {
      g_autofree char *suffix = n == 1 ? g_strdup ("") : g_strdup_printf ("-%d", n);
      g_autofree char *name = g_strdup_printf ("%s-AWQ-g%d%s%s", base, group_size, suffix, gguf ? ".Q4_1.gguf" : "");
      g_free (path);
      path = g_build_filename (folder, name, NULL);
      if (!g_file_test (path, G_FILE_TEST_EXISTS))
        break;
    }
  return path;
}

/* ---- the loaded model ----------------------------------------------------- */

typedef struct {
  HoneModel *model;
  char *problem;
} OpenResult;

static void
open_result_free (gpointer data)
{
  OpenResult *r = data;
  g_clear_pointer (&r->model, hone_model_unref);
  g_free (r->problem);
  g_free (r);
}

static void
open_thread (GTask *task, gpointer source, gpointer task_data, GCancellable *cancellable)
{
  const char *path = task_data;
  g_autoptr(GError) error = NULL;
  OpenResult *r = g_new0 (OpenResult, 1);
  HoneAwqOptions o;

  r->model = hone_model_open (path, &error);
  if (r->model)
    {
      hone_awq_options_init (&o);
      o.group_size = auto_group_size (r->model);
      /* Arch, row lengths, and above all "already AWQ": say so up front. */
      if (!hone_awq_check (r->model, &o, &error))
        r->problem = g_strdup (error->message);
    }
  else
    r->problem = g_strdup_printf (_("The model cannot be quantized: %s"), error->message);
  g_task_return_pointer (task, r, open_result_free);
}

static void
on_open_done (GObject *source, GAsyncResult *result, gpointer data)
{
  HoneQuantizePage *self = HONE_QUANTIZE_PAGE (source);
  GCancellable *cancellable = g_task_get_cancellable (G_TASK (result));
  OpenResult *r = g_task_propagate_pointer (G_TASK (result), NULL);

  if (!r || g_cancellable_is_cancelled (cancellable) || cancellable != self->open_cancellable)
    {
      if (r)
        open_result_free (r);
      return;
    }
  g_clear_object (&self->open_cancellable);
  self->model = g_steal_pointer (&r->model);
  self->problem = g_steal_pointer (&r->problem);
  open_result_free (r);
  /* The counts depend on the tokenizer: count again with this one. */
  for (guint i = 0; i < self->docs->len; i++)
    count_document (self, g_ptr_array_index (self->docs, i));
  update_state (self);
}

static void
refresh_model (HoneQuantizePage *self)
{
  HoneEngineState state = hone_engine_get_state (self->engine);
  const char *path = (state == HONE_ENGINE_STATE_READY || state == HONE_ENGINE_STATE_BUSY)
                     ? hone_engine_get_model_path (self->engine) : NULL;
  GTask *task;

  if (g_strcmp0 (path, self->model_path) == 0)
    {
      update_state (self);
      return;
    }
  if (self->open_cancellable)
    g_cancellable_cancel (self->open_cancellable);
  g_clear_object (&self->open_cancellable);
  g_clear_pointer (&self->model, hone_model_unref);
  g_clear_pointer (&self->problem, g_free);
  g_free (self->model_path);
  self->model_path = g_strdup (path);
  if (path)
    {
      self->open_cancellable = g_cancellable_new ();
      task = g_task_new (self, self->open_cancellable, on_open_done, NULL);
      g_task_set_task_data (task, g_strdup (path), g_free);
      g_task_run_in_thread (task, open_thread);
      g_object_unref (task);
    }
  update_state (self);
}

/* ---- documents ------------------------------------------------------------ */

static void
doc_free (gpointer data)
{
  Doc *doc = data;
  if (doc->cancellable)
    g_cancellable_cancel (doc->cancellable);
  g_clear_object (&doc->cancellable);
  g_free (doc->path);
  g_free (doc);
}

typedef struct {
  HoneModel *model;
  char *path;
  guint serial;
} CountJob;

static void
count_job_free (gpointer data)
{
  CountJob *c = data;
  hone_model_unref (c->model);
  g_free (c->path);
  g_free (c);
}

static void
count_thread (GTask *task, gpointer source, gpointer task_data, GCancellable *cancellable)
{
  CountJob *c = task_data;
  GError *error = NULL;
  gint64 n = 0;

  if (g_file_test (c->path, G_FILE_TEST_IS_DIR))
    {
      /* A folder: what calibration will read from it (supported types, recursively). */
      const char *paths[] = { c->path, NULL };
      HoneAwqData *d = hone_awq_data_load (c->model->tokenizer, paths, 1, 16, 1, cancellable, &error);
      if (d)
        n = d->n_tokens;
      g_clear_pointer (&d, hone_awq_data_free);
    }
  else
    {
      g_autofree char *text = hone_awq_document_text (c->path, cancellable, &error);
      if (text)
        {
          g_autoptr(GArray) ids = g_array_new (FALSE, FALSE, sizeof (gint32));
          if (hone_tokenizer_encode (c->model->tokenizer, text, -1, 0, ids, &error))
            n = ids->len;
        }
    }
  if (error)
    g_task_return_error (task, error);
  else
    g_task_return_int (task, n);
}

static Doc *
find_doc (HoneQuantizePage *self, guint serial, guint *index)
{
  for (guint i = 0; i < self->docs->len; i++)
    {
      Doc *doc = g_ptr_array_index (self->docs, i);
      if (doc->serial == serial)
        {
          if (index)
            *index = i;
          return doc;
        }
    }
  return NULL;
}

static void
on_count_done (GObject *source, GAsyncResult *result, gpointer data)
{
  HoneQuantizePage *self = HONE_QUANTIZE_PAGE (source);
  CountJob *c = g_task_get_task_data (G_TASK (result));
  g_autoptr(GError) error = NULL;
  gint64 n = g_task_propagate_int (G_TASK (result), &error);
  Doc *doc = find_doc (self, c->serial, NULL);

  if (!doc || doc->cancellable != g_task_get_cancellable (G_TASK (result)) || is_cancelled (error))
    return;   /* removed, recounted, or the page is going away */
  g_clear_object (&doc->cancellable);
  if (error)
    {
      doc->tokens = -2;
      set_subtitle (doc->row, error->message);
      gtk_widget_add_css_class (doc->row, "error");
      toast (self, error->message);
    }
  else
    {
      g_autofree char *number = g_strdup_printf ("%" PRId64, n);
      /* Translators: %s is a number of tokens */
      g_autofree char *text = g_strdup_printf (g_dngettext (GETTEXT_PACKAGE, "%s token", "%s tokens",
                                                            (gulong) n), number);
      doc->tokens = n;
      set_subtitle (doc->row, text);
      gtk_widget_remove_css_class (doc->row, "error");
    }
}

static void
count_document (HoneQuantizePage *self, Doc *doc)
{
  CountJob *c;
  GTask *task;

  if (doc->cancellable)
    g_cancellable_cancel (doc->cancellable);
  g_clear_object (&doc->cancellable);
  doc->tokens = -1;
  gtk_widget_remove_css_class (doc->row, "error");
  if (!self->model)
    {
      set_subtitle (doc->row, _("Tokens are counted once a model is loaded"));
      return;
    }
  set_subtitle (doc->row, _("Counting tokens…"));
  doc->cancellable = g_cancellable_new ();
  c = g_new0 (CountJob, 1);
  c->model = hone_model_ref (self->model);
  c->path = g_strdup (doc->path);
  c->serial = doc->serial;
  task = g_task_new (self, doc->cancellable, on_count_done, NULL);
  g_task_set_task_data (task, c, count_job_free);
  g_task_run_in_thread (task, count_thread);
  g_object_unref (task);
}

static void
on_remove_clicked (GtkButton *button, HoneQuantizePage *self)
{
  guint serial = GPOINTER_TO_UINT (g_object_get_data (G_OBJECT (button), "serial"));
  guint index;
  Doc *doc = find_doc (self, serial, &index);

  if (!doc)
    return;
  gtk_list_box_remove (GTK_LIST_BOX (self->documents_list), doc->row);
  g_ptr_array_remove_index (self->docs, index);
  /* Keep the focus in the list for keyboard users. */
  if (self->docs->len > 0)
    {
      Doc *next = g_ptr_array_index (self->docs, MIN (index, self->docs->len - 1));
      gtk_widget_grab_focus (next->row);
    }
}

void
hone_quantize_page_add_document (HoneQuantizePage *self, const char *path)
{
  Doc *doc;
  GtkWidget *remove;
  g_autofree char *base = NULL;
  g_autofree char *name = NULL;
  g_autofree char *abs = NULL;

  g_return_if_fail (HONE_IS_QUANTIZE_PAGE (self));
  g_return_if_fail (path != NULL);
  abs = g_canonicalize_filename (path, NULL);
  for (guint i = 0; i < self->docs->len; i++)
    if (g_strcmp0 (((Doc *) g_ptr_array_index (self->docs, i))->path, abs) == 0)
      return;   /* already there */

  doc = g_new0 (Doc, 1);
  doc->serial = ++self->doc_serial;
  doc->path = g_steal_pointer (&abs);
  doc->tokens = -1;
  doc->row = adw_action_row_new ();
  base = g_path_get_basename (doc->path);
  set_title (doc->row, base);
  gtk_widget_set_tooltip_text (doc->row, doc->path);
  adw_action_row_set_icon_name (ADW_ACTION_ROW (doc->row),
                                g_file_test (doc->path, G_FILE_TEST_IS_DIR) ? "folder-symbolic" : "text-x-generic-symbolic");
  remove = gtk_button_new_from_icon_name ("user-trash-symbolic");
  gtk_widget_set_valign (remove, GTK_ALIGN_CENTER);
  gtk_widget_add_css_class (remove, "flat");
  gtk_widget_set_tooltip_text (remove, _("Remove"));
  /* Translators: accessible name of a button; %s is a file name */
  name = g_strdup_printf (_("Remove %s"), base);
  gtk_accessible_update_property (GTK_ACCESSIBLE (remove), GTK_ACCESSIBLE_PROPERTY_LABEL, name, -1);
  g_object_set_data (G_OBJECT (remove), "serial", GUINT_TO_POINTER (doc->serial));
  g_signal_connect (remove, "clicked", G_CALLBACK (on_remove_clicked), self);
  adw_action_row_add_suffix (ADW_ACTION_ROW (doc->row), remove);
  gtk_list_box_append (GTK_LIST_BOX (self->documents_list), doc->row);
  g_ptr_array_add (self->docs, doc);
  count_document (self, doc);
}

guint
hone_quantize_page_get_n_documents (HoneQuantizePage *self)
{
  return self->docs->len;
}

gint64
hone_quantize_page_get_document_tokens (HoneQuantizePage *self, guint i)
{
  g_return_val_if_fail (i < self->docs->len, -2);
  return ((Doc *) g_ptr_array_index (self->docs, i))->tokens;
}

static gboolean
on_drop (GtkDropTarget *target, const GValue *value, double x, double y, HoneQuantizePage *self)
{
  GSList *files;

  if (!G_VALUE_HOLDS (value, GDK_TYPE_FILE_LIST))
    return FALSE;
  files = g_value_get_boxed (value);
  for (GSList *l = files; l; l = l->next)
    {
      g_autofree char *path = g_file_get_path (l->data);
      if (path)
        hone_quantize_page_add_document (self, path);
      else
        toast (self, _("Only local files can be used"));
    }
  return files != NULL;
}

/* ---- file choosers (GtkFileChooserNative: GTK 4.8 has no GtkFileDialog) --- */

typedef enum { CHOOSE_FILES, CHOOSE_FOLDER, CHOOSE_OUTPUT } ChooseKind;

G_GNUC_BEGIN_IGNORE_DEPRECATIONS

static void
on_chooser_response (GtkNativeDialog *chooser, int response, HoneQuantizePage *self)
{
  ChooseKind kind = GPOINTER_TO_INT (g_object_get_data (G_OBJECT (chooser), "kind"));

  if (response == GTK_RESPONSE_ACCEPT)
    {
      g_autoptr(GListModel) files = gtk_file_chooser_get_files (GTK_FILE_CHOOSER (chooser));
      for (guint i = 0; i < g_list_model_get_n_items (files); i++)
        {
          g_autoptr(GFile) file = g_list_model_get_item (files, i);
          g_autofree char *path = g_file_get_path (file);
          if (!path)
            toast (self, _("Only local files can be used"));
          else if (kind == CHOOSE_OUTPUT)
            hone_quantize_page_set_output_folder (self, path);
          else
            hone_quantize_page_add_document (self, path);
        }
    }
  gtk_native_dialog_destroy (chooser);
  g_clear_object (&self->chooser);
}

static void
choose (HoneQuantizePage *self, ChooseKind kind)
{
  GtkRoot *root = gtk_widget_get_root (GTK_WIDGET (self));
  GtkFileChooserNative *chooser;
  const char *title = kind == CHOOSE_FILES ? _("Add Documents")
                    : kind == CHOOSE_FOLDER ? _("Add a Folder of Documents")
                    : _("Choose the Export Folder");

  if (self->chooser)
    return;
  chooser = gtk_file_chooser_native_new (title, GTK_IS_WINDOW (root) ? GTK_WINDOW (root) : NULL,
                                         kind == CHOOSE_FILES ? GTK_FILE_CHOOSER_ACTION_OPEN
                                                              : GTK_FILE_CHOOSER_ACTION_SELECT_FOLDER,
                                         kind == CHOOSE_OUTPUT ? _("_Select") : _("_Add"), _("_Cancel"));
  gtk_native_dialog_set_modal (GTK_NATIVE_DIALOG (chooser), TRUE);
  if (kind == CHOOSE_FILES)
    {
      GtkFileFilter *docs = gtk_file_filter_new ();
      GtkFileFilter *all = gtk_file_filter_new ();
      const char *patterns[] = { "*.txt", "*.md", "*.markdown", "*.rst", "*.text", "*.pdf", "*.json", "*.jsonl" };

      gtk_file_chooser_set_select_multiple (GTK_FILE_CHOOSER (chooser), TRUE);
      gtk_file_filter_set_name (docs, _("Documents"));
      for (guint i = 0; i < G_N_ELEMENTS (patterns); i++)
        gtk_file_filter_add_pattern (docs, patterns[i]);
      gtk_file_filter_set_name (all, _("All Files"));
      gtk_file_filter_add_pattern (all, "*");
      gtk_file_chooser_add_filter (GTK_FILE_CHOOSER (chooser), docs);
      gtk_file_chooser_add_filter (GTK_FILE_CHOOSER (chooser), all);
      g_object_unref (docs);
      g_object_unref (all);
    }
  else if (kind == CHOOSE_OUTPUT)
    {
      g_autofree char *folder = output_folder (self);
      g_autoptr(GFile) file = g_file_new_for_path (folder);
      gtk_file_chooser_set_current_folder (GTK_FILE_CHOOSER (chooser), file, NULL);
    }
  g_object_set_data (G_OBJECT (chooser), "kind", GINT_TO_POINTER (kind));
  self->chooser = GTK_NATIVE_DIALOG (chooser);
  g_signal_connect (chooser, "response", G_CALLBACK (on_chooser_response), self);
  gtk_native_dialog_show (self->chooser);
}

G_GNUC_END_IGNORE_DEPRECATIONS

/* ---- settings ------------------------------------------------------------- */

static void
update_summary (HoneQuantizePage *self)
{
  int samples = (int) gtk_adjustment_get_value (self->samples_adjustment);
  int seq_len = (int) gtk_adjustment_get_value (self->seq_len_adjustment);
  g_autofree char *s = NULL;
  g_autofree char *folder = output_folder (self);

  /* Translators: "group size 128 · 16 samples of 256 tokens" */
  s = g_strdup_printf (_("Group size %d · %d samples of %d tokens"), chosen_group_size (self), samples, seq_len);
  adw_expander_row_set_subtitle (ADW_EXPANDER_ROW (self->settings_row), s);
  set_subtitle (self->folder_row, folder);
  if (self->settings)
    {
      g_settings_set_int (self->settings, "quantize-samples", samples);
      g_settings_set_int (self->settings, "quantize-seq-len", seq_len);
    }
}

static void
on_group_selected (HoneQuantizePage *self)
{
  guint i = adw_combo_row_get_selected (ADW_COMBO_ROW (self->group_row));

  if (self->settings && i < G_N_ELEMENTS (group_sizes))
    g_settings_set_int (self->settings, "quantize-group-size", group_sizes[i]);
  update_summary (self);
}

static void
on_format_selected (HoneQuantizePage *self)
{
  adw_action_row_set_subtitle (ADW_ACTION_ROW (self->format_row),
                               format_is_gguf (self) ? _("One file for Hone and llama.cpp")
                                                     : _("Safetensors for transformers and vLLM"));
  if (self->settings)
    g_settings_set_string (self->settings, "quantize-format", format_is_gguf (self) ? "gguf" : "awq");
}

void
hone_quantize_page_set_output_folder (HoneQuantizePage *self, const char *folder)
{
  g_return_if_fail (HONE_IS_QUANTIZE_PAGE (self));
  if (self->settings)
    g_settings_set_string (self->settings, "quantize-folder", folder ? folder : "");
  update_summary (self);
}

static void
read_settings (HoneQuantizePage *self)
{
  /* All read first: setting one widget writes every value back. */
  int g = g_settings_get_int (self->settings, "quantize-group-size");
  int samples = g_settings_get_int (self->settings, "quantize-samples");
  int seq_len = g_settings_get_int (self->settings, "quantize-seq-len");
  g_autofree char *format = g_settings_get_string (self->settings, "quantize-format");

  for (guint i = 0; i < G_N_ELEMENTS (group_sizes); i++)
    if (group_sizes[i] == g)
      adw_combo_row_set_selected (ADW_COMBO_ROW (self->group_row), i);
  adw_combo_row_set_selected (ADW_COMBO_ROW (self->format_row), g_strcmp0 (format, "awq") == 0 ? 1 : 0);
  gtk_adjustment_set_value (self->samples_adjustment, samples);
  gtk_adjustment_set_value (self->seq_len_adjustment, seq_len);
  on_format_selected (self);   /* its subtitle, also when the selection did not change */
  update_summary (self);
}

/* ---- state ---------------------------------------------------------------- */

const char *
hone_quantize_page_get_notice (HoneQuantizePage *self)
{
  if (!self->model_path)
    return _("Load a model on the Model page to quantize it");
  if (self->problem)
    return self->problem;
  if (!self->model)
    return _("Reading the model…");
  return NULL;
}

gboolean
hone_quantize_page_get_ready (HoneQuantizePage *self)
{
  return self->model != NULL && self->problem == NULL;
}

static void
update_state (HoneQuantizePage *self)
{
  const char *notice = hone_quantize_page_get_notice (self);
  gboolean ready = hone_quantize_page_get_ready (self);
  gboolean busy = running (self);

  /* A run keeps its own reference to the model: the engine may move on. */
  gtk_widget_set_visible (self->notice_group, notice != NULL && !busy);
  set_title (self->notice_row, notice);
  gtk_widget_set_sensitive (self->content_box, ready || busy);
  gtk_accessible_update_property (GTK_ACCESSIBLE (self->content_box), GTK_ACCESSIBLE_PROPERTY_DESCRIPTION,
                                  notice && !busy ? notice : "", -1);
  gtk_widget_action_set_enabled (GTK_WIDGET (self), "quantize.start", ready && !busy);
  gtk_widget_action_set_enabled (GTK_WIDGET (self), "quantize.cancel", busy);
  gtk_widget_action_set_enabled (GTK_WIDGET (self), "quantize.load-result",
                                 !busy && self->output_path && self->output_loadable);
  gtk_widget_set_visible (self->quantize_button, !busy);
  gtk_widget_set_visible (self->cancel_button, busy);
  if (busy)
    gtk_widget_set_visible (self->progress_box, TRUE);
  update_summary (self);
}

/* ---- the run -------------------------------------------------------------- */

typedef struct {
  HoneQuantizePage *page;     /* the task's source keeps it alive */
  guint serial;
  HoneModel *model;
  char **docs;
  int group_size, samples, seq_len;
  gboolean gguf;
  char *out_path;
  GCancellable *cancellable;
  int export_percent;         /* the last whole percent of the export posted */
  /* results */
  HoneQuantEvalScore scores[2][3];
  gboolean have_generic;
  int n_samples, n_heldout, n_documents;
  gint64 n_tokens;
  double seconds;
  GPtrArray *warnings;
} Job;

static void
job_free (gpointer data)
{
  Job *j = data;
  hone_model_unref (j->model);
  g_strfreev (j->docs);
  g_free (j->out_path);
  g_clear_object (&j->cancellable);
  g_clear_pointer (&j->warnings, g_ptr_array_unref);
  g_free (j);
}

typedef struct {
  HoneQuantizePage *page;
  guint serial;
  Phase phase;
  int layer, n_layers;
  double elapsed, eta;
  double part;            /* PHASE_EXPORT: the fraction of the weights written */
} Progress;

static void
progress_free (gpointer data)
{
  Progress *p = data;
  g_object_unref (p->page);
  g_free (p);
}

static void
set_progress (HoneQuantizePage *self, double fraction)
{
  self->progress = CLAMP (fraction, 0.0, 1.0);
  gtk_progress_bar_set_fraction (GTK_PROGRESS_BAR (self->progress_bar), self->progress);
  g_object_notify_by_pspec (G_OBJECT (self), props[PROP_PROGRESS]);
}

/* Main context: show what the worker reported. */
static gboolean
apply_progress (gpointer data)
{
  Progress *p = data;
  HoneQuantizePage *self = p->page;
  g_autofree char *text = NULL;
  double fraction = phase_start[p->phase];

  if (self->disposed || p->serial != self->run_serial || !running (self))
    return G_SOURCE_REMOVE;   /* a late message of a finished run */
  switch (p->phase)
    {
    case PHASE_READ:
      text = g_strdup (_("Reading and tokenizing the documents…"));
      break;
    case PHASE_CALIBRATE:
      if (p->n_layers > 0)
        {
          g_autofree char *elapsed = format_duration (p->elapsed);
          g_autofree char *eta = format_duration (p->eta);
          self->layers_done = p->layer + 1;
          fraction += (phase_end[p->phase] - phase_start[p->phase]) * (p->layer + 1) / p->n_layers;
          /* Translators: "Calibrating: layer 3 of 30 · 12 s elapsed · about 1 min 4 s left" */
          text = g_strdup_printf (_("Calibrating: layer %d of %d · %s elapsed · about %s left"),
                                  p->layer + 1, p->n_layers, elapsed, eta);
        }
      else
        text = g_strdup (_("Calibrating…"));
      break;
    case PHASE_EVALUATE:
      text = g_strdup (_("Evaluating the original, round-to-nearest and AWQ models…"));
      break;
    case PHASE_EXPORT:
      text = g_strdup (_("Writing the quantized model…"));
      fraction += (phase_end[p->phase] - phase_start[p->phase]) * p->part;
      break;
    }
  gtk_label_set_text (GTK_LABEL (self->status_label), text);
  set_progress (self, fraction);
  return G_SOURCE_REMOVE;
}

/* Worker thread: hand a progress report to the main context. */
static void
post_progress (Job *j, Phase phase, int layer, int n_layers, double elapsed, double eta)
{
  Progress *p = g_new0 (Progress, 1);

  p->page = g_object_ref (j->page);
  p->serial = j->serial;
  p->phase = phase;
  p->layer = layer;
  p->n_layers = n_layers;
  p->elapsed = elapsed;
  p->eta = eta;
  g_main_context_invoke_full (NULL, G_PRIORITY_DEFAULT, apply_progress, p, progress_free);
}

/* Worker thread: the export's progress, handed on at each whole percent. */
static void
on_export_progress (double fraction, gpointer data)
{
  Job *j = data;
  const int percent = (int) (100 * fraction);
  Progress *p;

  if (percent == j->export_percent)
    return;
  j->export_percent = percent;
  p = g_new0 (Progress, 1);
  p->page = g_object_ref (j->page);
  p->serial = j->serial;
  p->phase = PHASE_EXPORT;
  p->part = fraction;
  g_main_context_invoke_full (NULL, G_PRIORITY_DEFAULT, apply_progress, p, progress_free);
}

static void
on_layer_done (int layer, int n_layers, double elapsed_s, double eta_s, gpointer data)
{
  post_progress (data, PHASE_CALIBRATE, layer, n_layers, elapsed_s, eta_s);
}

static gboolean
evaluate (Job *j, HoneAwqResult *awq, const HoneAwqData *cal, GError **error)
{
  g_autoptr(HoneAwqResult) rtn = NULL;
  g_autoptr(HoneModel) m_rtn = NULL;
  g_autoptr(HoneModel) m_awq = NULL;
  g_autofree char *generic = NULL;
  g_autofree gint32 *gen = NULL;
  HoneModel *models[3];
  HoneAwqOptions o;
  int n_gen = 0;

  hone_awq_options_init (&o);
  o.group_size = j->group_size;
  o.search_scales = o.search_clip = FALSE;
  rtn = hone_awq_quantize (j->model, NULL, 0, 0, &o, NULL, NULL, j->cancellable, error);
  if (!rtn)
    return FALSE;
  if (!(m_rtn = hone_awq_result_open_model (rtn, j->cancellable, error)) ||
      !(m_awq = hone_awq_result_open_model (awq, j->cancellable, error)))
    return FALSE;
  models[0] = j->model;
  models[1] = m_rtn;
  models[2] = m_awq;
  if (!hone_quant_eval (models, 3, cal->heldout, cal->n_heldout, cal->seq_len, 0,
                        j->scores[HONE_QUANTIZE_EVAL_HELDOUT], j->cancellable, error))
    return FALSE;
  /* The generic text shows what the documents' fit may cost elsewhere;
   * optional (the built-in set may not be installed). */
  generic = hone_awq_builtin_generic_text ();
  if (generic)
    gen = hone_awq_tokenize_samples (j->model->tokenizer, generic, cal->seq_len, EVAL_SAMPLES, &n_gen, NULL);
  if (gen && n_gen > 0)
    {
      if (!hone_quant_eval (models, 3, gen, n_gen, cal->seq_len, 0, j->scores[HONE_QUANTIZE_EVAL_GENERIC],
                            j->cancellable, error))
        return FALSE;
      j->have_generic = TRUE;
    }
  return TRUE;
}

static void
run_thread (GTask *task, gpointer source, gpointer task_data, GCancellable *cancellable)
{
  Job *j = task_data;
  g_autoptr(HoneAwqData) cal = NULL;
  g_autoptr(HoneAwqResult) res = NULL;
  GError *error = NULL;
  HoneAwqOptions o;
  gboolean ok;

  post_progress (j, PHASE_READ, 0, 0, 0, 0);
  cal = hone_awq_data_load (j->model->tokenizer, (const char *const *) j->docs, j->samples, j->seq_len,
                            EVAL_SAMPLES, j->cancellable, &error);
  if (!cal)
    goto fail;
  j->warnings = g_ptr_array_ref (cal->warnings);
  j->n_samples = cal->n_samples;
  j->n_heldout = cal->n_heldout;
  j->n_documents = cal->n_documents;
  j->n_tokens = cal->n_tokens;

  post_progress (j, PHASE_CALIBRATE, 0, 0, 0, 0);
  hone_awq_options_init (&o);
  o.group_size = j->group_size;
  o.loss_tokens = hone_awq_gpu_available () ? 0 : 512;   /* as the CLI: all tokens on a GPU; on the CPU that costs hours */
  res = hone_awq_quantize (j->model, cal->samples, cal->n_samples, cal->seq_len, &o, on_layer_done, j,
                           j->cancellable, &error);
  if (!res)
    goto fail;
  j->seconds = res->seconds;

  post_progress (j, PHASE_EVALUATE, 0, 0, 0, 0);
  if (!evaluate (j, res, cal, &error))
    goto fail;

  post_progress (j, PHASE_EXPORT, 0, 0, 0, 0);
  if (g_cancellable_set_error_if_cancelled (j->cancellable, &error))
    goto fail;
  /* Both exporters write a temporary sibling and rename it: a cancel or an
   * error leaves nothing behind. */
  j->export_percent = -1;
  ok = j->gguf ? hone_awq_export_gguf (res, j->out_path, j->cancellable, on_export_progress, j, &error)
               : hone_awq_export_safetensors (res, j->out_path, j->cancellable, on_export_progress, j, &error);
  if (!ok)
    goto fail;
  g_task_return_boolean (task, TRUE);
  return;

fail:
  g_task_return_error (task, error);
}

static void
fill_score_rows (HoneQuantizePage *self, const HoneQuantEvalScore *sc, GtkWidget *orig, GtkWidget *rtn, GtkWidget *awq)
{
  GtkWidget *rows[3] = { orig, rtn, awq };

  for (int i = 0; i < 3; i++)
    {
      g_autofree char *text = NULL;
      if (i == 0)
        /* Translators: "perplexity 12.345 on 1016 tokens" */
        text = g_strdup_printf (_("Perplexity %.3f on %d tokens"), sc[0].ppl, (int) MIN (sc[0].n_tokens, G_MAXINT));
      else
        /* Translators: "perplexity 12.9 (+4.2 %) · KL 0.0123 · top-1 95.1 %" */
        text = g_strdup_printf (_("Perplexity %.3f (%+.1f %%) · KL %.4f · top-1 %.1f %%"), sc[i].ppl,
                                100.0 * (sc[i].ppl / sc[0].ppl - 1.0), sc[i].kl, 100.0 * sc[i].top1);
      set_subtitle (rows[i], text);
    }
}

static void
show_report (HoneQuantizePage *self)
{
  const HoneQuantEvalScore *h = self->scores[HONE_QUANTIZE_EVAL_HELDOUT];
  g_autofree char *words = NULL;
  gboolean good;

  fill_score_rows (self, h, self->heldout_orig_row, self->heldout_rtn_row, self->heldout_awq_row);
  gtk_widget_set_visible (self->generic_row, self->have_generic);
  if (self->have_generic)
    fill_score_rows (self, self->scores[HONE_QUANTIZE_EVAL_GENERIC], self->generic_orig_row,
                     self->generic_rtn_row, self->generic_awq_row);
  words = hone_quant_eval_verdict (h, self->have_generic ? self->scores[HONE_QUANTIZE_EVAL_GENERIC] : NULL, &good);
  set_subtitle (self->verdict_row, words);
  adw_action_row_set_icon_name (ADW_ACTION_ROW (self->verdict_row), good ? "emblem-ok-symbolic" : "dialog-warning-symbolic");
  set_subtitle (self->output_row, self->output_path);
  gtk_widget_set_tooltip_text (self->load_button, self->output_loadable ? NULL
                               : _("Hone runs the GGUF export; an AutoAWQ folder is for transformers and vLLM"));
  gtk_widget_set_visible (self->report_group, TRUE);
}

static void
on_run_done (GObject *source, GAsyncResult *result, gpointer data)
{
  HoneQuantizePage *self = HONE_QUANTIZE_PAGE (source);
  Job *j = g_task_get_task_data (G_TASK (result));
  g_autoptr(GError) error = NULL;

  g_clear_object (&self->run_cancellable);
  if (self->disposed)
    return;   /* the window went away mid-run; the run was cancelled */
  if (j->warnings && j->warnings->len > 0)
    {
      g_autofree char *msg = g_strdup_printf (g_dngettext (GETTEXT_PACKAGE, "Skipped %u document: %s",
                                                           "Skipped %u documents, first: %s", j->warnings->len),
                                              j->warnings->len, (const char *) j->warnings->pdata[0]);
      toast (self, msg);
    }
  if (!g_task_propagate_boolean (G_TASK (result), &error))
    {
      gtk_widget_set_visible (self->progress_box, FALSE);
      set_progress (self, 0);
      if (is_cancelled (error))
        toast (self, _("Quantization cancelled; nothing was written"));
      else
        error_dialog (self, _("Quantization Failed"), error->message);
    }
  else
    {
      g_autofree char *took = format_duration (j->seconds);
      g_autofree char *text = NULL;

      g_free (self->output_path);
      self->output_path = g_strdup (j->out_path);
      /* Both exports run in Hone (the AutoAWQ folder as Q4Z, hone-awq-load.h). */
      self->output_loadable = TRUE;
      memcpy (self->scores, j->scores, sizeof self->scores);
      self->have_generic = j->have_generic;
      self->have_report = TRUE;
      set_progress (self, 1.0);
      /* Translators: "Done: 16 samples of 256 tokens from 3 documents, calibrated in 2 min 3 s" */
      text = g_strdup_printf (g_dngettext (GETTEXT_PACKAGE,
                                           "Done: %d samples of %d tokens from %d document, calibrated in %s",
                                           "Done: %d samples of %d tokens from %d documents, calibrated in %s",
                                           j->n_documents),
                              j->n_samples, j->seq_len, j->n_documents, took);
      gtk_label_set_text (GTK_LABEL (self->status_label), text);
      show_report (self);
      toast (self, _("Quantized model exported"));
    }
  update_state (self);
  g_object_notify_by_pspec (G_OBJECT (self), props[PROP_RUNNING]);
}

void
hone_quantize_page_start (HoneQuantizePage *self)
{
  Job *j;
  GTask *task;
  GStrvBuilder *builder;

  g_return_if_fail (HONE_IS_QUANTIZE_PAGE (self));
  if (running (self) || !hone_quantize_page_get_ready (self))
    return;
  if (format_is_gguf (self) && self->model->source != HONE_MODEL_SOURCE_GGUF)
    {
      toast (self, _("A GGUF export needs a GGUF model: choose the AutoAWQ folder format"));
      return;
    }

  j = g_new0 (Job, 1);
  j->page = self;
  j->serial = ++self->run_serial;
  j->model = hone_model_ref (self->model);
  j->group_size = chosen_group_size (self);
  j->samples = (int) gtk_adjustment_get_value (self->samples_adjustment);
  j->seq_len = (int) gtk_adjustment_get_value (self->seq_len_adjustment);
  j->gguf = format_is_gguf (self);
  j->out_path = output_path (self, j->group_size, j->gguf);
  builder = g_strv_builder_new ();
  for (guint i = 0; i < self->docs->len; i++)
    g_strv_builder_add (builder, ((Doc *) g_ptr_array_index (self->docs, i))->path);
  if (self->docs->len == 0)
    {
      g_autofree char *builtin = hone_awq_builtin_dir ();
      g_autofree char *texts = builtin ? g_build_filename (builtin, "texts", NULL) : NULL;
      if (!texts)
        {
          g_strv_builder_unref (builder);
          job_free (j);
          toast (self, _("Add documents: the built-in calibration set is not installed"));
          return;
        }
      g_strv_builder_add (builder, texts);
    }
  j->docs = g_strv_builder_end (builder);
  g_strv_builder_unref (builder);
  self->run_cancellable = g_cancellable_new ();
  j->cancellable = g_object_ref (self->run_cancellable);

  self->layers_done = 0;
  gtk_widget_set_visible (self->report_group, FALSE);
  gtk_label_set_text (GTK_LABEL (self->status_label), _("Starting…"));
  set_progress (self, 0);
  task = g_task_new (self, self->run_cancellable, on_run_done, NULL);
  g_task_set_task_data (task, j, job_free);
  g_task_run_in_thread (task, run_thread);
  g_object_unref (task);
  update_state (self);
  /* The start button hides: keep the keyboard focus on what now matters. */
  gtk_widget_grab_focus (self->cancel_button);
  g_object_notify_by_pspec (G_OBJECT (self), props[PROP_RUNNING]);
}

void
hone_quantize_page_cancel (HoneQuantizePage *self)
{
  g_return_if_fail (HONE_IS_QUANTIZE_PAGE (self));
  if (self->run_cancellable)
    {
      g_cancellable_cancel (self->run_cancellable);
      gtk_label_set_text (GTK_LABEL (self->status_label), _("Cancelling…"));
    }
}

void
hone_quantize_page_shutdown (HoneQuantizePage *self)
{
  hone_quantize_page_cancel (self);
}

gboolean
hone_quantize_page_get_running (HoneQuantizePage *self)
{
  return running (self);
}

double
hone_quantize_page_get_progress (HoneQuantizePage *self)
{
  return self->progress;
}

int
hone_quantize_page_get_layers_done (HoneQuantizePage *self)
{
  return self->layers_done;
}

const char *
hone_quantize_page_get_output_path (HoneQuantizePage *self)
{
  return self->output_path;
}

gboolean
hone_quantize_page_get_scores (HoneQuantizePage *self, HoneQuantizeEvalSet set, HoneQuantEvalScore out[3])
{
  if (!self->have_report || (set == HONE_QUANTIZE_EVAL_GENERIC && !self->have_generic))
    return FALSE;
  memcpy (out, self->scores[set], 3 * sizeof (HoneQuantEvalScore));
  return TRUE;
}

void
hone_quantize_page_load_result (HoneQuantizePage *self)
{
  GtkWidget *window = gtk_widget_get_ancestor (GTK_WIDGET (self), HONE_TYPE_WINDOW);

  if (!self->output_path || !self->output_loadable || !window)
    return;
  /* The Model page's own path: card, recent models, then load (as the
   * app does for the last model at start-up). */
  g_object_set_data (G_OBJECT (hone_window_get_model_page (HONE_WINDOW (window))), "hone-auto-load",
                     GINT_TO_POINTER (1));
  hone_window_open_model (HONE_WINDOW (window), self->output_path);
}

/* ---- actions -------------------------------------------------------------- */

static void
action_cb (GtkWidget *widget, const char *name, GVariant *param)
{
  HoneQuantizePage *self = HONE_QUANTIZE_PAGE (widget);

  if (g_str_equal (name, "quantize.start"))
    hone_quantize_page_start (self);
  else if (g_str_equal (name, "quantize.cancel"))
    hone_quantize_page_cancel (self);
  else if (g_str_equal (name, "quantize.load-result"))
    hone_quantize_page_load_result (self);
  else if (g_str_equal (name, "quantize.add-files"))
    choose (self, CHOOSE_FILES);
  else if (g_str_equal (name, "quantize.add-folder"))
    choose (self, CHOOSE_FOLDER);
  else if (g_str_equal (name, "quantize.choose-folder"))
    choose (self, CHOOSE_OUTPUT);
}

/* ---- life cycle ----------------------------------------------------------- */

static void
hone_quantize_page_get_property (GObject *object, guint prop_id, GValue *value, GParamSpec *pspec)
{
  HoneQuantizePage *self = HONE_QUANTIZE_PAGE (object);

  switch (prop_id)
    {
    case PROP_RUNNING:
      g_value_set_boolean (value, running (self));
      break;
    case PROP_PROGRESS:
      g_value_set_double (value, self->progress);
      break;
    default:
      G_OBJECT_WARN_INVALID_PROPERTY_ID (object, prop_id, pspec);
    }
}

static void
hone_quantize_page_dispose (GObject *object)
{
  HoneQuantizePage *self = HONE_QUANTIZE_PAGE (object);

  self->disposed = TRUE;
  if (self->run_cancellable)
    g_cancellable_cancel (self->run_cancellable);
  if (self->open_cancellable)
    g_cancellable_cancel (self->open_cancellable);
  g_clear_object (&self->open_cancellable);
  if (self->chooser)
    gtk_native_dialog_destroy (self->chooser);
  g_clear_object (&self->chooser);
  if (self->engine)
    g_signal_handlers_disconnect_by_data (self->engine, self);
  g_clear_object (&self->engine);
  g_clear_object (&self->settings);
  if (self->docs)
    g_ptr_array_set_size (self->docs, 0);
  G_OBJECT_CLASS (hone_quantize_page_parent_class)->dispose (object);
}

static void
hone_quantize_page_finalize (GObject *object)
{
  HoneQuantizePage *self = HONE_QUANTIZE_PAGE (object);

  g_clear_object (&self->run_cancellable);
  g_ptr_array_unref (self->docs);
  g_clear_pointer (&self->model, hone_model_unref);
  g_free (self->model_path);
  g_free (self->problem);
  g_free (self->output_path);
  G_OBJECT_CLASS (hone_quantize_page_parent_class)->finalize (object);
}

static void
hone_quantize_page_class_init (HoneQuantizePageClass *klass)
{
  GObjectClass *object_class = G_OBJECT_CLASS (klass);
  GtkWidgetClass *widget_class = GTK_WIDGET_CLASS (klass);
  static const char *const actions[] = {
    "quantize.start", "quantize.cancel", "quantize.load-result",
    "quantize.add-files", "quantize.add-folder", "quantize.choose-folder",
  };

  object_class->get_property = hone_quantize_page_get_property;
  object_class->dispose = hone_quantize_page_dispose;
  object_class->finalize = hone_quantize_page_finalize;

  props[PROP_RUNNING] = g_param_spec_boolean ("running", NULL, NULL, FALSE,
                                              G_PARAM_READABLE | G_PARAM_STATIC_STRINGS);
  props[PROP_PROGRESS] = g_param_spec_double ("progress", NULL, NULL, 0, 1, 0,
                                              G_PARAM_READABLE | G_PARAM_STATIC_STRINGS);
  g_object_class_install_properties (object_class, N_PROPS, props);

  gtk_widget_class_set_template_from_resource (widget_class, "/io/github/hone/Hone/hone-quantize-page.ui");
#define CHILD(name) gtk_widget_class_bind_template_child (widget_class, HoneQuantizePage, name)
  CHILD (notice_group);
  CHILD (notice_row);
  CHILD (content_box);
  CHILD (documents_list);
  CHILD (settings_row);
  CHILD (group_row);
  CHILD (group_model);
  CHILD (samples_adjustment);
  CHILD (seq_len_adjustment);
  CHILD (format_row);
  CHILD (format_model);
  CHILD (folder_row);
  CHILD (quantize_button);
  CHILD (progress_box);
  CHILD (progress_bar);
  CHILD (status_label);
  CHILD (cancel_button);
  CHILD (report_group);
  CHILD (verdict_row);
  CHILD (heldout_orig_row);
  CHILD (heldout_rtn_row);
  CHILD (heldout_awq_row);
  CHILD (generic_row);
  CHILD (generic_orig_row);
  CHILD (generic_rtn_row);
  CHILD (generic_awq_row);
  CHILD (output_row);
  CHILD (load_button);
#undef CHILD
  gtk_widget_class_bind_template_callback (widget_class, update_summary);
  gtk_widget_class_bind_template_callback (widget_class, on_group_selected);
  gtk_widget_class_bind_template_callback (widget_class, on_format_selected);
  for (guint i = 0; i < G_N_ELEMENTS (actions); i++)
    gtk_widget_class_install_action (widget_class, actions[i], NULL, action_cb);
}

static void
hone_quantize_page_init (HoneQuantizePage *self)
{
  GtkDropTarget *drop;

  self->docs = g_ptr_array_new_with_free_func (doc_free);
  gtk_widget_init_template (GTK_WIDGET (self));
  /* The combo items are built here so that they are translated. */
  gtk_string_list_append (self->group_model, _("Automatic"));
  gtk_string_list_append (self->group_model, "32");
  gtk_string_list_append (self->group_model, "64");
  gtk_string_list_append (self->group_model, "128");
  gtk_string_list_append (self->format_model, _("GGUF Q4_1 File"));
  gtk_string_list_append (self->format_model, _("AutoAWQ Folder"));

  /* Dropped files become documents here (the window's own drop opens models). */
  drop = gtk_drop_target_new (GDK_TYPE_FILE_LIST, GDK_ACTION_COPY);
  g_signal_connect (drop, "drop", G_CALLBACK (on_drop), self);
  gtk_widget_add_controller (GTK_WIDGET (self), GTK_EVENT_CONTROLLER (drop));
  update_state (self);
}

GtkWidget *
hone_quantize_page_new (void)
{
  return g_object_new (HONE_TYPE_QUANTIZE_PAGE, NULL);
}

void
hone_quantize_page_setup (HoneQuantizePage *self, HoneEngine *engine, GSettings *settings)
{
  g_return_if_fail (HONE_IS_QUANTIZE_PAGE (self));
  g_set_object (&self->engine, engine);
  g_set_object (&self->settings, settings);
  read_settings (self);
  g_signal_connect_swapped (engine, "notify::state", G_CALLBACK (refresh_model), self);
  g_signal_connect_swapped (engine, "notify::model-path", G_CALLBACK (refresh_model), self);
  refresh_model (self);
}
