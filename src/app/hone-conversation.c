/* hone-conversation.c — see hone-conversation.h. */
#include "hone-conversation.h"

#include <math.h>
#include <string.h>

#include "hone-error.h"
#include "hone-i18n.h"
#include "hone-json.h"

struct _HoneConversation {
  GObject parent_instance;
  char *id;
  char *title;
  char *system_prompt;
  double temperature;
  double top_p;
  int top_k;
  int max_tokens;
  gint64 seed;
  gint64 created;
  gint64 updated;
  GListStore *messages;
};

G_DEFINE_FINAL_TYPE (HoneConversation, hone_conversation, G_TYPE_OBJECT)

enum {
  PROP_0, PROP_ID, PROP_TITLE, PROP_SYSTEM_PROMPT, PROP_TEMPERATURE, PROP_TOP_P,
  PROP_TOP_K, PROP_MAX_TOKENS, PROP_SEED, PROP_UPDATED, N_PROPS
};
static GParamSpec *props[N_PROPS];

static void
hone_conversation_finalize (GObject *object)
{
  HoneConversation *self = HONE_CONVERSATION (object);

  g_free (self->id);
  g_free (self->title);
  g_free (self->system_prompt);
  g_object_unref (self->messages);
  G_OBJECT_CLASS (hone_conversation_parent_class)->finalize (object);
}

static void
hone_conversation_get_property (GObject *object, guint prop_id, GValue *value, GParamSpec *pspec)
{
  HoneConversation *self = HONE_CONVERSATION (object);

  switch (prop_id)
    {
    case PROP_ID: g_value_set_string (value, self->id); break;
    case PROP_TITLE: g_value_set_string (value, self->title); break;
    case PROP_SYSTEM_PROMPT: g_value_set_string (value, self->system_prompt); break;
    case PROP_TEMPERATURE: g_value_set_double (value, self->temperature); break;
    case PROP_TOP_P: g_value_set_double (value, self->top_p); break;
    case PROP_TOP_K: g_value_set_int (value, self->top_k); break;
    case PROP_MAX_TOKENS: g_value_set_int (value, self->max_tokens); break;
    case PROP_SEED: g_value_set_int64 (value, self->seed); break;
    case PROP_UPDATED: g_value_set_int64 (value, self->updated); break;
    default: G_OBJECT_WARN_INVALID_PROPERTY_ID (object, prop_id, pspec);
    }
}

static void
hone_conversation_set_property (GObject *object, guint prop_id, const GValue *value, GParamSpec *pspec)
{
  HoneConversation *self = HONE_CONVERSATION (object);

  switch (prop_id)
    {
    case PROP_ID:
      g_free (self->id);
      self->id = g_value_dup_string (value);
      break;
    case PROP_TITLE: hone_conversation_set_title (self, g_value_get_string (value)); break;
    case PROP_SYSTEM_PROMPT: hone_conversation_set_system_prompt (self, g_value_get_string (value)); break;
    case PROP_TEMPERATURE: self->temperature = g_value_get_double (value); break;
    case PROP_TOP_P: self->top_p = g_value_get_double (value); break;
    case PROP_TOP_K: self->top_k = g_value_get_int (value); break;
    case PROP_MAX_TOKENS: self->max_tokens = g_value_get_int (value); break;
    case PROP_SEED: self->seed = g_value_get_int64 (value); break;
    case PROP_UPDATED: self->updated = g_value_get_int64 (value); break;
    default: G_OBJECT_WARN_INVALID_PROPERTY_ID (object, prop_id, pspec);
    }
}

static void
hone_conversation_constructed (GObject *object)
{
  HoneConversation *self = HONE_CONVERSATION (object);

  G_OBJECT_CLASS (hone_conversation_parent_class)->constructed (object);
  if (!self->id)
    self->id = g_uuid_string_random ();
}

static void
hone_conversation_class_init (HoneConversationClass *klass)
{
  GObjectClass *object_class = G_OBJECT_CLASS (klass);
  GParamFlags rw = G_PARAM_READWRITE | G_PARAM_STATIC_STRINGS | G_PARAM_EXPLICIT_NOTIFY;

  object_class->finalize = hone_conversation_finalize;
  object_class->get_property = hone_conversation_get_property;
  object_class->set_property = hone_conversation_set_property;
  object_class->constructed = hone_conversation_constructed;

  props[PROP_ID] = g_param_spec_string ("id", NULL, NULL, NULL,
                                        G_PARAM_READWRITE | G_PARAM_CONSTRUCT_ONLY | G_PARAM_STATIC_STRINGS);
  props[PROP_TITLE] = g_param_spec_string ("title", NULL, NULL, NULL, rw);
  props[PROP_SYSTEM_PROMPT] = g_param_spec_string ("system-prompt", NULL, NULL, NULL, rw);
  props[PROP_TEMPERATURE] = g_param_spec_double ("temperature", NULL, NULL, 0, 2, 0.7,
                                                 G_PARAM_READWRITE | G_PARAM_STATIC_STRINGS);
  props[PROP_TOP_P] = g_param_spec_double ("top-p", NULL, NULL, 0.01, 1, 0.9,
                                           G_PARAM_READWRITE | G_PARAM_STATIC_STRINGS);
  props[PROP_TOP_K] = g_param_spec_int ("top-k", NULL, NULL, 0, 1000, 40,
                                        G_PARAM_READWRITE | G_PARAM_STATIC_STRINGS);
  props[PROP_MAX_TOKENS] = g_param_spec_int ("max-tokens", NULL, NULL, 0, 1 << 20, 512,
                                             G_PARAM_READWRITE | G_PARAM_STATIC_STRINGS);
  props[PROP_SEED] = g_param_spec_int64 ("seed", NULL, NULL, -1, G_MAXINT64, -1,
                                         G_PARAM_READWRITE | G_PARAM_STATIC_STRINGS);
  props[PROP_UPDATED] = g_param_spec_int64 ("updated", NULL, NULL, 0, G_MAXINT64, 0,
                                            G_PARAM_READWRITE | G_PARAM_STATIC_STRINGS);
  g_object_class_install_properties (object_class, N_PROPS, props);
}

static void
hone_conversation_init (HoneConversation *self)
{
  self->messages = g_list_store_new (HONE_TYPE_MESSAGE);
  self->title = g_strdup (_("New Chat"));
  self->system_prompt = g_strdup ("");
  self->temperature = 0.7;
  self->top_p = 0.9;
  self->top_k = 40;
  self->max_tokens = 512;
  self->seed = -1;
  self->created = self->updated = g_get_real_time ();
}

HoneConversation *
hone_conversation_new (void)
{
  return g_object_new (HONE_TYPE_CONVERSATION, NULL);
}

const char *
hone_conversation_get_id (HoneConversation *self)
{
  return self->id;
}

const char *
hone_conversation_get_title (HoneConversation *self)
{
  return self->title;
}

void
hone_conversation_set_title (HoneConversation *self, const char *title)
{
  if (g_strcmp0 (self->title, title) == 0)
    return;
  g_free (self->title);
  self->title = g_strdup (title ? title : "");
  g_object_notify_by_pspec (G_OBJECT (self), props[PROP_TITLE]);
}

const char *
hone_conversation_get_system_prompt (HoneConversation *self)
{
  return self->system_prompt;
}

void
hone_conversation_set_system_prompt (HoneConversation *self, const char *prompt)
{
  if (g_strcmp0 (self->system_prompt, prompt) == 0)
    return;
  g_free (self->system_prompt);
  self->system_prompt = g_strdup (prompt ? prompt : "");
  g_object_notify_by_pspec (G_OBJECT (self), props[PROP_SYSTEM_PROMPT]);
}

gint64
hone_conversation_get_updated (HoneConversation *self)
{
  return self->updated;
}

void
hone_conversation_touch (HoneConversation *self)
{
  self->updated = g_get_real_time ();
  g_object_notify_by_pspec (G_OBJECT (self), props[PROP_UPDATED]);
}

GListModel *
hone_conversation_get_messages (HoneConversation *self)
{
  return G_LIST_MODEL (self->messages);
}

guint
hone_conversation_get_n_messages (HoneConversation *self)
{
  return g_list_model_get_n_items (G_LIST_MODEL (self->messages));
}

HoneMessage *
hone_conversation_get_message (HoneConversation *self, guint i)
{
  HoneMessage *m = g_list_model_get_item (G_LIST_MODEL (self->messages), i);
  if (m)
    g_object_unref (m);   /* the store keeps it alive */
  return m;
}

void
hone_conversation_append (HoneConversation *self, HoneMessage *message)
{
  g_list_store_append (self->messages, message);
}

void
hone_conversation_truncate (HoneConversation *self, guint i)
{
  guint n = hone_conversation_get_n_messages (self);
  if (i < n)
    g_list_store_splice (self->messages, i, n - i, NULL, 0);
}

JsonNode *
hone_conversation_to_chat_json (HoneConversation *self, int end)
{
  g_autoptr(JsonBuilder) b = json_builder_new ();
  guint n = hone_conversation_get_n_messages (self);

  if (end >= 0 && (guint) end < n)
    n = end;
  json_builder_begin_array (b);
  if (self->system_prompt && *self->system_prompt)
    {
      json_builder_begin_object (b);
      json_builder_set_member_name (b, "role");
      json_builder_add_string_value (b, "system");
      json_builder_set_member_name (b, "content");
      json_builder_add_string_value (b, self->system_prompt);
      json_builder_end_object (b);
    }
  for (guint i = 0; i < n; i++)
    {
      HoneMessage *m = hone_conversation_get_message (self, i);
      if (hone_message_get_state (m) == HONE_MESSAGE_FAILED && !*hone_message_get_content (m))
        continue;
      json_builder_begin_object (b);
      json_builder_set_member_name (b, "role");
      json_builder_add_string_value (b, hone_message_get_role (m));
      json_builder_set_member_name (b, "content");
      json_builder_add_string_value (b, hone_message_get_content (m));
      json_builder_end_object (b);
    }
  json_builder_end_array (b);
  return json_builder_get_root (b);
}

/* A sampling value as the file keeps it: to 4 decimals. json-glib 1.6 writes
 * a double such as 1e-300 as "1e-300.0", which is not JSON, so a file holding
 * one could not be read again (found by tests/fuzz/fuzz-conversation); the
 * side panel shows two decimals. */
static double
sampling_value (double v)
{
  return round (v * 1e4) / 1e4;
}

JsonNode *
hone_conversation_to_json (HoneConversation *self)
{
  g_autoptr(JsonBuilder) b = json_builder_new ();
  guint n = hone_conversation_get_n_messages (self);

  json_builder_begin_object (b);
  json_builder_set_member_name (b, "version");
  json_builder_add_int_value (b, 1);
  json_builder_set_member_name (b, "id");
  json_builder_add_string_value (b, self->id);
  json_builder_set_member_name (b, "title");
  json_builder_add_string_value (b, self->title);
  json_builder_set_member_name (b, "created");
  json_builder_add_int_value (b, self->created);
  json_builder_set_member_name (b, "updated");
  json_builder_add_int_value (b, self->updated);
  json_builder_set_member_name (b, "system_prompt");
  json_builder_add_string_value (b, self->system_prompt);
  json_builder_set_member_name (b, "sampling");
  json_builder_begin_object (b);
  json_builder_set_member_name (b, "temperature");
  json_builder_add_double_value (b, sampling_value (self->temperature));
  json_builder_set_member_name (b, "top_p");
  json_builder_add_double_value (b, sampling_value (self->top_p));
  json_builder_set_member_name (b, "top_k");
  json_builder_add_int_value (b, self->top_k);
  json_builder_set_member_name (b, "max_tokens");
  json_builder_add_int_value (b, self->max_tokens);
  json_builder_set_member_name (b, "seed");
  json_builder_add_int_value (b, self->seed);
  json_builder_end_object (b);
  json_builder_set_member_name (b, "messages");
  json_builder_begin_array (b);
  for (guint i = 0; i < n; i++)
    json_builder_add_value (b, hone_message_to_json (hone_conversation_get_message (self, i)));
  json_builder_end_array (b);
  json_builder_end_object (b);
  return json_builder_get_root (b);
}

HoneConversation *
hone_conversation_new_from_json (JsonNode *node, GError **error)
{
  g_autoptr(HoneConversation) self = NULL;
  JsonObject *o, *s;
  JsonArray *messages;
  const char *id;

  if (!node || !JSON_NODE_HOLDS_OBJECT (node))
    {
      g_set_error (error, HONE_ERROR, HONE_ERROR_INVALID_JSON, _("The conversation is not a JSON object"));
      return NULL;
    }
  o = json_node_get_object (node);
  id = hone_json_get_string (o, "id", NULL);
  if (!id || !*id || strchr (id, '/') || id[0] == '.')
    {
      g_set_error (error, HONE_ERROR, HONE_ERROR_INVALID_JSON, _("The conversation has no valid “id”"));
      return NULL;
    }
  messages = hone_json_get_array (o, "messages");
  if (!messages)
    {
      g_set_error (error, HONE_ERROR, HONE_ERROR_INVALID_JSON, _("The conversation has no “messages” array"));
      return NULL;
    }
  self = g_object_new (HONE_TYPE_CONVERSATION, "id", id, NULL);
  hone_conversation_set_title (self, hone_json_get_string (o, "title", _("Chat")));
  hone_conversation_set_system_prompt (self, hone_json_get_string (o, "system_prompt", ""));
  self->created = hone_json_get_int (o, "created", self->created);
  self->updated = hone_json_get_int (o, "updated", self->created);
  s = hone_json_get_object (o, "sampling");
  if (s)
    {
      self->temperature = sampling_value (CLAMP (hone_json_get_double (s, "temperature", 0.7), 0, 2));
      self->top_p = sampling_value (CLAMP (hone_json_get_double (s, "top_p", 0.9), 0.01, 1));
      self->top_k = CLAMP (hone_json_get_int (s, "top_k", 40), 0, 1000);
      self->max_tokens = CLAMP (hone_json_get_int (s, "max_tokens", 512), 0, 1 << 20);
      self->seed = MAX (-1, hone_json_get_int (s, "seed", -1));
    }
  for (guint i = 0; i < json_array_get_length (messages); i++)
    {
      g_autoptr(HoneMessage) m = hone_message_new_from_json (json_array_get_element (messages, i), error);
      if (!m)
        return NULL;
      hone_conversation_append (self, m);
    }
  return g_steal_pointer (&self);
}
