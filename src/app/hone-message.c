/* hone-message.c — see hone-message.h. */
#include "hone-message.h"

#include <math.h>

#include "hone-error.h"
#include "hone-i18n.h"
#include "hone-json.h"

struct _HoneMessage {
  GObject parent_instance;
  char *role;
  GString *content;
  HoneMessageState state;
  HoneMessageCut cut;
  gboolean has_stats;
  double ttft_ms;
  double decode_tps;
  int generated_tokens;
  int prompt_tokens;
};

G_DEFINE_FINAL_TYPE (HoneMessage, hone_message, G_TYPE_OBJECT)

enum { PROP_0, PROP_ROLE, PROP_CONTENT, PROP_STATE, PROP_CUT, PROP_HAS_STATS, N_PROPS };
static GParamSpec *props[N_PROPS];

static void
hone_message_finalize (GObject *object)
{
  HoneMessage *self = HONE_MESSAGE (object);

  g_free (self->role);
  g_string_free (self->content, TRUE);
  G_OBJECT_CLASS (hone_message_parent_class)->finalize (object);
}

static void
hone_message_get_property (GObject *object, guint prop_id, GValue *value, GParamSpec *pspec)
{
  HoneMessage *self = HONE_MESSAGE (object);

  switch (prop_id)
    {
    case PROP_ROLE: g_value_set_string (value, self->role); break;
    case PROP_CONTENT: g_value_set_string (value, self->content->str); break;
    case PROP_STATE: g_value_set_int (value, self->state); break;
    case PROP_CUT: g_value_set_int (value, self->cut); break;
    case PROP_HAS_STATS: g_value_set_boolean (value, self->has_stats); break;
    default: G_OBJECT_WARN_INVALID_PROPERTY_ID (object, prop_id, pspec);
    }
}

static void
hone_message_class_init (HoneMessageClass *klass)
{
  GObjectClass *object_class = G_OBJECT_CLASS (klass);

  object_class->finalize = hone_message_finalize;
  object_class->get_property = hone_message_get_property;
  props[PROP_ROLE] = g_param_spec_string ("role", NULL, NULL, NULL,
                                          G_PARAM_READABLE | G_PARAM_STATIC_STRINGS);
  props[PROP_CONTENT] = g_param_spec_string ("content", NULL, NULL, NULL,
                                             G_PARAM_READABLE | G_PARAM_STATIC_STRINGS);
  props[PROP_STATE] = g_param_spec_int ("state", NULL, NULL, 0, HONE_MESSAGE_FAILED, 0,
                                        G_PARAM_READABLE | G_PARAM_STATIC_STRINGS);
  props[PROP_CUT] = g_param_spec_int ("cut", NULL, NULL, 0, HONE_MESSAGE_CUT_CONTEXT, 0,
                                      G_PARAM_READABLE | G_PARAM_STATIC_STRINGS);
  props[PROP_HAS_STATS] = g_param_spec_boolean ("has-stats", NULL, NULL, FALSE,
                                                G_PARAM_READABLE | G_PARAM_STATIC_STRINGS);
  g_object_class_install_properties (object_class, N_PROPS, props);
}

static void
hone_message_init (HoneMessage *self)
{
  self->content = g_string_new (NULL);
}

HoneMessage *
hone_message_new (const char *role, const char *content)
{
  HoneMessage *self = g_object_new (HONE_TYPE_MESSAGE, NULL);

  self->role = g_strdup (role ? role : "user");
  g_string_assign (self->content, content ? content : "");
  return self;
}

const char *
hone_message_get_role (HoneMessage *self)
{
  return self->role;
}

const char *
hone_message_get_content (HoneMessage *self)
{
  return self->content->str;
}

void
hone_message_set_content (HoneMessage *self, const char *content)
{
  g_string_assign (self->content, content ? content : "");
  g_object_notify_by_pspec (G_OBJECT (self), props[PROP_CONTENT]);
}

void
hone_message_append (HoneMessage *self, const char *piece)
{
  if (!piece || !*piece)
    return;
  g_string_append (self->content, piece);
  g_object_notify_by_pspec (G_OBJECT (self), props[PROP_CONTENT]);
}

HoneMessageState
hone_message_get_state (HoneMessage *self)
{
  return self->state;
}

void
hone_message_set_state (HoneMessage *self, HoneMessageState state)
{
  if (self->state == state)
    return;
  self->state = state;
  g_object_notify_by_pspec (G_OBJECT (self), props[PROP_STATE]);
}

gboolean
hone_message_get_has_stats (HoneMessage *self)
{
  return self->has_stats;
}

void
hone_message_set_stats (HoneMessage *self, double ttft_ms, double decode_tps,
                        int generated_tokens, int prompt_tokens)
{
  self->ttft_ms = ttft_ms;
  self->decode_tps = decode_tps;
  self->generated_tokens = generated_tokens;
  self->prompt_tokens = prompt_tokens;
  self->has_stats = TRUE;
  g_object_notify_by_pspec (G_OBJECT (self), props[PROP_HAS_STATS]);
}

void
hone_message_get_stats (HoneMessage *self, double *ttft_ms, double *decode_tps,
                        int *generated_tokens, int *prompt_tokens)
{
  if (ttft_ms) *ttft_ms = self->ttft_ms;
  if (decode_tps) *decode_tps = self->decode_tps;
  if (generated_tokens) *generated_tokens = self->generated_tokens;
  if (prompt_tokens) *prompt_tokens = self->prompt_tokens;
}

HoneMessageCut
hone_message_get_cut (HoneMessage *self)
{
  return self->cut;
}

void
hone_message_set_cut (HoneMessage *self, HoneMessageCut cut)
{
  if (self->cut == cut)
    return;
  self->cut = cut;
  g_object_notify_by_pspec (G_OBJECT (self), props[PROP_CUT]);
}

static const char *state_names[] = { "done", "streaming", "stopped", "failed" };
static const char *cut_names[] = { "none", "length", "context" };

/* A stat as the file keeps it: finite, 0..1e12. json-glib 1.6 writes inf as
 * "inf" and a double such as 1e40 as "1e+40.0", neither of which is JSON,
 * so a file holding one could not be read again (found by
 * tests/fuzz/fuzz-conversation); no real TTFT or rate comes near 1e12. */
static double
stat_value (double v)
{
  return isfinite (v) && v > 0 ? MIN (v, 1e12) : 0;
}

JsonNode *
hone_message_to_json (HoneMessage *self)
{
  g_autoptr(JsonBuilder) b = json_builder_new ();

  json_builder_begin_object (b);
  json_builder_set_member_name (b, "role");
  json_builder_add_string_value (b, self->role);
  json_builder_set_member_name (b, "content");
  json_builder_add_string_value (b, self->content->str);
  if (self->state != HONE_MESSAGE_DONE)
    {
      /* A message saved while streaming was cut short by the app closing. */
      json_builder_set_member_name (b, "state");
      json_builder_add_string_value (b, self->state == HONE_MESSAGE_STREAMING
                                        ? "stopped" : state_names[self->state]);
    }
  if (self->cut != HONE_MESSAGE_CUT_NONE)
    {
      json_builder_set_member_name (b, "cut");
      json_builder_add_string_value (b, cut_names[self->cut]);
    }
  if (self->has_stats)
    {
      json_builder_set_member_name (b, "stats");
      json_builder_begin_object (b);
      json_builder_set_member_name (b, "ttft_ms");
      json_builder_add_double_value (b, stat_value (self->ttft_ms));
      json_builder_set_member_name (b, "decode_tps");
      json_builder_add_double_value (b, stat_value (self->decode_tps));
      json_builder_set_member_name (b, "tokens");
      json_builder_add_int_value (b, self->generated_tokens);
      json_builder_set_member_name (b, "prompt_tokens");
      json_builder_add_int_value (b, self->prompt_tokens);
      json_builder_end_object (b);
    }
  json_builder_end_object (b);
  return json_builder_get_root (b);
}

HoneMessage *
hone_message_new_from_json (JsonNode *node, GError **error)
{
  JsonObject *o, *s;
  const char *role, *content, *state, *cut;
  HoneMessage *self;

  if (!node || !JSON_NODE_HOLDS_OBJECT (node))
    {
      g_set_error (error, HONE_ERROR, HONE_ERROR_INVALID_JSON, _("A message is not a JSON object"));
      return NULL;
    }
  o = json_node_get_object (node);
  role = hone_json_get_string (o, "role", NULL);
  content = hone_json_get_string (o, "content", NULL);
  if (!role || !content ||
      (g_strcmp0 (role, "user") != 0 && g_strcmp0 (role, "assistant") != 0 &&
       g_strcmp0 (role, "system") != 0))
    {
      g_set_error (error, HONE_ERROR, HONE_ERROR_INVALID_JSON,
                   _("A message lacks a valid “role” or “content”"));
      return NULL;
    }
  self = hone_message_new (role, content);
  state = hone_json_get_string (o, "state", "done");
  for (guint i = 0; i < G_N_ELEMENTS (state_names); i++)
    if (g_strcmp0 (state, state_names[i]) == 0 && i != HONE_MESSAGE_STREAMING)
      self->state = i;
  cut = hone_json_get_string (o, "cut", NULL);
  for (guint i = 0; cut && i < G_N_ELEMENTS (cut_names); i++)
    if (g_strcmp0 (cut, cut_names[i]) == 0)
      self->cut = i;
  s = hone_json_get_object (o, "stats");
  if (s)
    {
      self->has_stats = TRUE;
      self->ttft_ms = stat_value (hone_json_get_double (s, "ttft_ms", 0));
      self->decode_tps = stat_value (hone_json_get_double (s, "decode_tps", 0));
      self->generated_tokens = hone_json_get_int (s, "tokens", 0);
      self->prompt_tokens = hone_json_get_int (s, "prompt_tokens", 0);
    }
  return self;
}
