/* hone-jinja-value.c — reference-counted values with Python semantics.
 *
 * Templates are rendered by jinja2 on Python objects, so printing, equality
 * and ordering here follow Python: str() of a float is its shortest
 * round-trip repr ("1e+16", "0.1", "2.0"), lists/dicts print with repr() of
 * their items, 1 == 1.0 == True, list == tuple is False, strings index by
 * code point.  Values are immutable once built except namespaces, as under
 * jinja2's ImmutableSandboxedEnvironment.
 */
#include <inttypes.h>
#include "hone-jinja-private.h"

#include <math.h>
#include <stdlib.h>
#include <stdarg.h>
#include <string.h>

__thread gint64 hj_value_work;

static HjValue *
value_new (HjType type)
{
  HjValue *v = g_new0 (HjValue, 1);
  v->refcount = 1;
  v->type = type;
  return v;
}

/* Atomic: a parsed template's constants are shared by every render, and
 * renders of one template may run on several threads at once. */
HjValue *
hj_ref (HjValue *v)
{
  if (v)
    g_atomic_int_inc (&v->refcount);
  return v;
}

void
hj_unref (HjValue *v)
{
  gsize i;
  if (!v || !g_atomic_int_dec_and_test (&v->refcount))
    return;
  switch (v->type) {
  case HJ_STRING:
    g_free (v->v.str.s);
    break;
  case HJ_LIST:
    for (i = 0; i < v->v.list.n; i++)
      hj_unref (v->v.list.items[i]);
    g_free (v->v.list.items);
    break;
  case HJ_DICT:
  case HJ_NAMESPACE:
    for (i = 0; i < v->v.dict.n; i++) {
      hj_unref (v->v.dict.entries[i].key);
      hj_unref (v->v.dict.entries[i].value);
    }
    g_free (v->v.dict.entries);
    break;
  case HJ_FUNC:
    hj_unref (v->v.func.self);
    break;
  case HJ_LOOP:
    hj_unref (v->v.loop.items);
    break;
  default:
    break;
  }
  g_free (v->undef_hint);
  g_free (v);
}

HjValue *
hj_undefined (const char *hint_fmt, ...)
{
  HjValue *v = value_new (HJ_UNDEFINED);
  if (hint_fmt) {
    va_list ap;
    va_start (ap, hint_fmt);
    v->undef_hint = g_strdup_vprintf (hint_fmt, ap);
    va_end (ap);
  }
  return v;
}

HjValue *hj_none (void) { return value_new (HJ_NONE); }

HjValue *
hj_bool (gboolean b)
{
  HjValue *v = value_new (HJ_BOOL);
  v->v.b = b ? TRUE : FALSE;
  return v;
}

HjValue *
hj_int (gint64 i)
{
  HjValue *v = value_new (HJ_INT);
  v->v.i = i;
  return v;
}

HjValue *
hj_float (double f)
{
  HjValue *v = value_new (HJ_FLOAT);
  v->v.f = f;
  return v;
}

HjValue *
hj_string_take (char *s, gsize len)
{
  HjValue *v = value_new (HJ_STRING);
  gsize i, n = 0;
  v->v.str.s = s;
  v->v.str.len = len;
  for (i = 0; i < len; i++)
    if (((guchar) s[i] & 0xC0) != 0x80)
      n++;
  v->v.str.nchars = n;
  return v;
}

HjValue *
hj_string_new (const char *s, gssize len)
{
  gsize n = len < 0 ? strlen (s) : (gsize) len;
  return hj_string_take (g_strndup (s, n), n);
}

HjValue *
hj_list_new (gsize reserve, gboolean is_tuple)
{
  HjValue *v = value_new (HJ_LIST);
  v->v.list.is_tuple = is_tuple;
  v->v.list.cap = MAX (reserve, 4);
  v->v.list.items = g_new (HjValue *, v->v.list.cap);
  return v;
}

void
hj_list_push (HjValue *list, HjValue *item)
{
  if (list->v.list.n == list->v.list.cap) {
    list->v.list.cap *= 2;
    list->v.list.items = g_renew (HjValue *, list->v.list.items, list->v.list.cap);
  }
  list->v.list.items[list->v.list.n++] = item;
}

HjValue *
hj_dict_new (gboolean is_namespace)
{
  return value_new (is_namespace ? HJ_NAMESPACE : HJ_DICT);
}

static gboolean
key_equal (const HjValue *a, const HjValue *b)
{
  if (a->type == HJ_STRING && b->type == HJ_STRING)
    return a->v.str.len == b->v.str.len && memcmp (a->v.str.s, b->v.str.s, a->v.str.len) == 0;
  return hj_equal (a, b, 0);
}

static gssize
dict_find (const HjValue *dict, const HjValue *key)
{
  gsize i;
  for (i = 0; i < dict->v.dict.n; i++)
    if (key_equal (dict->v.dict.entries[i].key, key))
      return (gssize) i;
  return -1;
}

void
hj_dict_set (HjValue *dict, HjValue *key, HjValue *value)
{
  gssize at = dict_find (dict, key);
  if (at >= 0) {
    /* Python keeps the first key object and replaces the value */
    hj_unref (key);
    hj_unref (dict->v.dict.entries[at].value);
    dict->v.dict.entries[at].value = value;
    return;
  }
  if (dict->v.dict.n == dict->v.dict.cap) {
    dict->v.dict.cap = dict->v.dict.cap ? dict->v.dict.cap * 2 : 4;
    dict->v.dict.entries = g_renew (HjEntry, dict->v.dict.entries, dict->v.dict.cap);
  }
  dict->v.dict.entries[dict->v.dict.n].key = key;
  dict->v.dict.entries[dict->v.dict.n].value = value;
  dict->v.dict.n++;
}

HjValue *
hj_dict_get (HjValue *dict, const HjValue *key)
{
  gssize at = dict_find (dict, key);
  return at >= 0 ? dict->v.dict.entries[at].value : NULL;
}

HjValue *
hj_dict_get_str (HjValue *dict, const char *key)
{
  gsize i, n = strlen (key);
  for (i = 0; i < dict->v.dict.n; i++) {
    const HjValue *k = dict->v.dict.entries[i].key;
    if (k->type == HJ_STRING && k->v.str.len == n && memcmp (k->v.str.s, key, n) == 0)
      return dict->v.dict.entries[i].value;
  }
  return NULL;
}

HjValue *
hj_func_new (HjFuncKind kind, const char *name, HjValue *self, const HjNode *macro)
{
  HjValue *v = value_new (HJ_FUNC);
  v->v.func.kind = kind;
  v->v.func.name = name;
  v->v.func.self = self;
  v->v.func.macro = macro;
  return v;
}

HjValue *
hj_from_json (JsonNode *node, int depth)
{
  if (depth > HJ_MAX_DATA_DEPTH)
    return NULL;
  if (!node)
    return hj_none ();
  switch (json_node_get_node_type (node)) {
  case JSON_NODE_NULL:
    return hj_none ();
  case JSON_NODE_ARRAY: {
    JsonArray *a = json_node_get_array (node);
    guint i, n = json_array_get_length (a);
    HjValue *list = hj_list_new (n, FALSE);
    for (i = 0; i < n; i++) {
      HjValue *item = hj_from_json (json_array_get_element (a, i), depth + 1);
      if (!item) {
        hj_unref (list);
        return NULL;
      }
      hj_list_push (list, item);
    }
    return list;
  }
  case JSON_NODE_OBJECT: {
    JsonObject *o = json_node_get_object (node);
    GList *members = json_object_get_members (o), *l;
    HjValue *dict = hj_dict_new (FALSE);
    for (l = members; l; l = l->next) {
      HjValue *item = hj_from_json (json_object_get_member (o, l->data), depth + 1);
      if (!item) {
        hj_unref (dict);
        g_list_free (members);
        return NULL;
      }
      hj_dict_set (dict, hj_string_new (l->data, -1), item);
    }
    g_list_free (members);
    return dict;
  }
  case JSON_NODE_VALUE:
    switch (json_node_get_value_type (node)) {
    case G_TYPE_BOOLEAN:
      return hj_bool (json_node_get_boolean (node));
    case G_TYPE_INT64:
    case G_TYPE_INT:
      return hj_int (json_node_get_int (node));
    case G_TYPE_DOUBLE:
    case G_TYPE_FLOAT:
      return hj_float (json_node_get_double (node));
    case G_TYPE_STRING: {
      const char *s = json_node_get_string (node);
      if (!s)
        return hj_none ();
      if (!g_utf8_validate (s, -1, NULL)) {
        char *valid = g_utf8_make_valid (s, -1);
        return hj_string_take (valid, strlen (valid));
      }
      return hj_string_new (s, -1);
    }
    default:
      return hj_none ();
    }
  }
  return hj_none ();
}

gboolean
hj_truthy (const HjValue *v)
{
  switch (v->type) {
  case HJ_UNDEFINED:
  case HJ_NONE: return FALSE;
  case HJ_BOOL: return v->v.b;
  case HJ_INT: return v->v.i != 0;
  case HJ_FLOAT: return v->v.f != 0.0;
  case HJ_STRING: return v->v.str.len > 0;
  case HJ_LIST: return v->v.list.n > 0;
  case HJ_DICT: return v->v.dict.n > 0;
  default: return TRUE;
  }
}

const char *
hj_type_name (const HjValue *v)
{
  switch (v->type) {
  case HJ_UNDEFINED: return "Undefined";
  case HJ_NONE: return "NoneType";
  case HJ_BOOL: return "bool";
  case HJ_INT: return "int";
  case HJ_FLOAT: return "float";
  case HJ_STRING: return "str";
  case HJ_LIST: return v->v.list.is_tuple ? "tuple" : "list";
  case HJ_DICT: return "dict";
  case HJ_NAMESPACE: return "Namespace";
  case HJ_FUNC: return "function";
  case HJ_LOOP: return "LoopContext";
  }
  return "object";
}

gboolean
hj_is_number (const HjValue *v)
{
  return v->type == HJ_BOOL || v->type == HJ_INT || v->type == HJ_FLOAT;
}

double
hj_as_double (const HjValue *v)
{
  switch (v->type) {
  case HJ_BOOL: return v->v.b ? 1.0 : 0.0;
  case HJ_INT: return (double) v->v.i;
  case HJ_FLOAT: return v->v.f;
  default: return 0.0;
  }
}

const char *
hj_utf8_offset (const HjValue *str, gsize char_index)
{
  if (str->v.str.nchars == str->v.str.len)
    return str->v.str.s + char_index;
  return g_utf8_offset_to_pointer (str->v.str.s, (glong) char_index);
}

/* Python's float.__repr__: the shortest digits that round-trip, fixed
 * notation for 1e-4 <= |x| < 1e16, otherwise d.ddde±XX. */
void
hj_format_float (GString *buf, double f)
{
  char tmp[64], digits[32];
  int prec, exp10 = 0, nd = 0, decpt, i;
  const char *p;
  if (isnan (f)) {
    g_string_append (buf, "nan");
    return;
  }
  if (isinf (f)) {
    g_string_append (buf, f < 0 ? "-inf" : "inf");
    return;
  }
  for (prec = 1; prec <= 17; prec++) {
    g_snprintf (tmp, sizeof tmp, "%.*e", prec - 1, f);
    if (g_ascii_strtod (tmp, NULL) == f)
      break;
  }
  p = tmp;
  if (*p == '-') {
    g_string_append_c (buf, '-');
    p++;
  }
  for (; *p && *p != 'e'; p++)
    if (g_ascii_isdigit (*p))
      digits[nd++] = *p;
  if (*p == 'e')
    exp10 = atoi (p + 1);
  while (nd > 1 && digits[nd - 1] == '0')
    nd--;
  digits[nd] = 0;
  decpt = exp10 + 1;
  if (decpt <= -4 || decpt > 16) {
    g_string_append_c (buf, digits[0]);
    if (nd > 1) {
      g_string_append_c (buf, '.');
      g_string_append (buf, digits + 1);
    }
    g_string_append_printf (buf, "e%c%02d", exp10 < 0 ? '-' : '+', ABS (exp10));
  } else if (decpt <= 0) {
    g_string_append (buf, "0.");
    for (i = 0; i < -decpt; i++)
      g_string_append_c (buf, '0');
    g_string_append (buf, digits);
  } else if (decpt < nd) {
    g_string_append_len (buf, digits, decpt);
    g_string_append_c (buf, '.');
    g_string_append (buf, digits + decpt);
  } else {
    g_string_append (buf, digits);
    for (i = nd; i < decpt; i++)
      g_string_append_c (buf, '0');
    g_string_append (buf, ".0");
  }
}

static gboolean
printable (gunichar c)
{
  switch (g_unichar_type (c)) {
  case G_UNICODE_CONTROL:
  case G_UNICODE_FORMAT:
  case G_UNICODE_SURROGATE:
  case G_UNICODE_PRIVATE_USE:
  case G_UNICODE_UNASSIGNED:
  case G_UNICODE_LINE_SEPARATOR:
  case G_UNICODE_PARAGRAPH_SEPARATOR:
    return FALSE;
  case G_UNICODE_SPACE_SEPARATOR:
    return c == ' ';
  default:
    return TRUE;
  }
}

void
hj_append_repr_string (GString *buf, const char *s, gsize len)
{
  const char *p, *end = s + len;
  char quote = '\'';
  if (memchr (s, '\'', len) && !memchr (s, '"', len))
    quote = '"';
  g_string_append_c (buf, quote);
  for (p = s; p < end; p = g_utf8_next_char (p)) {
    gunichar c = g_utf8_get_char (p);
    if (c == (gunichar) quote || c == '\\') {
      g_string_append_c (buf, '\\');
      g_string_append_c (buf, (char) c);
    } else if (c == '\t')
      g_string_append (buf, "\\t");
    else if (c == '\n')
      g_string_append (buf, "\\n");
    else if (c == '\r')
      g_string_append (buf, "\\r");
    else if (c < ' ' || c == 0x7f)
      g_string_append_printf (buf, "\\x%02x", c);
    else if (c < 0x80 || printable (c))
      g_string_append_len (buf, p, g_utf8_next_char (p) - p);
    else if (c < 0x100)
      g_string_append_printf (buf, "\\x%02x", c);
    else if (c < 0x10000)
      g_string_append_printf (buf, "\\u%04x", c);
    else
      g_string_append_printf (buf, "\\U%08x", c);
  }
  g_string_append_c (buf, quote);
}

gboolean
hj_append_repr (GString *buf, const HjValue *v, int depth)
{
  gsize i;
  hj_value_work++;
  if (depth > HJ_MAX_DATA_DEPTH || buf->len > HJ_MAX_STRING)
    return FALSE;
  switch (v->type) {
  case HJ_STRING:
    hj_append_repr_string (buf, v->v.str.s, v->v.str.len);
    return TRUE;
  case HJ_UNDEFINED:
    g_string_append (buf, "Undefined");
    return TRUE;
  case HJ_LIST:
    g_string_append_c (buf, v->v.list.is_tuple ? '(' : '[');
    for (i = 0; i < v->v.list.n; i++) {
      if (i)
        g_string_append (buf, ", ");
      if (!hj_append_repr (buf, v->v.list.items[i], depth + 1))
        return FALSE;
    }
    if (v->v.list.is_tuple && v->v.list.n == 1)
      g_string_append_c (buf, ',');
    g_string_append_c (buf, v->v.list.is_tuple ? ')' : ']');
    return TRUE;
  case HJ_DICT:
  case HJ_NAMESPACE:
    if (v->type == HJ_NAMESPACE)
      g_string_append (buf, "<Namespace ");
    g_string_append_c (buf, '{');
    for (i = 0; i < v->v.dict.n; i++) {
      if (i)
        g_string_append (buf, ", ");
      if (!hj_append_repr (buf, v->v.dict.entries[i].key, depth + 1))
        return FALSE;
      g_string_append (buf, ": ");
      if (!hj_append_repr (buf, v->v.dict.entries[i].value, depth + 1))
        return FALSE;
    }
    g_string_append_c (buf, '}');
    if (v->type == HJ_NAMESPACE)
      g_string_append_c (buf, '>');
    return TRUE;
  default:
    return hj_append_str (buf, v, depth);
  }
}

gboolean
hj_append_str (GString *buf, const HjValue *v, int depth)
{
  switch (v->type) {
  case HJ_UNDEFINED:
    return TRUE;
  case HJ_NONE:
    g_string_append (buf, "None");
    return TRUE;
  case HJ_BOOL:
    g_string_append (buf, v->v.b ? "True" : "False");
    return TRUE;
  case HJ_INT: {
    /* hot when printing big lists: avoid printf */
    char tmp[24];
    int k = sizeof tmp;
    guint64 u = v->v.i < 0 ? (guint64) 0 - (guint64) v->v.i : (guint64) v->v.i;
    do
      tmp[--k] = (char) ('0' + u % 10);
    while ((u /= 10) > 0);
    if (v->v.i < 0)
      tmp[--k] = '-';
    g_string_append_len (buf, tmp + k, sizeof tmp - k);
    return TRUE;
  }
  case HJ_FLOAT:
    hj_format_float (buf, v->v.f);
    return TRUE;
  case HJ_STRING:
    g_string_append_len (buf, v->v.str.s, v->v.str.len);
    return TRUE;
  case HJ_FUNC:
    g_string_append_printf (buf, "<function %s>", v->v.func.name ? v->v.func.name : "?");
    return TRUE;
  case HJ_LOOP:
    g_string_append_printf (buf, "<LoopContext %" "zu" "/%" "zu" ">", v->v.loop.index0 + 1,
                            v->v.loop.items->v.list.n);
    return TRUE;
  default:
    return hj_append_repr (buf, v, depth);
  }
}

gboolean
hj_equal (const HjValue *a, const HjValue *b, int depth)
{
  gsize i;
  hj_value_work++;
  if (depth > HJ_MAX_DATA_DEPTH)
    return FALSE;
  if (a == b)
    return TRUE;
  if (hj_is_number (a) && hj_is_number (b)) {
    if (a->type != HJ_FLOAT && b->type != HJ_FLOAT) {
      gint64 x = a->type == HJ_BOOL ? a->v.b : a->v.i, y = b->type == HJ_BOOL ? b->v.b : b->v.i;
      return x == y;
    }
    return hj_as_double (a) == hj_as_double (b);
  }
  if (a->type != b->type)
    return FALSE;
  switch (a->type) {
  case HJ_UNDEFINED:
  case HJ_NONE:
    return TRUE;
  case HJ_STRING:
    return a->v.str.len == b->v.str.len && memcmp (a->v.str.s, b->v.str.s, a->v.str.len) == 0;
  case HJ_LIST:
    if (a->v.list.is_tuple != b->v.list.is_tuple || a->v.list.n != b->v.list.n)
      return FALSE;
    for (i = 0; i < a->v.list.n; i++)
      if (!hj_equal (a->v.list.items[i], b->v.list.items[i], depth + 1))
        return FALSE;
    return TRUE;
  case HJ_DICT:
    if (a->v.dict.n != b->v.dict.n)
      return FALSE;
    for (i = 0; i < a->v.dict.n; i++) {
      HjValue *other = hj_dict_get ((HjValue *) b, a->v.dict.entries[i].key);
      if (!other || !hj_equal (a->v.dict.entries[i].value, other, depth + 1))
        return FALSE;
    }
    return TRUE;
  default:
    return FALSE;  /* identity only */
  }
}

gboolean
hj_compare (const HjValue *a, const HjValue *b, int *result, int depth)
{
  gsize i;
  hj_value_work++;
  if (depth > HJ_MAX_DATA_DEPTH)
    return FALSE;
  if (hj_is_number (a) && hj_is_number (b)) {
    if (a->type != HJ_FLOAT && b->type != HJ_FLOAT) {
      gint64 x = a->type == HJ_BOOL ? a->v.b : a->v.i, y = b->type == HJ_BOOL ? b->v.b : b->v.i;
      *result = x < y ? -1 : x > y ? 1 : 0;
    } else {
      double x = hj_as_double (a), y = hj_as_double (b);
      *result = x < y ? -1 : x > y ? 1 : 0;  /* NaN compares equal-ish: all comparisons false in Python */
      if (isnan (x) || isnan (y))
        *result = 2;
    }
    return TRUE;
  }
  if (a->type == HJ_STRING && b->type == HJ_STRING) {
    int c = memcmp (a->v.str.s, b->v.str.s, MIN (a->v.str.len, b->v.str.len));
    if (c == 0)
      c = a->v.str.len < b->v.str.len ? -1 : a->v.str.len > b->v.str.len ? 1 : 0;
    *result = c < 0 ? -1 : c > 0 ? 1 : 0;
    return TRUE;
  }
  if (a->type == HJ_LIST && b->type == HJ_LIST && a->v.list.is_tuple == b->v.list.is_tuple) {
    for (i = 0; i < a->v.list.n && i < b->v.list.n; i++) {
      if (!hj_equal (a->v.list.items[i], b->v.list.items[i], depth + 1))
        return hj_compare (a->v.list.items[i], b->v.list.items[i], result, depth + 1);
    }
    *result = a->v.list.n < b->v.list.n ? -1 : a->v.list.n > b->v.list.n ? 1 : 0;
    return TRUE;
  }
  return FALSE;
}
