/* test-gui-app.c — the real app with the real engine on the CPU.
 *
 * Runs HoneApplication (g_application_run, a real window under Xvfb) in a
 * temporary HOME with a tiny generated model (tests/hone-test-models.h):
 * open the model (card), load it, send a message and watch tokens stream,
 * stop, regenerate (stats, TTFT chart), edit-and-resend, close the window
 * while an answer streams; then start a second HoneApplication on the same
 * data folder and find the conversation with the same messages. Also: an
 * engine option switch changes the engine (or is insensitive with a reason),
 * a corrupt conversation file is skipped while the others load, and a model
 * that fails to load leaves the app as it was.
 */
#include <adwaita.h>
#include <glib/gstdio.h>
#include <string.h>

#include "hone-application.h"
#include "hone-chart.h"
#include "hone-conversation-list.h"
#include "hone-conversation-store.h"
#include "hone-device-bandwidth.h"
#include "hone-gguf.h"
#include "hone-i18n.h"
#include "hone-markdown.h"
#include "hone-message.h"
#include "hone-test-models.h"
#include "hone-window.h"
#include "hone-gui-harness.h"

static char *tmp_home;
static char *model_path;

typedef HoneGuiSteps Steps;
#define spin hone_gui_spin
#define run_app hone_gui_run_app

static void
load_model (HoneApplication *app, HoneWindow *window)
{
  HoneEngine *engine = hone_application_get_engine (app);
  HoneModelPage *model_page = hone_window_get_model_page (window);
  HoneModelInfo *info;

  hone_window_open_model (window, model_path);
  g_assert_cmpstr (hone_window_get_visible_page (window), ==, "model");
  WAIT_UNTIL (hone_model_page_get_info (model_page) != NULL, 20);
  info = hone_model_page_get_info (model_page);
  g_assert_cmpstr (hone_model_info_get_architecture (info), ==, "llama");
  g_assert_true (hone_model_info_get_has_chat_template (info));
  hone_model_page_load (model_page);
  WAIT_UNTIL (hone_engine_get_state (engine) == HONE_ENGINE_STATE_READY, 60);
  g_assert_cmpstr (hone_engine_get_model_path (engine), ==, model_path);
}

typedef struct {
  char *conversation_id;
  guint n_messages;
  char *first_user_text;
  char *last_answer;
} ChatResult;

static HoneChatPage *stop_page;
static HoneWindow *close_window;

static void
close_on_first (GObject *obj, GParamSpec *pspec, guint *counter)
{
  if (++(*counter) == 1)
    gtk_window_close (GTK_WINDOW (close_window));
}

/* Stops from inside the stream, as a user clicking Stop mid-answer would. */
static void
stop_after_three (GObject *obj, GParamSpec *pspec, guint *counter)
{
  if (++(*counter) == 3)
    hone_chat_page_stop (stop_page);
}

static HoneMessage *
last_message (HoneConversation *c)
{
  guint n = hone_conversation_get_n_messages (c);
  return n ? hone_conversation_get_message (c, n - 1) : NULL;
}

static void
chat_steps (HoneApplication *app, HoneWindow *window, gpointer data)
{
  ChatResult *result = data;
  HoneChatPage *chat = hone_window_get_chat_page (window);
  HonePerformancePage *perf = hone_window_get_performance_page (window);
  HoneConversation *c;
  HoneMessage *answer;
  guint pieces = 0;
  double bar, ttft;
  guint ttft_bars;
  int generated;

  load_model (app, window);

  /* Send: the answer streams in pieces. A fixed seed keeps the random model
   * from ending early; max-tokens 0 lets it run until we stop it. */
  hone_window_show_page (window, "chat");
  hone_chat_page_new_conversation (chat);
  c = hone_chat_page_get_conversation (chat);
  g_object_set (c, "seed", (gint64) 7, "temperature", 1.0, "max-tokens", 0, NULL);
  g_assert_true (hone_chat_page_send (chat, "Hello there"));
  g_assert_true (hone_chat_page_get_generating (chat));
  g_assert_cmpstr (hone_conversation_get_title (c), ==, "Hello there");
  answer = last_message (c);
  g_assert_cmpstr (hone_message_get_role (answer), ==, "assistant");
  stop_page = chat;
  g_signal_connect (answer, "notify::content", G_CALLBACK (stop_after_three), &pieces);
  WAIT_UNTIL (!hone_chat_page_get_generating (chat), 60);
  g_signal_handlers_disconnect_by_func (answer, stop_after_three, &pieces);
  g_test_message ("%u pieces streamed before the stop took effect", pieces);
  g_assert_cmpuint (pieces, >=, 3);

  /* Stop keeps what streamed so far, and ends well before the context is full. */
  g_assert_cmpint (hone_message_get_state (answer), ==, HONE_MESSAGE_STOPPED);
  g_assert_cmpstr (hone_message_get_content (answer), !=, "");
  if (hone_message_get_has_stats (answer))
    {
      hone_message_get_stats (answer, NULL, NULL, &generated, NULL);
      g_assert_cmpint (generated, <, 2048);
    }

  /* Regenerate: a complete answer with stats, and a TTFT bar on the chart. */
  ttft_bars = hone_chart_get_n_points (hone_performance_page_get_chart (perf, "ttft"), 0);
  g_object_set (c, "max-tokens", 6, NULL);
  g_assert_true (hone_chat_page_regenerate (chat));
  WAIT_UNTIL (!hone_chat_page_get_generating (chat), 60);
  g_assert_cmpuint (hone_conversation_get_n_messages (c), ==, 2);
  answer = last_message (c);
  g_assert_cmpint (hone_message_get_state (answer), ==, HONE_MESSAGE_DONE);
  g_assert_true (hone_message_get_has_stats (answer));
  hone_message_get_stats (answer, &ttft, NULL, &generated, NULL);
  g_assert_cmpint (generated, >=, 1);
  g_assert_cmpint (generated, <=, 6);
  g_assert_cmpfloat (ttft, >, 0);
  g_assert_cmpuint (hone_chart_get_n_points (hone_performance_page_get_chart (perf, "ttft"), 0), ==, ttft_bars + 1);
  g_assert_true (hone_chart_get_point (hone_performance_page_get_chart (perf, "ttft"), 0, ttft_bars, NULL, &bar));
  g_assert_cmpfloat (bar, ==, ttft);

  /* Edit and resend replaces the first message and what followed it. */
  g_assert_true (hone_chat_page_edit_and_resend (chat, 0, "Hi again"));
  WAIT_UNTIL (!hone_chat_page_get_generating (chat), 60);
  g_assert_cmpuint (hone_conversation_get_n_messages (c), ==, 2);
  g_assert_cmpstr (hone_message_get_content (hone_conversation_get_message (c, 0)), ==, "Hi again");

  /* Memory chart got snapshots while the Performance page was polling. */
  hone_window_show_page (window, "performance");
  spin (600);
  g_assert_cmpuint (hone_chart_get_n_points (hone_performance_page_get_chart (perf, "memory"), 0), >=, 2);
  hone_window_show_page (window, "chat");

  /* Close the window while an answer streams (from inside the stream, so
   * it is surely still running): cancelled cleanly and saved. */
  g_object_set (c, "max-tokens", 0, NULL);
  pieces = 0;
  g_assert_true (hone_chat_page_send (chat, "Tell me more"));
  answer = g_object_ref (last_message (c));
  result->conversation_id = g_strdup (hone_conversation_get_id (c));
  result->n_messages = hone_conversation_get_n_messages (c);
  result->first_user_text = g_strdup ("Hi again");
  close_window = window;
  g_signal_connect (answer, "notify::content", G_CALLBACK (close_on_first), &pieces);
  WAIT_UNTIL (pieces >= 1, 60);
  g_signal_handlers_disconnect_by_func (answer, close_on_first, &pieces);
  g_assert_null (gtk_application_get_active_window (GTK_APPLICATION (app)));
  g_assert_cmpint (hone_message_get_state (answer), ==, HONE_MESSAGE_STOPPED);
  result->last_answer = g_strdup (hone_message_get_content (answer));
  g_object_unref (answer);
}

static void
restart_steps (HoneApplication *app, HoneWindow *window, gpointer data)
{
  ChatResult *result = data;
  HoneChatPage *chat = hone_window_get_chat_page (window);
  HoneConversationStore *store = hone_application_get_store (app);
  HoneConversation *c = hone_conversation_store_find (store, result->conversation_id);
  HoneMessage *last;

  g_assert_nonnull (c);
  /* The most recent conversation is the one shown. */
  g_assert_true (hone_chat_page_get_conversation (chat) == c);
  g_assert_cmpuint (hone_conversation_get_n_messages (c), ==, result->n_messages);
  g_assert_cmpstr (hone_message_get_content (hone_conversation_get_message (c, 0)), ==, result->first_user_text);
  last = last_message (c);
  g_assert_cmpstr (hone_message_get_role (last), ==, "assistant");
  g_assert_cmpint (hone_message_get_state (last), ==, HONE_MESSAGE_STOPPED);
  /* What streamed before the close (the engine may have added a piece in flight). */
  g_assert_true (g_str_has_prefix (hone_message_get_content (last), result->last_answer) ||
                 g_str_has_prefix (result->last_answer, hone_message_get_content (last)));
  g_assert_cmpuint (g_list_model_get_n_items (hone_conversation_store_get_model (store)), ==, 1);

  /* Rename (saved at once) and delete (file gone, view empty). */
  {
    HoneConversationList *list = HONE_CONVERSATION_LIST (hone_chat_page_get_conversation_list (chat));
    g_autofree char *file = g_strconcat (result->conversation_id, ".json", NULL);
    g_autofree char *path = g_build_filename (hone_conversation_store_get_directory (store), file, NULL);
    g_autofree char *contents = NULL;

    g_assert_true (hone_conversation_list_get_selected (list) == c);
    hone_conversation_list_rename (list, c, "  Renamed chat  ");
    g_assert_cmpstr (hone_conversation_get_title (c), ==, "Renamed chat");
    g_assert_true (g_file_get_contents (path, &contents, NULL, NULL));
    g_assert_nonnull (strstr (contents, "\"Renamed chat\""));
    hone_conversation_list_delete (list, c);
    g_assert_false (g_file_test (path, G_FILE_TEST_EXISTS));
    g_assert_null (hone_chat_page_get_conversation (chat));
    g_assert_cmpuint (g_list_model_get_n_items (hone_conversation_store_get_model (store)), ==, 0);
  }
}

static void
test_chat_and_restart (void)
{
  ChatResult result = { 0 };
  g_autofree char *broken = NULL;
  g_autofree char *dir = g_build_filename (g_get_user_data_dir (), "hone", "conversations", NULL);

  run_app (chat_steps, &result);
  /* A corrupt file beside the good one: skipped, the good one still loads. */
  broken = g_build_filename (dir, "broken.json", NULL);
  g_assert_true (g_file_set_contents (broken, "{\"id\": \"x\", \"messages\": [", -1, NULL));
  run_app (restart_steps, &result);

  g_free (result.conversation_id);
  g_free (result.first_user_text);
  g_free (result.last_answer);
}

static void
switch_steps (HoneApplication *app, HoneWindow *window, gpointer data)
{
  HoneEngine *engine = hone_application_get_engine (app);
  HoneModelPage *page = hone_window_get_model_page (window);
  GSettings *settings = hone_application_get_settings (app);
  const struct { const char *option, *key; HoneEngineCaps cap; } options[] = {
    { "int8-kv", "kv-int8", HONE_ENGINE_CAP_INT8_KV },
    { "speculative", "speculative", HONE_ENGINE_CAP_SPECULATIVE },
    { "pd-split", "prefill-decode-split", HONE_ENGINE_CAP_PD_SPLIT },
  };

  load_model (app, window);
  for (guint i = 0; i < G_N_ELEMENTS (options); i++)
    {
      GtkWidget *sw = hone_model_page_get_option_switch (page, options[i].option);
      gboolean supported = (hone_engine_get_capabilities (engine) & options[i].cap) != 0;
      gboolean before;

      g_assert_nonnull (sw);
      g_object_get (engine, options[i].option, &before, NULL);
      g_assert_cmpint (gtk_switch_get_active (GTK_SWITCH (sw)), ==, before);
      g_assert_cmpint (gtk_widget_get_sensitive (sw), ==, supported);
      if (supported)
        {
          gboolean after;
          gtk_switch_set_active (GTK_SWITCH (sw), !before);
          g_object_get (engine, options[i].option, &after, NULL);
          g_assert_cmpint (after, ==, !before);
          g_assert_cmpint (g_settings_get_boolean (settings, options[i].key), ==, !before);
          /* and the other way: the engine's property shows on the switch */
          g_object_set (engine, options[i].option, before, NULL);
          g_assert_cmpint (gtk_switch_get_active (GTK_SWITCH (sw)), ==, before);
        }
      else
        {
          gboolean after;
          /* Unsupported: insensitive, and a tooltip says why… */
          g_assert_nonnull (gtk_widget_get_tooltip_text (sw));
          g_test_message ("%s unsupported: %s", options[i].option, gtk_widget_get_tooltip_text (sw));
          /* …but still bound, so the state shown is the engine's. */
          gtk_switch_set_active (GTK_SWITCH (sw), !before);
          g_object_get (engine, options[i].option, &after, NULL);
          g_assert_cmpint (after, ==, !before);
          gtk_switch_set_active (GTK_SWITCH (sw), before);
        }
    }
}

static void
test_option_switches (void)
{
  run_app (switch_steps, NULL);
}

/* The device chooser: "Automatic (…)" first, naming what "auto" picks, then
 * every listed device; choosing an entry sets the engine's device and the
 * setting; a load under "auto" runs where the picker says (the card says so). */
static void
device_steps (HoneApplication *app, HoneWindow *window, gpointer data)
{
  HoneEngine *engine = hone_application_get_engine (app);
  HoneModelPage *page = hone_window_get_model_page (window);
  GSettings *settings = hone_application_get_settings (app);
  AdwComboRow *row = ADW_COMBO_ROW (hone_model_page_get_device_row (page));
  GListModel *names = adw_combo_row_get_model (row);
  g_autoptr (GPtrArray) devices = hone_engine_list_devices ();
  g_autofree char *picked = hone_engine_pick_device ("auto", NULL);
  g_autofree char *first = NULL, *active = NULL, *setting = NULL;
  const char *picked_name = NULL;

  for (guint i = 0; i < devices->len; i++)
    if (g_str_equal (((HoneDevice *) devices->pdata[i])->id, picked))
      picked_name = ((HoneDevice *) devices->pdata[i])->name;
  g_assert_nonnull (picked_name);
  g_assert_cmpuint (g_list_model_get_n_items (names), ==, devices->len + 1);
  first = g_strdup (gtk_string_list_get_string (GTK_STRING_LIST (names), 0));
  g_assert_true (g_str_has_prefix (first, "Automatic ("));
  g_assert_nonnull (strstr (first, picked_name));
  for (guint i = 0; i < devices->len; i++)
    g_assert_cmpstr (gtk_string_list_get_string (GTK_STRING_LIST (names), i + 1), ==,
                     ((HoneDevice *) devices->pdata[i])->name);
  /* the default setting is "auto", shown as the first entry */
  g_assert_cmpstr (hone_engine_get_device (engine), ==, "auto");
  g_assert_cmpuint (adw_combo_row_get_selected (row), ==, 0);

  adw_combo_row_set_selected (row, 1);   /* the CPU */
  g_assert_cmpstr (hone_engine_get_device (engine), ==, "cpu");
  setting = g_settings_get_string (settings, "device");
  g_assert_cmpstr (setting, ==, "cpu");
  g_free (setting);
  adw_combo_row_set_selected (row, 0);
  g_assert_cmpstr (hone_engine_get_device (engine), ==, "auto");
  setting = g_settings_get_string (settings, "device");
  g_assert_cmpstr (setting, ==, "auto");

  load_model (app, window);
  g_object_get (engine, "active-device", &active, NULL);
  g_assert_cmpstr (active, ==, picked);
}

static void
test_device_chooser (void)
{
  run_app (device_steps, NULL);
}

/* The Bench button runs the engine's protocol and fills the table. */
static void
bench_steps (HoneApplication *app, HoneWindow *window, gpointer data)
{
  HonePerformancePage *perf = hone_window_get_performance_page (window);
  const HoneBenchResult *r;

  g_autofree char *cpu = hone_device_bandwidth_cpu_name ();
  HoneDeviceBandwidth bw = { 0 };

  load_model (app, window);
  hone_window_show_page (window, "performance");
  g_assert_null (hone_performance_page_get_last_bench (perf));
  /* This CPU has no measured bandwidth yet (a private cache): the bench
   * measures it first; cancelled then, no bench runs. */
  g_assert_false (hone_device_bandwidth_lookup (cpu, &bw));
  g_assert_true (gtk_widget_activate_action (GTK_WIDGET (perf), "perf.bench", NULL));
  g_assert_true (hone_performance_page_get_bench_running (perf));
  g_assert_true (gtk_widget_activate_action (GTK_WIDGET (perf), "perf.bench-cancel", NULL));
  WAIT_UNTIL (!hone_performance_page_get_bench_running (perf), 120);
  g_assert_null (hone_performance_page_get_last_bench (perf));

  g_assert_true (gtk_widget_activate_action (GTK_WIDGET (perf), "perf.bench", NULL));
  g_assert_true (hone_performance_page_get_bench_running (perf));
  WAIT_UNTIL (!hone_performance_page_get_bench_running (perf), 240);
  r = hone_performance_page_get_last_bench (perf);
  g_assert_nonnull (r);
  g_assert_cmpint (r->runs->len, ==, r->params.runs);
  g_assert_cmpfloat (r->decode_tps.median, >, 0);
  g_assert_cmpfloat (r->ttft_ms.p10, <=, r->ttft_ms.median);
  g_assert_cmpfloat (r->ttft_ms.median, <=, r->ttft_ms.p90);
  /* The roofline is the CPU's bandwidth, measured and cached (as `hone bench` does). */
  g_assert_true (hone_device_bandwidth_lookup (cpu, &bw));
  g_assert_cmpfloat (bw.read_gbs, >, 0.1);
  g_assert_cmpfloat (bw.read_gbs, <, 10000);
  g_assert_cmpfloat (r->params.bandwidth_gbs, ==, bw.read_gbs);
  g_assert_cmpfloat (r->roofline_fraction, >, 0);
  g_assert_cmpfloat_with_epsilon (r->roofline_fraction, r->achieved_gbs / r->params.bandwidth_gbs, 1e-9);
  hone_device_bandwidth_clear (&bw);
}

static void
test_bench (void)
{
  run_app (bench_steps, NULL);
}

static GtkWindow *
find_toplevel (GType type)
{
  GListModel *toplevels = gtk_window_get_toplevels ();   /* transfer none */
  for (guint i = 0; i < g_list_model_get_n_items (toplevels); i++)
    {
      g_autoptr(GObject) w = g_list_model_get_item (toplevels, i);
      if (G_TYPE_CHECK_INSTANCE_TYPE (w, type) && gtk_widget_get_visible (GTK_WIDGET (w)))
        return GTK_WINDOW (w);
    }
  return NULL;
}

/* Preferences, About and the shortcuts window open from their actions (their
 * templates parse; any GTK warning would fail the test) and close again. */
static void
dialogs_steps (HoneApplication *app, HoneWindow *window, gpointer data)
{
  const struct { const char *action; GType (*type) (void); } dialogs[] = {
    { "app.preferences", adw_preferences_window_get_type },
    { "app.about", adw_about_window_get_type },
    { "win.show-help-overlay", gtk_shortcuts_window_get_type },
  };
  GtkWindow *w;

  for (guint i = 0; i < G_N_ELEMENTS (dialogs); i++)
    {
      g_assert_true (gtk_widget_activate_action (GTK_WIDGET (window), dialogs[i].action, NULL));
      WAIT_UNTIL ((w = find_toplevel (dialogs[i].type ())) != NULL, 10);
      spin (100);
      gtk_window_destroy (w);
    }
  /* Page switching shortcuts' action. */
  g_assert_true (gtk_widget_activate_action (GTK_WIDGET (window), "win.show-page", "s", "performance"));
  g_assert_cmpstr (hone_window_get_visible_page (window), ==, "performance");
  g_assert_true (gtk_widget_activate_action (GTK_WIDGET (window), "win.show-page", "s", "chat"));
}

static void
test_dialogs (void)
{
  run_app (dialogs_steps, NULL);
}

static GtkWidget *
find_message_dialog (void)
{
  GListModel *toplevels = gtk_window_get_toplevels ();   /* transfer none */
  for (guint i = 0; i < g_list_model_get_n_items (toplevels); i++)
    {
      g_autoptr(GObject) w = g_list_model_get_item (toplevels, i);
      if (ADW_IS_MESSAGE_DIALOG (w) && gtk_widget_get_visible (GTK_WIDGET (w)))
        return GTK_WIDGET (w);
    }
  return NULL;
}

static void
load_error_steps (HoneApplication *app, HoneWindow *window, gpointer data)
{
  const char *bad_path = data;
  HoneEngine *engine = hone_application_get_engine (app);
  HoneModelPage *page = hone_window_get_model_page (window);
  HoneModelInfo *good_info;
  GtkWidget *dialog;

  load_model (app, window);
  good_info = hone_model_page_get_info (page);
  /* Its card reads (metadata only); loading it fails. */
  hone_window_open_model (window, bad_path);
  WAIT_UNTIL (hone_model_page_get_info (page) != good_info, 20);
  hone_model_page_load (page);
  WAIT_UNTIL ((dialog = find_message_dialog ()) != NULL, 60);
  g_test_message ("dialog: %s", adw_message_dialog_get_body (ADW_MESSAGE_DIALOG (dialog)));
  g_assert_cmpstr (adw_message_dialog_get_body (ADW_MESSAGE_DIALOG (dialog)), !=, "");
  /* The engine keeps the model it had, ready to use, never half-loaded. */
  WAIT_UNTIL (hone_engine_get_state (engine) != HONE_ENGINE_STATE_LOADING, 20);
  g_assert_cmpint (hone_engine_get_state (engine), ==, HONE_ENGINE_STATE_READY);
  g_assert_cmpstr (hone_engine_get_model_path (engine), ==, model_path);
  gtk_window_destroy (GTK_WINDOW (dialog));
}

static char *write_model_missing_tensor (void);

/* A model file dropped on the window opens it on the Model page, through the window's
 * own drop target (the same handler a real drag-and-drop reaches). */
static void
drop_steps (HoneApplication *app, HoneWindow *window, gpointer data)
{
  const char *other_path = data;
  HoneModelPage *page = hone_window_get_model_page (window);
  g_autoptr(GListModel) controllers = gtk_widget_observe_controllers (GTK_WIDGET (window));
  GtkDropTarget *target = NULL;
  GValue value = G_VALUE_INIT;
  gboolean handled = FALSE;

  for (guint i = 0; i < g_list_model_get_n_items (controllers) && target == NULL; i++)
    {
      g_autoptr(GObject) c = g_list_model_get_item (controllers, i);
      if (GTK_IS_DROP_TARGET (c))
        target = GTK_DROP_TARGET (c);
    }
  g_assert_nonnull (target);

  g_value_init (&value, GDK_TYPE_FILE_LIST);
  g_value_take_boxed (&value, g_slist_prepend (NULL, g_file_new_for_path (other_path)));
  g_signal_emit_by_name (target, "drop", &value, 10.0, 10.0, &handled);
  g_value_unset (&value);
  g_assert_true (handled);
  WAIT_UNTIL (hone_model_page_get_info (page) != NULL &&
              g_strcmp0 (hone_model_info_get_path (hone_model_page_get_info (page)), other_path) == 0, 20);
}

static void
test_drop (void)
{
  g_autofree char *other = write_model_missing_tensor ();
  run_app (drop_steps, other);
}

/* The same model without one layer's attention weight: its card reads
 * (metadata only) but the load fails with the engine's error. */
static char *
write_model_missing_tensor (void)
{
  g_autoptr(GError) error = NULL;
  g_autofree char *path = g_build_filename (tmp_home, "missing-tensor.gguf", NULL);
  HoneGguf *gguf = hone_gguf_open (model_path, &error);
  HoneGgufWriter *writer = hone_gguf_writer_new ();

  g_assert_no_error (error);
  hone_gguf_writer_set_alignment (writer, hone_gguf_alignment (gguf));
  for (guint i = 0; i < hone_gguf_n_kv (gguf); i++)
    if (strcmp (hone_gguf_kv_key (gguf, i), "general.alignment") != 0)
      hone_gguf_writer_copy_kv (writer, gguf, i);
  for (guint i = 0; i < hone_gguf_n_tensors (gguf); i++)
    {
      const HoneTensor *t = hone_gguf_tensor (gguf, i);
      if (strcmp (t->name, "blk.1.attn_q.weight") == 0)
        continue;
      g_assert_true (hone_gguf_writer_add_tensor (writer, t->name, t->type, t->n_dims, t->ne,
                                                  t->data, t->nbytes, &error));
    }
  g_assert_true (hone_gguf_writer_write (writer, path, &error));
  g_assert_no_error (error);
  hone_gguf_writer_free (writer);
  hone_gguf_unref (gguf);
  return g_steal_pointer (&path);
}

static void
test_load_error (void)
{
  g_autofree char *bad = write_model_missing_tensor ();
  run_app (load_error_steps, bad);
}

static void
test_store_corrupt (void)
{
  g_autofree char *dir = g_build_filename (tmp_home, "store", NULL);
  g_autoptr(HoneConversationStore) store = hone_conversation_store_new (dir);
  g_autoptr(HoneConversationStore) again = hone_conversation_store_new (dir);
  g_autoptr(HoneConversation) c = hone_conversation_new ();
  g_autoptr(HoneMessage) m = hone_message_new ("user", "ünïcode \"quoted\"\nline");
  g_autoptr(GPtrArray) failures = NULL;
  g_autoptr(GError) error = NULL;
  g_autofree char *bad = g_build_filename (dir, "bad.json", NULL);
  g_autofree char *wrong = g_build_filename (dir, "wrong.json", NULL);
  g_autofree char *hostile = g_build_filename (dir, "hostile.json", NULL);
  HoneConversation *loaded;

  hone_conversation_set_title (c, "Title");
  hone_conversation_append (c, m);
  g_assert_true (hone_conversation_store_save (store, c, &error));
  g_assert_no_error (error);
  g_assert_true (g_file_set_contents (bad, "not json at all", -1, NULL));
  g_assert_true (g_file_set_contents (wrong, "[1, 2, 3]", -1, NULL));
  /* members of the wrong types (objects and arrays where values belong, numbers where strings do): the
   * conversation loads with their defaults and no warning (json-glib's own getters raised criticals,
   * which this test makes fatal, and gave NULL titles) */
  g_assert_true (g_file_set_contents (hostile,
                                      "{\"id\": \"hostile\", \"title\": {}, \"system_prompt\": 5, \"created\": \"x\", "
                                      "\"updated\": [], \"sampling\": {\"temperature\": [], \"top_k\": \"9\", "
                                      "\"seed\": {}, \"top_p\": 0.5}, \"messages\": [{\"role\": \"user\", \"content\": "
                                      "\"hi\", \"state\": [], \"cut\": {}, \"stats\": {\"ttft_ms\": 1e40, \"decode_tps\": 1e400, \"tokens\": [1]}}, {\"role\": \"user\", "
                                      "\"content\": \"x\", \"stats\": {\"ttft_ms\": {}}}]}",
                                      -1, NULL));
  g_assert_cmpuint (hone_conversation_store_load (again, &failures), ==, 2);
  g_assert_cmpuint (failures->len, ==, 2);
  loaded = hone_conversation_store_find (again, "hostile");
  g_assert_nonnull (loaded);
  g_assert_cmpstr (hone_conversation_get_title (loaded), ==, _("Chat"));
  g_assert_cmpstr (hone_conversation_get_system_prompt (loaded), ==, "");
  g_assert_cmpuint (hone_conversation_get_n_messages (loaded), ==, 2);
  g_assert_cmpstr (hone_message_get_content (hone_conversation_get_message (loaded, 0)), ==, "hi");
  {
    double temperature = 0, top_p = 0;
    int top_k = 0;
    gint64 seed = 0;
    g_object_get (loaded, "temperature", &temperature, "top-p", &top_p, "top-k", &top_k, "seed", &seed, NULL);
    g_assert_cmpfloat (temperature, ==, 0.7);
    g_assert_cmpfloat (top_p, ==, 0.5);
    g_assert_cmpint (top_k, ==, 40);
    g_assert_cmpint (seed, ==, -1);
  }
  /* saved again, it still reads (1e400 parses to inf, which json-glib writes as "inf", and 1e40 it writes
   * as "1e+40.0") */
  g_assert_true (hone_conversation_store_save (again, loaded, &error));
  g_assert_no_error (error);
  {
    g_autoptr(HoneConversationStore) third = hone_conversation_store_new (dir);
    g_autoptr(GPtrArray) third_failures = NULL;
    g_assert_cmpuint (hone_conversation_store_load (third, &third_failures), ==, 2);
    g_assert_nonnull (hone_conversation_store_find (third, "hostile"));
  }
  g_assert_true (hone_conversation_store_remove (again, loaded, &error));
  for (guint i = 0; i < failures->len; i++)
    {
      GError *e = g_ptr_array_index (failures, i);
      g_assert_true (strstr (e->message, "bad.json") || strstr (e->message, "wrong.json"));
    }
  loaded = hone_conversation_store_find (again, hone_conversation_get_id (c));
  g_assert_nonnull (loaded);
  g_assert_cmpstr (hone_conversation_get_title (loaded), ==, "Title");
  g_assert_cmpstr (hone_message_get_content (hone_conversation_get_message (loaded, 0)), ==,
                   hone_message_get_content (m));
  g_assert_true (hone_conversation_store_remove (again, loaded, &error));
  g_assert_null (hone_conversation_store_find (again, hone_conversation_get_id (c)));
}

/* Markdown-lite: blocks and inline markup per the CommonMark rules we keep,
 * and whatever the model writes, the markup handed to GtkLabel must parse. */
static void
test_markdown (void)
{
  static const char *tricky[] = {
    "**bold", "*", "a * b * c", "`unclosed", "<script>&amp;", "# ", "```", "``` \n```",
    "**a *b** c*", "- \n-", "\xe4\xb8\xad\xe6\x96\x87 **粗体**", "1 < 2 && 3 > 2", "***", "` `", NULL
  };
  g_autoptr(GPtrArray) blocks = hone_markdown_parse ("Intro with `x<y` and **bold**.\n"
                                                     "```c\nint main (void) { return 0; }\n```\n"
                                                     "- item *one*\n"
                                                     "Tail");
  HoneMarkdownBlock *b;

  g_assert_cmpuint (blocks->len, ==, 3);
  b = g_ptr_array_index (blocks, 0);
  g_assert_cmpint (b->kind, ==, HONE_MARKDOWN_TEXT);
  g_assert_cmpstr (b->text, ==, "Intro with <tt>x&lt;y</tt> and <b>bold</b>.");
  b = g_ptr_array_index (blocks, 1);
  g_assert_cmpint (b->kind, ==, HONE_MARKDOWN_CODE);
  g_assert_cmpstr (b->language, ==, "c");
  g_assert_cmpstr (b->text, ==, "int main (void) { return 0; }");   /* raw, not escaped */
  b = g_ptr_array_index (blocks, 2);
  g_assert_cmpstr (b->text, ==, "• item <i>one</i>\nTail");
  g_ptr_array_unref (g_steal_pointer (&blocks));

  /* A fence still open (the answer is streaming) is code up to the end. */
  blocks = hone_markdown_parse ("Here:\n```python\nprint(1)");
  g_assert_cmpuint (blocks->len, ==, 2);
  b = g_ptr_array_index (blocks, 1);
  g_assert_cmpint (b->kind, ==, HONE_MARKDOWN_CODE);
  g_assert_cmpstr (b->text, ==, "print(1)");

  for (guint i = 0; tricky[i]; i++)
    {
      g_autoptr(GPtrArray) parts = hone_markdown_parse (tricky[i]);
      for (guint j = 0; j < parts->len; j++)
        {
          HoneMarkdownBlock *p = g_ptr_array_index (parts, j);
          g_autoptr(GError) error = NULL;
          if (p->kind == HONE_MARKDOWN_TEXT)
            {
              pango_parse_markup (p->text, -1, 0, NULL, NULL, NULL, &error);
              g_assert_no_error (error);
            }
        }
    }
}

/* A conversation longer than the context keeps going: each answer completes,
 * and the engine reports the earliest messages it left out. */
typedef struct {
  int most_dropped;
  HoneStopReason last_stop;
} PastContext;

static void
count_dropped (HoneChatPage *page, HoneRequestMetrics *m, PastContext *pc)
{
  pc->most_dropped = MAX (pc->most_dropped, m->dropped_messages);
  pc->last_stop = m->stop_reason;
}

static void
past_context_steps (HoneApplication *app, HoneWindow *window, gpointer data)
{
  HoneEngine *engine = hone_application_get_engine (app);
  HoneModelPage *model_page = hone_window_get_model_page (window);
  HoneChatPage *chat = hone_window_get_chat_page (window);
  HoneConversation *c;
  PastContext pc = { 0, HONE_STOP_NONE };
  int n_cut = 0;

  hone_window_open_model (window, model_path);
  WAIT_UNTIL (hone_model_page_get_info (model_page) != NULL, 20);
  hone_engine_set_context_length (engine, 128);   /* the settings' smallest */
  hone_model_page_load (model_page);
  WAIT_UNTIL (hone_engine_get_state (engine) == HONE_ENGINE_STATE_READY, 60);
  g_assert_cmpint (hone_engine_get_active_context_length (engine), ==, 128);
  hone_window_show_page (window, "chat");
  hone_chat_page_new_conversation (chat);
  c = hone_chat_page_get_conversation (chat);
  g_object_set (c, "seed", (gint64) 3, "temperature", 0.0, "max-tokens", 4, NULL);
  g_signal_connect (chat, "request-finished", G_CALLBACK (count_dropped), &pc);
  for (int i = 0; i < 8; i++)
    {
      g_autofree char *text = g_strdup_printf ("Turn %d: where is the fox?", i);
      HoneMessage *answer;
      HoneMessageCut cut;
      int generated;

      pc.last_stop = HONE_STOP_NONE;
      g_assert_true (hone_chat_page_send (chat, text));
      WAIT_UNTIL (!hone_chat_page_get_generating (chat), 60);
      answer = last_message (c);
      g_assert_cmpint (hone_message_get_state (answer), ==, HONE_MESSAGE_DONE);
      /* an answer the 4-token limit or the context cut says so, under the answer and after a save */
      g_assert_cmpint (pc.last_stop, !=, HONE_STOP_NONE);
      cut = hone_message_get_cut (answer);
      hone_message_get_stats (answer, NULL, NULL, &generated, NULL);
      g_assert_cmpint (cut, ==, pc.last_stop == HONE_STOP_MAX_TOKENS    ? HONE_MESSAGE_CUT_LENGTH
                                : pc.last_stop == HONE_STOP_CONTEXT_FULL ? HONE_MESSAGE_CUT_CONTEXT
                                                                         : HONE_MESSAGE_CUT_NONE);
      if (cut == HONE_MESSAGE_CUT_LENGTH)
        {
          g_assert_cmpint (generated, ==, 4);
          WAIT_UNTIL (hone_gui_shows_label (GTK_WIDGET (window), _("Cut off at the Maximum Tokens limit")), 10);
          n_cut++;
        }
      {
        g_autoptr(JsonNode) node = hone_message_to_json (answer);
        g_autoptr(HoneMessage) back = hone_message_new_from_json (node, NULL);
        g_assert_nonnull (back);
        g_assert_cmpint (hone_message_get_cut (back), ==, cut);
      }
    }
  g_signal_handlers_disconnect_by_func (chat, count_dropped, &pc);
  g_test_message ("at most %d earlier messages left out; %d of 8 answers cut at the limit", pc.most_dropped, n_cut);
  /* the app keeps the whole conversation; the model saw its latest turns */
  g_assert_cmpuint (hone_conversation_get_n_messages (c), ==, 16);
  g_assert_cmpint (pc.most_dropped, >, 0);
  g_assert_cmpint (pc.most_dropped % 2, ==, 0);
  /* greedy on the random model runs every answer to the limit */
  g_assert_cmpint (n_cut, >, 0);
  /* a user message is never cut, and a bad "cut" in a saved file is ignored */
  g_assert_cmpint (hone_message_get_cut (hone_conversation_get_message (c, 0)), ==, HONE_MESSAGE_CUT_NONE);
  {
    g_autoptr(JsonNode) node = json_from_string ("{\"role\": \"assistant\", \"content\": \"x\", \"cut\": 7}", NULL);
    g_autoptr(HoneMessage) m = hone_message_new_from_json (node, NULL);
    g_assert_nonnull (m);
    g_assert_cmpint (hone_message_get_cut (m), ==, HONE_MESSAGE_CUT_NONE);
  }
}

static void
test_chat_past_context (void)
{
  run_app (past_context_steps, NULL);
}

int
main (int argc, char *argv[])
{
  HoneTestModelSpec spec;
  g_autoptr(GError) error = NULL;
  g_autofree char *data = NULL, *config = NULL, *cache = NULL;
  int status;

  /* A private HOME before anything asks GLib for the XDG folders. */
  tmp_home = g_dir_make_tmp ("hone-gui-XXXXXX", NULL);
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
  /* Room for a long answer, so Stop has something to interrupt. */
  spec.max_context = 4096;
  model_path = hone_test_model_write_gguf (tmp_home, &spec, &error);
  g_assert_no_error (error);

  g_test_add_func ("/app/markdown", test_markdown);
  g_test_add_func ("/app/store-corrupt", test_store_corrupt);
  g_test_add_func ("/app/chat-stream-stop-restart", test_chat_and_restart);
  g_test_add_func ("/app/option-switches", test_option_switches);
  g_test_add_func ("/app/device-chooser", test_device_chooser);
  g_test_add_func ("/app/load-error", test_load_error);
  g_test_add_func ("/app/drop-model", test_drop);
  g_test_add_func ("/app/dialogs", test_dialogs);
  g_test_add_func ("/app/bench", test_bench);
  g_test_add_func ("/app/chat-past-context", test_chat_past_context);
  status = g_test_run ();
  hone_test_rm_rf (tmp_home);
  g_free (model_path);
  g_free (tmp_home);
  return status;
}
