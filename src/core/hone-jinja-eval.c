/* hone-jinja-eval.c — evaluates a parsed chat template.
 *
 * Semantics are those of jinja2 3.1 under transformers' environment
 * (ImmutableSandboxedEnvironment, default Undefined, loopcontrols): missing
 * attributes give an Undefined that prints "" and is falsy but fails when
 * used further (attribute of it, arithmetic, calling it); list/dict mutators
 * are refused as unsafe; range() is capped at 100000 items.
 *
 * Every evaluation step, every created byte (/16) and list element is
 * charged against HJ_MAX_STEPS, strings and the output are capped at
 * HJ_MAX_STRING and nesting at HJ_MAX_EVAL_DEPTH, so any template finishes
 * in bounded time and memory.  Namespaces are emptied after the render to
 * break reference cycles (`{% set ns.me = ns %}`).
 */
#include <inttypes.h>
#include "hone-jinja-private.h"
#include "hone-error.h"
#include "hone-i18n.h"

#include <math.h>
#include <string.h>
#include <locale.h>
#include <time.h>

typedef struct _Scope Scope;
struct _Scope {
  Scope *parent;
  HjValue *vars;  /* HJ_DICT name → value */
};

struct _HjCtx {
  GString *out;
  gint64 steps;
  int depth;
  GError *error;
  Scope *root;
  GPtrArray *namespaces;
  const HjRenderOptions *opts;
};

typedef enum { EX_OK, EX_ERR, EX_BREAK, EX_CONTINUE } ExecStatus;

typedef struct {
  HjValue **pos;
  guint npos;
  const char **kwnames;
  HjValue **kwvals;
  guint nkw;
} Args;

static HjValue *eval (HjCtx *ctx, Scope *scope, const HjNode *n);
static ExecStatus exec_body (HjCtx *ctx, Scope *scope, const HjNode *body);
static HjValue *call_filter (HjCtx *ctx, const HjNode *at, const char *name, HjValue *input, Args *args);
static int call_test (HjCtx *ctx, const HjNode *at, const char *name, HjValue *value, Args *args);

/* ---- errors and budgets --------------------------------------------------- */

static void rt_error (HjCtx *ctx, const HjNode *at, int code, const char *fmt, ...) G_GNUC_PRINTF (4, 5);

static void
rt_error (HjCtx *ctx, const HjNode *at, int code, const char *fmt, ...)
{
  va_list ap;
  char *msg;
  if (ctx->error)
    return;
  va_start (ap, fmt);
  msg = g_strdup_vprintf (fmt, ap);
  va_end (ap);
  if (at)
    ctx->error = g_error_new (HONE_ERROR, code, _("chat template error at %d:%d: %s"), at->line, at->col, msg);
  else
    ctx->error = g_error_new (HONE_ERROR, code, _("chat template error: %s"), msg);
  g_free (msg);
}

#define RUNTIME(ctx, at, ...) rt_error ((ctx), (at), HONE_ERROR_TEMPLATE_RUNTIME, __VA_ARGS__)
#define LIMIT(ctx, at, ...) rt_error ((ctx), (at), HONE_ERROR_TEMPLATE_LIMIT, __VA_ARGS__)

static gboolean
charge (HjCtx *ctx, const HjNode *at, gint64 units)
{
  ctx->steps += units;
  if (ctx->steps > HJ_MAX_STEPS) {
    LIMIT (ctx, at, "the template exceeded its step budget (%d)", HJ_MAX_STEPS);
    return FALSE;
  }
  return TRUE;
}

static gboolean
check_len (HjCtx *ctx, const HjNode *at, gsize len)
{
  if (len > HJ_MAX_STRING) {
    LIMIT (ctx, at, "a string grew beyond %d bytes", HJ_MAX_STRING);
    return FALSE;
  }
  return charge (ctx, at, (gint64) (len / 16));
}

/* Wraps a GString into a string value after checking its size. */
static HjValue *
make_string (HjCtx *ctx, const HjNode *at, GString *buf)
{
  gsize len = buf->len;
  if (!check_len (ctx, at, len)) {
    g_string_free (buf, TRUE);
    return NULL;
  }
  return hj_string_take (g_string_free (buf, FALSE), len);
}

static HjValue *
undefined_error (HjCtx *ctx, const HjNode *at, const HjValue *u)
{
  RUNTIME (ctx, at, "%s", u->undef_hint ? u->undef_hint : "value is undefined");
  return NULL;
}

static HjValue *
type_error (HjCtx *ctx, const HjNode *at, const char *fmt, const HjValue *v)
{
  RUNTIME (ctx, at, fmt, hj_type_name (v));
  return NULL;
}

/* ---- scopes ---------------------------------------------------------------- */

static Scope *
scope_new (Scope *parent)
{
  Scope *s = g_new0 (Scope, 1);
  s->parent = parent;
  s->vars = hj_dict_new (FALSE);
  return s;
}

static void
scope_free (Scope *s)
{
  hj_unref (s->vars);
  g_free (s);
}

static void
scope_set (Scope *s, const char *name, HjValue *value)
{
  hj_dict_set (s->vars, hj_string_new (name, -1), value);
}

static const char *const global_names[] = {
  "range", "namespace", "dict", "raise_exception", "strftime_now", NULL,
};

static HjValue *
lookup (Scope *s, const char *name)
{
  int i;
  for (; s; s = s->parent) {
    HjValue *v = hj_dict_get_str (s->vars, name);
    if (v)
      return hj_ref (v);
  }
  for (i = 0; global_names[i]; i++)
    if (!strcmp (global_names[i], name))
      return hj_func_new (HJ_FN_GLOBAL, global_names[i], NULL, NULL);
  return hj_undefined ("'%s' is undefined", name);
}

/* ---- iteration -------------------------------------------------------------- */

/* Python iter(): a new list of the items (chars of a string, keys of a dict). */
static HjValue *
to_list (HjCtx *ctx, const HjNode *at, HjValue *v)
{
  HjValue *list;
  gsize i;
  switch (v->type) {
  case HJ_LIST:
    if (!v->v.list.is_tuple)
      return hj_ref (v);
    list = hj_list_new (v->v.list.n, FALSE);
    for (i = 0; i < v->v.list.n; i++)
      hj_list_push (list, hj_ref (v->v.list.items[i]));
    return list;
  case HJ_UNDEFINED:
    return hj_list_new (0, FALSE);
  case HJ_STRING: {
    const char *p = v->v.str.s, *end = p + v->v.str.len;
    if (!charge (ctx, at, (gint64) v->v.str.nchars))
      return NULL;
    list = hj_list_new (v->v.str.nchars, FALSE);
    for (; p < end; p = g_utf8_next_char (p))
      hj_list_push (list, hj_string_new (p, g_utf8_next_char (p) - p));
    return list;
  }
  case HJ_DICT:
    list = hj_list_new (v->v.dict.n, FALSE);
    for (i = 0; i < v->v.dict.n; i++)
      hj_list_push (list, hj_ref (v->v.dict.entries[i].key));
    return list;
  default:
    return type_error (ctx, at, "TypeError: '%s' object is not iterable", v);
  }
}

static HjValue *
str_of (HjCtx *ctx, const HjNode *at, HjValue *v)
{
  GString *buf;
  if (v->type == HJ_STRING)
    return hj_ref (v);
  buf = g_string_new (NULL);
  if (!hj_append_str (buf, v, 0)) {
    g_string_free (buf, TRUE);
    LIMIT (ctx, at, "value too large or too deeply nested to print (limit %d bytes)", HJ_MAX_STRING);
    return NULL;
  }
  return make_string (ctx, at, buf);
}

/* ---- attribute and item access -------------------------------------------- */

static const char *const str_methods[] = {
  "strip", "lstrip", "rstrip", "split", "rsplit", "startswith", "endswith", "upper", "lower", "title",
  "capitalize", "replace", "find", "rfind", "index", "count", "join", "isdigit", "isalpha", "isalnum",
  "isspace", "islower", "isupper", "splitlines", "swapcase", "casefold", NULL,
};
static const char *const dict_methods[] = { "items", "keys", "values", "get", "copy", NULL };
static const char *const dict_unsafe[] = { "clear", "pop", "popitem", "setdefault", "update", NULL };
static const char *const list_methods[] = { "index", "count", "copy", NULL };
static const char *const list_unsafe[] = { "append", "extend", "insert", "pop", "remove", "reverse", "sort", "clear", NULL };

static const char *
find_name (const char *const *table, const char *name)
{
  int i;
  for (i = 0; table[i]; i++)
    if (!strcmp (table[i], name))
      return table[i];
  return NULL;
}

static const char *
object_name (const HjValue *v)
{
  switch (v->type) {
  case HJ_DICT: return "dict object";
  case HJ_LIST: return v->v.list.is_tuple ? "tuple object" : "list object";
  case HJ_STRING: return "str object";
  case HJ_NAMESPACE: return "jinja2.utils.Namespace object";
  case HJ_NONE: return "None";
  default: return hj_type_name (v);
  }
}

/* Python getattr(obj, name) with jinja2's sandbox rules; NULL when absent. */
static HjValue *
python_attr (HjValue *obj, const char *name)
{
  const char *m;
  switch (obj->type) {
  case HJ_DICT:
    if ((m = find_name (dict_methods, name)))
      return hj_func_new (HJ_FN_METHOD, m, hj_ref (obj), NULL);
    if ((m = find_name (dict_unsafe, name)))
      return hj_func_new (HJ_FN_UNSAFE, m, hj_ref (obj), NULL);
    return NULL;
  case HJ_STRING:
    if ((m = find_name (str_methods, name)))
      return hj_func_new (HJ_FN_METHOD, m, hj_ref (obj), NULL);
    return NULL;
  case HJ_LIST:
    if ((m = find_name (list_methods, name)))
      return hj_func_new (HJ_FN_METHOD, m, hj_ref (obj), NULL);
    if (!obj->v.list.is_tuple && (m = find_name (list_unsafe, name)))
      return hj_func_new (HJ_FN_UNSAFE, m, hj_ref (obj), NULL);
    return NULL;
  case HJ_NAMESPACE: {
    HjValue *v = hj_dict_get_str (obj, name);
    return v ? hj_ref (v) : NULL;
  }
  case HJ_LOOP: {
    gsize n = obj->v.loop.items->v.list.n, i = obj->v.loop.index0;
    if (!strcmp (name, "index")) return hj_int ((gint64) i + 1);
    if (!strcmp (name, "index0")) return hj_int ((gint64) i);
    if (!strcmp (name, "revindex")) return hj_int ((gint64) (n - i));
    if (!strcmp (name, "revindex0")) return hj_int ((gint64) (n - i - 1));
    if (!strcmp (name, "first")) return hj_bool (i == 0);
    if (!strcmp (name, "last")) return hj_bool (i + 1 == n);
    if (!strcmp (name, "length")) return hj_int ((gint64) n);
    if (!strcmp (name, "depth")) return hj_int (obj->v.loop.depth);
    if (!strcmp (name, "depth0")) return hj_int (obj->v.loop.depth - 1);
    if (!strcmp (name, "previtem"))
      return i > 0 ? hj_ref (obj->v.loop.items->v.list.items[i - 1]) : hj_undefined ("there is no previous item");
    if (!strcmp (name, "nextitem"))
      return i + 1 < n ? hj_ref (obj->v.loop.items->v.list.items[i + 1]) : hj_undefined ("there is no next item");
    if (!strcmp (name, "cycle"))
      return hj_func_new (HJ_FN_METHOD, "cycle", hj_ref (obj), NULL);
    return NULL;
  }
  default:
    return NULL;
  }
}

static gboolean
index_of (const HjValue *key, gint64 *out)
{
  if (key->type == HJ_INT) {
    *out = key->v.i;
    return TRUE;
  }
  if (key->type == HJ_BOOL) {
    *out = key->v.b;
    return TRUE;
  }
  return FALSE;
}

static gboolean
hashable (const HjValue *v)
{
  gsize i;
  if (v->type == HJ_LIST) {
    if (!v->v.list.is_tuple)
      return FALSE;
    for (i = 0; i < v->v.list.n; i++)
      if (!hashable (v->v.list.items[i]))
        return FALSE;
    return TRUE;
  }
  return v->type != HJ_DICT && v->type != HJ_NAMESPACE;
}

/* obj[key] as jinja2's sandboxed Environment.getitem. */
static HjValue *
get_item (HjCtx *ctx, const HjNode *at, HjValue *obj, HjValue *key)
{
  gint64 i;
  if (obj->type == HJ_UNDEFINED)
    return undefined_error (ctx, at, obj);
  switch (obj->type) {
  case HJ_LIST:
    if (index_of (key, &i)) {
      gint64 n = (gint64) obj->v.list.n;
      if (i < 0)
        i += n;
      if (i >= 0 && i < n)
        return hj_ref (obj->v.list.items[i]);
    }
    break;
  case HJ_STRING:
    if (index_of (key, &i)) {
      gint64 n = (gint64) obj->v.str.nchars;
      if (obj->v.str.nchars != obj->v.str.len && !charge (ctx, at, (gint64) obj->v.str.len / 64))
        return NULL;  /* finding a code point is O(n) in UTF-8 */
      if (i < 0)
        i += n;
      if (i >= 0 && i < n) {
        const char *p = hj_utf8_offset (obj, (gsize) i);
        return hj_string_new (p, g_utf8_next_char (p) - p);
      }
    }
    break;
  case HJ_DICT:
    if (hashable (key)) {
      HjValue *v = hj_dict_get (obj, key);
      if (v)
        return hj_ref (v);
    }
    break;
  default:
    break;
  }
  if (key->type == HJ_STRING) {
    HjValue *attr = python_attr (obj, key->v.str.s);
    if (attr)
      return attr;
    return hj_undefined ("'%s' has no attribute '%s'", object_name (obj), key->v.str.s);
  }
  {
    GString *k = g_string_new (NULL);
    HjValue *u;
    hj_append_repr (k, key, 0);
    u = hj_undefined ("'%s' has no attribute %s", object_name (obj), k->str);
    g_string_free (k, TRUE);
    return u;
  }
}

/* obj.name as jinja2's sandboxed Environment.getattr. */
static HjValue *
get_attr (HjCtx *ctx, const HjNode *at, HjValue *obj, const char *name)
{
  HjValue *v;
  if (obj->type == HJ_UNDEFINED)
    return undefined_error (ctx, at, obj);
  if ((v = python_attr (obj, name)))
    return v;
  if (obj->type == HJ_DICT && (v = hj_dict_get_str (obj, name)))
    return hj_ref (v);
  return hj_undefined ("'%s' has no attribute '%s'", object_name (obj), name);
}

/* Python slice indices. */
static gboolean
slice_indices (HjCtx *ctx, const HjNode *at, HjValue *start, HjValue *stop, HjValue *step, gint64 len,
               gint64 *o_start, gint64 *o_stop, gint64 *o_step, gboolean *type_ok)
{
  gint64 st = 1, a, b;
  *type_ok = TRUE;
  if (step && step->type != HJ_NONE) {
    if (!index_of (step, &st)) {
      *type_ok = FALSE;
      return TRUE;
    }
    if (st == 0) {
      RUNTIME (ctx, at, "ValueError: slice step cannot be zero");
      return FALSE;
    }
  }
  if (start && start->type != HJ_NONE) {
    if (!index_of (start, &a)) {
      *type_ok = FALSE;
      return TRUE;
    }
    if (a < 0)
      a = MAX (a + len, st < 0 ? -1 : 0);
    else
      a = MIN (a, st < 0 ? len - 1 : len);
  } else
    a = st < 0 ? len - 1 : 0;
  if (stop && stop->type != HJ_NONE) {
    if (!index_of (stop, &b)) {
      *type_ok = FALSE;
      return TRUE;
    }
    if (b < 0)
      b = MAX (b + len, st < 0 ? -1 : 0);
    else
      b = MIN (b, st < 0 ? len - 1 : len);
  } else
    b = st < 0 ? -1 : len;
  *o_start = a;
  *o_stop = b;
  *o_step = st;
  return TRUE;
}

static HjValue *
get_slice (HjCtx *ctx, const HjNode *at, HjValue *obj, HjValue *start, HjValue *stop, HjValue *step)
{
  gint64 a, b, st, len, i;
  gboolean ok;
  if (obj->type == HJ_UNDEFINED)
    return undefined_error (ctx, at, obj);
  if (obj->type != HJ_LIST && obj->type != HJ_STRING)
    return hj_undefined ("'%s' object is not subscriptable", hj_type_name (obj));
  len = obj->type == HJ_LIST ? (gint64) obj->v.list.n : (gint64) obj->v.str.nchars;
  if (!slice_indices (ctx, at, start, stop, step, len, &a, &b, &st, &ok))
    return NULL;
  if (!ok)
    return hj_undefined ("slice indices must be integers or None");
  if (obj->type == HJ_LIST) {
    HjValue *out = hj_list_new (0, obj->v.list.is_tuple);
    for (i = a; st > 0 ? i < b : i > b; i += st)
      hj_list_push (out, hj_ref (obj->v.list.items[i]));
    if (!charge (ctx, at, (gint64) out->v.list.n)) {
      hj_unref (out);
      return NULL;
    }
    return out;
  } else {
    GString *buf = g_string_new (NULL);
    if (obj->v.str.nchars == obj->v.str.len && st == 1) {
      if (b > a)
        g_string_append_len (buf, obj->v.str.s + a, b - a);
    } else {
      /* index the code points once */
      const char **starts, *p = obj->v.str.s;
      gint64 k;
      if (!charge (ctx, at, len / 16)) {
        g_string_free (buf, TRUE);
        return NULL;
      }
      starts = g_new (const char *, len + 1);
      for (k = 0; k < len; k++, p = g_utf8_next_char (p))
        starts[k] = p;
      starts[len] = p;
      for (i = a; st > 0 ? i < b : i > b; i += st)
        g_string_append_len (buf, starts[i], starts[i + 1] - starts[i]);
      g_free (starts);
    }
    return make_string (ctx, at, buf);
  }
}

/* ---- string helpers (Python str methods) ---------------------------------- */

static gboolean
char_in_set (gunichar c, const HjValue *chars)
{
  const char *p = chars->v.str.s, *end = p + chars->v.str.len;
  for (; p < end; p = g_utf8_next_char (p))
    if (g_utf8_get_char (p) == c)
      return TRUE;
  return FALSE;
}

/* str.strip/lstrip/rstrip; chars NULL or None → whitespace. */
static HjValue *
py_strip (HjValue *s, const HjValue *chars, gboolean left, gboolean right)
{
  const char *start = s->v.str.s, *end = start + s->v.str.len;
  gboolean ws = !chars || chars->type != HJ_STRING;
  if (left)
    while (start < end) {
      gunichar c = g_utf8_get_char (start);
      if (ws ? !hj_unichar_isspace (c) : !char_in_set (c, chars))
        break;
      start = g_utf8_next_char (start);
    }
  if (right)
    while (end > start) {
      const char *prev = g_utf8_find_prev_char (start, end);
      gunichar c;
      if (!prev)
        break;
      c = g_utf8_get_char (prev);
      if (ws ? !hj_unichar_isspace (c) : !char_in_set (c, chars))
        break;
      end = prev;
    }
  if (start == s->v.str.s && end == s->v.str.s + s->v.str.len)
    return hj_ref (s);
  return hj_string_new (start, end - start);
}

static gboolean
is_cased (gunichar c)
{
  return g_unichar_isupper (c) || g_unichar_islower (c) || g_unichar_istitle (c);
}

static void
append_case (GString *out, gunichar c, int mode)
{
  /* mode 1 upper, 2 lower, 3 title; uses full case mappings via GLib */
  char tmp[8];
  int n = g_unichar_to_utf8 (c, tmp);
  char *conv;
  if (mode == 1)
    conv = g_utf8_strup (tmp, n);
  else if (mode == 2)
    conv = g_utf8_strdown (tmp, n);
  else {
    gunichar t = g_unichar_totitle (c);
    g_string_append_unichar (out, t);
    return;
  }
  g_string_append (out, conv);
  g_free (conv);
}

static HjValue *
py_case (HjCtx *ctx, const HjNode *at, HjValue *s, const char *how)
{
  GString *out = g_string_sized_new (s->v.str.len);
  const char *p = s->v.str.s, *end = p + s->v.str.len;
  if (!strcmp (how, "upper") || !strcmp (how, "lower") || !strcmp (how, "casefold")) {
    char *conv = how[0] == 'u' ? g_utf8_strup (s->v.str.s, s->v.str.len) : g_utf8_strdown (s->v.str.s, s->v.str.len);
    g_string_append (out, conv);
    g_free (conv);
  } else if (!strcmp (how, "title")) {
    gboolean prev_cased = FALSE;
    for (; p < end; p = g_utf8_next_char (p)) {
      gunichar c = g_utf8_get_char (p);
      append_case (out, c, prev_cased ? 2 : 3);
      prev_cased = is_cased (c);
    }
  } else if (!strcmp (how, "capitalize")) {
    for (; p < end; p = g_utf8_next_char (p))
      append_case (out, g_utf8_get_char (p), p == s->v.str.s ? 3 : 2);
  } else if (!strcmp (how, "swapcase")) {
    for (; p < end; p = g_utf8_next_char (p)) {
      gunichar c = g_utf8_get_char (p);
      append_case (out, c, g_unichar_isupper (c) ? 2 : g_unichar_islower (c) ? 1 : 0);
    }
  } else if (!strcmp (how, "jinja-title")) {
    /* jinja2's do_title: split on runs of [-\s({\[<] and upper(first) + lower(rest) */
    gboolean at_start = TRUE;
    for (; p < end; p = g_utf8_next_char (p)) {
      gunichar c = g_utf8_get_char (p);
      gboolean sep = hj_unichar_isspace (c) || c == '-' || c == '(' || c == '{' || c == '[' || c == '<';
      if (sep) {
        g_string_append_unichar (out, c);
        at_start = TRUE;
      } else {
        append_case (out, c, at_start ? 1 : 2);
        at_start = FALSE;
      }
    }
  }
  return make_string (ctx, at, out);
}

/* str.replace(old, new, count) */
static HjValue *
py_replace (HjCtx *ctx, const HjNode *at, HjValue *s, HjValue *old, HjValue *new_, gint64 count)
{
  GString *out = g_string_new (NULL);
  const char *p = s->v.str.s, *end = p + s->v.str.len;
  gint64 done = 0;
  if (old->v.str.len == 0) {
    /* inserts `new` before every char and at the end */
    for (;;) {
      if (count < 0 || done < count) {
        g_string_append_len (out, new_->v.str.s, new_->v.str.len);
        done++;
      }
      if (p >= end)
        break;
      g_string_append_len (out, p, g_utf8_next_char (p) - p);
      p = g_utf8_next_char (p);
      if (out->len > HJ_MAX_STRING)
        break;
    }
    return make_string (ctx, at, out);
  }
  while (p < end) {
    const char *hit = (count < 0 || done < count) ? memmem (p, end - p, old->v.str.s, old->v.str.len) : NULL;
    if (!hit)
      break;
    g_string_append_len (out, p, hit - p);
    g_string_append_len (out, new_->v.str.s, new_->v.str.len);
    p = hit + old->v.str.len;
    done++;
    if (out->len > HJ_MAX_STRING)
      break;
  }
  g_string_append_len (out, p, end - p);
  return make_string (ctx, at, out);
}

static HjValue *
py_split (HjCtx *ctx, const HjNode *at, HjValue *s, HjValue *sep, gint64 maxsplit)
{
  HjValue *list = hj_list_new (0, FALSE);
  const char *p = s->v.str.s, *end = p + s->v.str.len;
  gint64 splits = 0;
  if (!sep || sep->type == HJ_NONE) {
    for (;;) {
      const char *w;
      while (p < end && hj_unichar_isspace (g_utf8_get_char (p)))
        p = g_utf8_next_char (p);
      if (p >= end)
        break;
      if (maxsplit >= 0 && splits >= maxsplit) {
        const char *e = end;
        /* the remainder keeps inner whitespace but not trailing whitespace */
        while (e > p) {
          const char *prev = g_utf8_find_prev_char (p, e);
          if (!prev || !hj_unichar_isspace (g_utf8_get_char (prev)))
            break;
          e = prev;
        }
        hj_list_push (list, hj_string_new (p, e - p));
        break;
      }
      w = p;
      while (p < end && !hj_unichar_isspace (g_utf8_get_char (p)))
        p = g_utf8_next_char (p);
      hj_list_push (list, hj_string_new (w, p - w));
      splits++;
    }
  } else {
    if (sep->type != HJ_STRING) {
      hj_unref (list);
      return type_error (ctx, at, "TypeError: must be str or None, not %s", sep);
    }
    if (sep->v.str.len == 0) {
      hj_unref (list);
      RUNTIME (ctx, at, "ValueError: empty separator");
      return NULL;
    }
    for (;;) {
      const char *hit = (maxsplit < 0 || splits < maxsplit) ? memmem (p, end - p, sep->v.str.s, sep->v.str.len) : NULL;
      if (!hit) {
        hj_list_push (list, hj_string_new (p, end - p));
        break;
      }
      hj_list_push (list, hj_string_new (p, hit - p));
      p = hit + sep->v.str.len;
      splits++;
    }
  }
  if (!charge (ctx, at, (gint64) list->v.list.n + (gint64) s->v.str.len / 16)) {
    hj_unref (list);
    return NULL;
  }
  return list;
}

static gboolean
str_has_prefix_at (const HjValue *s, const HjValue *prefix, gboolean suffix)
{
  if (prefix->v.str.len > s->v.str.len)
    return FALSE;
  if (suffix)
    return memcmp (s->v.str.s + s->v.str.len - prefix->v.str.len, prefix->v.str.s, prefix->v.str.len) == 0;
  return memcmp (s->v.str.s, prefix->v.str.s, prefix->v.str.len) == 0;
}

/* char index of a byte pointer */
static gint64
char_index (const HjValue *s, const char *p)
{
  if (s->v.str.nchars == s->v.str.len)
    return p - s->v.str.s;
  return g_utf8_pointer_to_offset (s->v.str.s, p);
}

static gboolean
str_all (const HjValue *s, gboolean (*pred) (gunichar))
{
  const char *p = s->v.str.s, *end = p + s->v.str.len;
  if (s->v.str.len == 0)
    return FALSE;
  for (; p < end; p = g_utf8_next_char (p))
    if (!pred (g_utf8_get_char (p)))
      return FALSE;
  return TRUE;
}

static gboolean is_digit_u (gunichar c) { return g_unichar_isdigit (c); }
static gboolean is_alpha_u (gunichar c) { return g_unichar_isalpha (c); }
static gboolean is_alnum_u (gunichar c) { return g_unichar_isalnum (c); }

static gboolean
str_case_test (const HjValue *s, gboolean want_lower)
{
  /* Python islower(): all cased chars lower and at least one cased */
  const char *p = s->v.str.s, *end = p + s->v.str.len;
  gboolean any = FALSE;
  for (; p < end; p = g_utf8_next_char (p)) {
    gunichar c = g_utf8_get_char (p);
    if (want_lower ? (g_unichar_isupper (c) || g_unichar_istitle (c)) : (g_unichar_islower (c) || g_unichar_istitle (c)))
      return FALSE;
    if (is_cased (c))
      any = TRUE;
  }
  return any;
}

/* ---- argument binding ----------------------------------------------------- */

static HjValue *
arg (Args *a, guint index, const char *name)
{
  guint i;
  if (index < a->npos)
    return a->pos[index];
  if (name)
    for (i = 0; i < a->nkw; i++)
      if (!strcmp (a->kwnames[i], name))
        return a->kwvals[i];
  return NULL;
}

static gboolean
arg_int (HjCtx *ctx, const HjNode *at, HjValue *v, gint64 *out)
{
  if (v->type == HJ_INT || v->type == HJ_BOOL) {
    *out = v->type == HJ_INT ? v->v.i : v->v.b;
    return TRUE;
  }
  type_error (ctx, at, "TypeError: '%s' object cannot be interpreted as an integer", v);
  return FALSE;
}

static void
args_free (Args *a)
{
  guint i;
  for (i = 0; i < a->npos; i++)
    hj_unref (a->pos[i]);
  for (i = 0; i < a->nkw; i++)
    hj_unref (a->kwvals[i]);
  g_free (a->pos);
  g_free (a->kwvals);
  g_free (a->kwnames);
}

static gboolean
eval_args (HjCtx *ctx, Scope *scope, const HjNode *n, Args *a)
{
  guint i;
  memset (a, 0, sizeof *a);
  a->npos = n->items ? n->items->len : 0;
  a->nkw = n->names ? n->names->len : 0;
  a->pos = g_new0 (HjValue *, a->npos + 1);
  a->kwvals = g_new0 (HjValue *, a->nkw + 1);
  a->kwnames = g_new0 (const char *, a->nkw + 1);
  for (i = 0; i < a->npos; i++)
    if (!(a->pos[i] = eval (ctx, scope, g_ptr_array_index (n->items, i))))
      return FALSE;
  for (i = 0; i < a->nkw; i++) {
    a->kwnames[i] = g_ptr_array_index (n->names, i);
    if (!(a->kwvals[i] = eval (ctx, scope, g_ptr_array_index (n->items2, i))))
      return FALSE;
  }
  return TRUE;
}

/* ---- JSON output (transformers' tojson = json.dumps) ---------------------- */

typedef struct {
  const char *indent;      /* NULL: single line */
  const char *item_sep;
  const char *key_sep;
  gboolean sort_keys;
  gboolean ensure_ascii;
} JsonStyle;

static void
json_string (GString *out, const char *s, gsize len, gboolean ensure_ascii)
{
  const char *p = s, *end = s + len;
  g_string_append_c (out, '"');
  for (; p < end; p = g_utf8_next_char (p)) {
    gunichar c = g_utf8_get_char (p);
    switch (c) {
    case '"': g_string_append (out, "\\\""); break;
    case '\\': g_string_append (out, "\\\\"); break;
    case '\n': g_string_append (out, "\\n"); break;
    case '\r': g_string_append (out, "\\r"); break;
    case '\t': g_string_append (out, "\\t"); break;
    case '\b': g_string_append (out, "\\b"); break;
    case '\f': g_string_append (out, "\\f"); break;
    default:
      if (c < 0x20)
        g_string_append_printf (out, "\\u%04x", c);
      else if (c >= 0x80 && ensure_ascii) {
        if (c >= 0x10000) {
          gunichar v = c - 0x10000;
          g_string_append_printf (out, "\\u%04x\\u%04x", 0xD800 + (v >> 10), 0xDC00 + (v & 0x3FF));
        } else
          g_string_append_printf (out, "\\u%04x", c);
      } else
        g_string_append_len (out, p, g_utf8_next_char (p) - p);
    }
  }
  g_string_append_c (out, '"');
}

static void
json_float (GString *out, double f)
{
  if (isnan (f))
    g_string_append (out, "NaN");
  else if (isinf (f))
    g_string_append (out, f < 0 ? "-Infinity" : "Infinity");
  else
    hj_format_float (out, f);
}

static void
json_newline (GString *out, const JsonStyle *st, int level)
{
  int i;
  g_string_append_c (out, '\n');
  for (i = 0; i < level; i++)
    g_string_append (out, st->indent);
}

static int
compare_entries (gconstpointer pa, gconstpointer pb, gpointer data)
{
  const HjEntry *a = *(const HjEntry *const *) pa, *b = *(const HjEntry *const *) pb;
  int r = 0;
  if (!hj_compare (a->key, b->key, &r, 0))
    *(gboolean *) data = FALSE;
  return r;
}

static gboolean
json_dump (HjCtx *ctx, const HjNode *at, GString *out, const HjValue *v, const JsonStyle *st, int level)
{
  gsize i;
  if (level > HJ_MAX_DATA_DEPTH) {
    LIMIT (ctx, at, "value nests too deeply for tojson");
    return FALSE;
  }
  if (out->len > HJ_MAX_STRING) {
    LIMIT (ctx, at, "tojson output grew beyond %d bytes", HJ_MAX_STRING);
    return FALSE;
  }
  switch (v->type) {
  case HJ_NONE: g_string_append (out, "null"); return TRUE;
  case HJ_BOOL: g_string_append (out, v->v.b ? "true" : "false"); return TRUE;
  case HJ_INT: g_string_append_printf (out, "%" PRId64, v->v.i); return TRUE;
  case HJ_FLOAT: json_float (out, v->v.f); return TRUE;
  case HJ_STRING: json_string (out, v->v.str.s, v->v.str.len, st->ensure_ascii); return TRUE;
  case HJ_LIST:
    if (v->v.list.n == 0) {
      g_string_append (out, "[]");
      return TRUE;
    }
    g_string_append_c (out, '[');
    for (i = 0; i < v->v.list.n; i++) {
      if (i)
        g_string_append (out, st->item_sep);
      if (st->indent)
        json_newline (out, st, level + 1);
      if (!json_dump (ctx, at, out, v->v.list.items[i], st, level + 1))
        return FALSE;
    }
    if (st->indent)
      json_newline (out, st, level);
    g_string_append_c (out, ']');
    return TRUE;
  case HJ_DICT: {
    GPtrArray *entries;
    gboolean ok = TRUE;
    if (v->v.dict.n == 0) {
      g_string_append (out, "{}");
      return TRUE;
    }
    entries = g_ptr_array_new ();
    for (i = 0; i < v->v.dict.n; i++)
      g_ptr_array_add (entries, &v->v.dict.entries[i]);
    if (st->sort_keys) {
      g_ptr_array_sort_with_data (entries, compare_entries, &ok);
      if (!ok) {
        g_ptr_array_free (entries, TRUE);
        RUNTIME (ctx, at, "TypeError: keys of different types cannot be sorted");
        return FALSE;
      }
    }
    g_string_append_c (out, '{');
    for (i = 0; i < entries->len; i++) {
      const HjEntry *e = g_ptr_array_index (entries, i);
      const HjValue *k = e->key;
      if (i)
        g_string_append (out, st->item_sep);
      if (st->indent)
        json_newline (out, st, level + 1);
      if (k->type == HJ_STRING)
        json_string (out, k->v.str.s, k->v.str.len, st->ensure_ascii);
      else if (k->type == HJ_INT || k->type == HJ_BOOL || k->type == HJ_NONE || k->type == HJ_FLOAT) {
        GString *tmp = g_string_new (NULL);
        if (k->type == HJ_FLOAT)
          json_float (tmp, k->v.f);
        else if (k->type == HJ_INT)
          g_string_append_printf (tmp, "%" PRId64, k->v.i);
        else
          g_string_append (tmp, k->type == HJ_NONE ? "null" : k->v.b ? "true" : "false");
        json_string (out, tmp->str, tmp->len, FALSE);
        g_string_free (tmp, TRUE);
      } else {
        g_ptr_array_free (entries, TRUE);
        type_error (ctx, at, "TypeError: keys must be str, int, float, bool or None, not %s", k);
        return FALSE;
      }
      g_string_append (out, st->key_sep);
      if (!json_dump (ctx, at, out, e->value, st, level + 1)) {
        g_ptr_array_free (entries, TRUE);
        return FALSE;
      }
    }
    g_ptr_array_free (entries, TRUE);
    if (st->indent)
      json_newline (out, st, level);
    g_string_append_c (out, '}');
    return TRUE;
  }
  default:
    type_error (ctx, at, "TypeError: Object of type %s is not JSON serializable", v);
    return FALSE;
  }
}

static HjValue *
filter_tojson (HjCtx *ctx, const HjNode *at, HjValue *value, Args *a)
{
  /* tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False) */
  HjValue *ensure = arg (a, 0, "ensure_ascii"), *indent = arg (a, 1, "indent"), *seps = arg (a, 2, "separators"),
          *sort = arg (a, 3, "sort_keys");
  JsonStyle st = { NULL, ", ", ": ", FALSE, FALSE };
  char *indent_str = NULL;
  GString *out;
  gboolean ok;
  if (ensure)
    st.ensure_ascii = hj_truthy (ensure);
  if (sort)
    st.sort_keys = hj_truthy (sort);
  if (indent && indent->type != HJ_NONE) {
    if (indent->type == HJ_STRING)
      indent_str = g_strdup (indent->v.str.s);
    else if (indent->type == HJ_INT || indent->type == HJ_BOOL) {
      gint64 k = indent->type == HJ_INT ? indent->v.i : indent->v.b;
      if (k > 1024) {
        LIMIT (ctx, at, "tojson indent too large");
        return NULL;
      }
      indent_str = g_strnfill (k > 0 ? (gsize) k : 0, ' ');
    } else
      return type_error (ctx, at, "TypeError: indent must be int or str, not %s", indent);
    st.indent = indent_str;
    st.item_sep = ",";
  }
  if (seps && seps->type != HJ_NONE) {
    if (seps->type != HJ_LIST || seps->v.list.n != 2 || seps->v.list.items[0]->type != HJ_STRING ||
        seps->v.list.items[1]->type != HJ_STRING) {
      g_free (indent_str);
      RUNTIME (ctx, at, "TypeError: separators must be a pair of strings");
      return NULL;
    }
    st.item_sep = seps->v.list.items[0]->v.str.s;
    st.key_sep = seps->v.list.items[1]->v.str.s;
  }
  out = g_string_new (NULL);
  ok = json_dump (ctx, at, out, value, &st, 0);
  g_free (indent_str);
  if (!ok) {
    g_string_free (out, TRUE);
    return NULL;
  }
  return make_string (ctx, at, out);
}

/* ---- attribute getter used by map/selectattr/sort/… ----------------------- */

static HjValue *
attr_path (HjCtx *ctx, const HjNode *at, HjValue *item, HjValue *attribute, HjValue *dflt)
{
  HjValue *cur = hj_ref (item);
  if (attribute->type == HJ_INT) {
    HjValue *next = get_item (ctx, at, cur, attribute);
    hj_unref (cur);
    return next;
  }
  if (attribute->type == HJ_STRING) {
    /* str.split('.'): "" gives [""] (g_strsplit would give no parts) */
    char **parts = attribute->v.str.len ? g_strsplit (attribute->v.str.s, ".", -1) : g_strsplit (".", ".", 1);
    int i;
    for (i = 0; parts[i]; i++) {
      HjValue *key, *next;
      const char *q = parts[i];
      gboolean digits = *q != 0;
      for (; *q; q++)
        if (!g_ascii_isdigit (*q))
          digits = FALSE;
      key = digits ? hj_int (g_ascii_strtoll (parts[i], NULL, 10)) : hj_string_new (parts[i], -1);
      next = get_item (ctx, at, cur, key);
      hj_unref (key);
      hj_unref (cur);
      if (!next) {
        g_strfreev (parts);
        return NULL;
      }
      cur = next;
      if (dflt && cur->type == HJ_UNDEFINED) {
        hj_unref (cur);
        cur = hj_ref (dflt);
      }
    }
    g_strfreev (parts);
    return cur;
  }
  hj_unref (cur);
  return type_error (ctx, at, "TypeError: attribute must be a string or int, not %s", attribute);
}

static HjValue *
ignore_case (HjCtx *ctx, const HjNode *at, HjValue *v)
{
  if (v->type == HJ_STRING) {
    char *low = g_utf8_strdown (v->v.str.s, v->v.str.len);
    HjValue *r = hj_string_take (low, strlen (low));
    hj_unref (v);
    return r;
  }
  return v;
}

typedef struct {
  HjValue *key;
  HjValue *item;
  gsize index;
} SortItem;

typedef struct {
  gboolean ok;
  gboolean reverse;
} SortState;

static int
sort_cmp (gconstpointer pa, gconstpointer pb, gpointer data)
{
  const SortItem *a = pa, *b = pb;
  SortState *st = data;
  int r = 0;
  if (!hj_compare (a->key, b->key, &r, 0))
    st->ok = FALSE;
  if (r == 2)
    r = 0;
  if (st->reverse)
    r = -r;
  if (r == 0)
    r = a->index < b->index ? -1 : a->index > b->index ? 1 : 0;  /* stable */
  return r;
}

/* sorted(items, key=attr/ignore_case, reverse) */
static HjValue *
sort_list (HjCtx *ctx, const HjNode *at, HjValue *list, HjValue *attribute, gboolean case_sensitive, gboolean reverse,
           int pair_pos)
{
  gsize n = list->v.list.n, i;
  SortItem *items = g_new0 (SortItem, n + 1);
  SortState st = { TRUE, reverse };
  HjValue *out = NULL;
  if (!charge (ctx, at, (gint64) n * 4))
    goto done;
  for (i = 0; i < n; i++) {
    HjValue *key;
    items[i].item = list->v.list.items[i];
    items[i].index = i;
    if (pair_pos >= 0)
      key = hj_ref (items[i].item->v.list.items[pair_pos]);
    else if (attribute)
      key = attr_path (ctx, at, items[i].item, attribute, NULL);
    else
      key = hj_ref (items[i].item);
    if (!key)
      goto done;
    if (!case_sensitive)
      key = ignore_case (ctx, at, key);
    items[i].key = key;
  }
  g_qsort_with_data (items, (gint) n, sizeof (SortItem), sort_cmp, &st);
  if (!st.ok) {
    RUNTIME (ctx, at, "TypeError: '<' not supported between these values");
    goto done;
  }
  out = hj_list_new (n, FALSE);
  for (i = 0; i < n; i++)
    hj_list_push (out, hj_ref (items[i].item));
done:
  for (i = 0; i < n; i++)
    hj_clear (&items[i].key);
  g_free (items);
  return out;
}

/* ---- filters -------------------------------------------------------------- */

static const char *const filter_names[] = {
  "trim", "length", "count", "tojson", "string", "lower", "upper", "title", "capitalize", "replace", "first",
  "last", "join", "default", "d", "list", "items", "selectattr", "rejectattr", "select", "reject", "map", "int",
  "float", "abs", "round", "safe", "indent", "wordcount", "unique", "reverse", "sort", "dictsort", "batch",
  "sum", "min", "max", "escape", "e", "attr", "center", "forceescape", NULL,
};

static const char *const test_names[] = {
  "defined", "undefined", "none", "string", "number", "integer", "float", "mapping", "iterable", "sequence",
  "boolean", "true", "false", "equalto", "eq", "==", "ne", "!=", "lt", "<", "le", "<=", "gt", ">", "ge", ">=",
  "lessthan", "greaterthan", "odd", "even", "divisibleby", "in", "callable", "sameas", "lower", "upper",
  "escaped", "filter", "test", NULL,
};

gboolean
hj_filter_known (const char *name)
{
  return find_name (filter_names, name) != NULL;
}

gboolean
hj_test_known (const char *name)
{
  return find_name (test_names, name) != NULL;
}

static HjValue *
py_int_from_string (const HjValue *s, gint64 base, gboolean *ok)
{
  /* int(str, base): whitespace, sign, digits with single underscores */
  const char *p = s->v.str.s, *end = p + s->v.str.len;
  gboolean neg = FALSE, any = FALSE, last_us = FALSE;
  guint64 v = 0;
  *ok = FALSE;
  while (p < end && hj_unichar_isspace ((guchar) *p))
    p++;
  while (end > p && hj_unichar_isspace ((guchar) end[-1]))
    end--;
  if (p < end && (*p == '+' || *p == '-'))
    neg = *p++ == '-';
  if (base == 16 && end - p > 2 && p[0] == '0' && (p[1] == 'x' || p[1] == 'X'))
    p += 2;
  for (; p < end; p++) {
    int d;
    if (*p == '_' && any && !last_us) {
      last_us = TRUE;
      continue;
    }
    d = g_ascii_digit_value (*p);
    if (d < 0 && g_ascii_isalpha (*p))
      d = g_ascii_tolower (*p) - 'a' + 10;
    if (d < 0 || d >= base)
      return NULL;
    if (v > (G_MAXUINT64 - d) / (guint64) base)
      return NULL;
    v = v * base + d;
    any = TRUE;
    last_us = FALSE;
  }
  if (!any || last_us || v > (guint64) G_MAXINT64)
    return NULL;
  *ok = TRUE;
  return hj_int (neg ? -(gint64) v : (gint64) v);
}

static gboolean
py_float_from_string (const HjValue *s, double *out)
{
  char *clean, *endp;
  const char *p = s->v.str.s, *end = p + s->v.str.len;
  gsize i, j = 0;
  while (p < end && hj_unichar_isspace ((guchar) *p))
    p++;
  while (end > p && hj_unichar_isspace ((guchar) end[-1]))
    end--;
  if (p == end)
    return FALSE;
  clean = g_malloc (end - p + 1);
  for (i = 0; i < (gsize) (end - p); i++) {
    if (p[i] == '_') {
      if (i == 0 || i + 1 == (gsize) (end - p) || !g_ascii_isdigit (p[i - 1]) || !g_ascii_isdigit (p[i + 1])) {
        g_free (clean);
        return FALSE;
      }
      continue;
    }
    if (p[i] == 'x' || p[i] == 'X' || p[i] == 'p' || p[i] == 'P') {  /* no hex floats in Python's float() */
      g_free (clean);
      return FALSE;
    }
    clean[j++] = p[i];
  }
  clean[j] = 0;
  *out = g_ascii_strtod (clean, &endp);
  if (*endp != 0 || endp == clean) {
    g_free (clean);
    return FALSE;
  }
  g_free (clean);
  return TRUE;
}

static HjValue *
list_of (HjCtx *ctx, const HjNode *at, HjValue *v)
{
  return to_list (ctx, at, v);
}

static HjValue *
filter_select (HjCtx *ctx, const HjNode *at, HjValue *value, Args *a, gboolean by_attr, gboolean keep)
{
  /* jinja2's select_or_reject starts with `if seq:` */
  HjValue *list = hj_truthy (value) ? list_of (ctx, at, value) : hj_list_new (0, FALSE), *out;
  HjValue *attribute = NULL, *test = NULL;
  Args rest = { 0 };
  guint off = 0, i;
  if (!list)
    return NULL;
  if (by_attr) {
    if (a->npos < 1) {
      hj_unref (list);
      RUNTIME (ctx, at, "Missing parameter for attribute name");
      return NULL;
    }
    attribute = a->pos[0];
    off = 1;
  }
  if (a->npos > off) {
    test = a->pos[off];
    if (test->type != HJ_STRING) {
      hj_unref (list);
      RUNTIME (ctx, at, "test name must be a string");
      return NULL;
    }
    rest.pos = a->pos + off + 1;
    rest.npos = a->npos - off - 1;
    rest.kwnames = a->kwnames;
    rest.kwvals = a->kwvals;
    rest.nkw = a->nkw;
  }
  out = hj_list_new (0, FALSE);
  for (i = 0; i < list->v.list.n; i++) {
    HjValue *item = list->v.list.items[i], *subject;
    int r;
    if (!charge (ctx, at, 1))
      goto fail;
    subject = attribute ? attr_path (ctx, at, item, attribute, NULL) : hj_ref (item);
    if (!subject)
      goto fail;
    if (test)
      r = call_test (ctx, at, test->v.str.s, subject, &rest);
    else
      r = hj_truthy (subject);
    hj_unref (subject);
    if (r < 0)
      goto fail;
    if ((r != 0) == keep)
      hj_list_push (out, hj_ref (item));
  }
  hj_unref (list);
  return out;

fail:
  hj_unref (list);
  hj_unref (out);
  return NULL;
}

static HjValue *
filter_map (HjCtx *ctx, const HjNode *at, HjValue *value, Args *a)
{
  /* jinja2's do_map starts with `if value:` */
  HjValue *list = hj_truthy (value) ? list_of (ctx, at, value) : hj_list_new (0, FALSE), *out;
  HjValue *attribute = a->npos == 0 ? arg (a, 99, "attribute") : NULL, *dflt = NULL, *fname = NULL;
  Args rest = { 0 };
  guint i;
  if (!list)
    return NULL;
  if (attribute)
    dflt = arg (a, 99, "default");
  else {
    if (a->npos < 1 || a->pos[0]->type != HJ_STRING) {
      hj_unref (list);
      RUNTIME (ctx, at, "map requires a filter argument");
      return NULL;
    }
    fname = a->pos[0];
    rest.pos = a->pos + 1;
    rest.npos = a->npos - 1;
    rest.kwnames = a->kwnames;
    rest.kwvals = a->kwvals;
    rest.nkw = a->nkw;
  }
  out = hj_list_new (list->v.list.n, FALSE);
  for (i = 0; i < list->v.list.n; i++) {
    HjValue *r;
    if (!charge (ctx, at, 1))
      goto fail;
    if (attribute)
      r = attr_path (ctx, at, list->v.list.items[i], attribute, dflt);
    else
      r = call_filter (ctx, at, fname->v.str.s, list->v.list.items[i], &rest);
    if (!r)
      goto fail;
    hj_list_push (out, r);
  }
  hj_unref (list);
  return out;

fail:
  hj_unref (list);
  hj_unref (out);
  return NULL;
}

static HjValue *
filter_indent (HjCtx *ctx, const HjNode *at, HjValue *s, Args *a)
{
  HjValue *width = arg (a, 0, "width"), *first = arg (a, 1, "first"), *blank = arg (a, 2, "blank");
  GString *ind = g_string_new (NULL), *out = g_string_new (NULL), *text;
  GPtrArray *lines = g_ptr_array_new_with_free_func (g_free);
  const char *p, *end, *line;
  guint i;
  if (!width)
    g_string_append (ind, "    ");
  else if (width->type == HJ_STRING)
    g_string_append_len (ind, width->v.str.s, width->v.str.len);
  else {
    gint64 w;
    if (!arg_int (ctx, at, width, &w) || w > 4096) {
      if (!ctx->error)
        LIMIT (ctx, at, "indent width too large");
      g_string_free (ind, TRUE);
      g_string_free (out, TRUE);
      g_ptr_array_free (lines, TRUE);
      return NULL;
    }
    for (; w > 0; w--)
      g_string_append_c (ind, ' ');
  }
  text = g_string_new_len (s->v.str.s, s->v.str.len);
  g_string_append_c (text, '\n');
  /* str.splitlines() */
  p = line = text->str;
  end = text->str + text->len;
  while (p < end) {
    gunichar c = g_utf8_get_char (p);
    const char *next = g_utf8_next_char (p);
    if (c == '\n' || c == '\r' || c == '\v' || c == '\f' || (c >= 0x1c && c <= 0x1e) || c == 0x85 || c == 0x2028 ||
        c == 0x2029) {
      g_ptr_array_add (lines, g_strndup (line, p - line));
      if (c == '\r' && next < end && *next == '\n')
        next++;
      line = next;
    }
    p = next;
  }
  if (line < end)
    g_ptr_array_add (lines, g_strndup (line, end - line));
  if (blank && hj_truthy (blank)) {
    for (i = 0; i < lines->len; i++) {
      if (i) {
        g_string_append_c (out, '\n');
        g_string_append (out, ind->str);
      }
      g_string_append (out, g_ptr_array_index (lines, i));
    }
  } else {
    for (i = 0; i < lines->len; i++) {
      const char *l = g_ptr_array_index (lines, i);
      if (i) {
        g_string_append_c (out, '\n');
        if (*l)
          g_string_append (out, ind->str);
      }
      g_string_append (out, l);
    }
  }
  if (first && hj_truthy (first))
    g_string_prepend (out, ind->str);
  g_string_free (ind, TRUE);
  g_string_free (text, TRUE);
  g_ptr_array_free (lines, TRUE);
  return make_string (ctx, at, out);
}

static HjValue *
filter_round (HjCtx *ctx, const HjNode *at, HjValue *v, Args *a)
{
  HjValue *prec_v = arg (a, 0, "precision"), *method = arg (a, 1, "method");
  gint64 prec = 0;
  const char *m = "common";
  double x, scale;
  if (prec_v && !arg_int (ctx, at, prec_v, &prec))
    return NULL;
  if (method) {
    if (method->type != HJ_STRING || (strcmp (method->v.str.s, "common") && strcmp (method->v.str.s, "ceil") &&
                                      strcmp (method->v.str.s, "floor"))) {
      RUNTIME (ctx, at, "method must be common, ceil or floor");
      return NULL;
    }
    m = method->v.str.s;
  }
  if (!hj_is_number (v))
    return type_error (ctx, at, "TypeError: type %s doesn't define __round__ method", v);
  if (prec < -308 || prec > 308) {
    RUNTIME (ctx, at, "OverflowError: precision out of range");
    return NULL;
  }
  if (!strcmp (m, "common")) {
    if (v->type != HJ_FLOAT && prec >= 0)
      return hj_int (v->type == HJ_INT ? v->v.i : v->v.b);
    x = hj_as_double (v);
    if (prec == 0)
      return hj_float (nearbyint (x));
    {
      /* Python rounds the exact binary value half-to-even at `prec` decimals; so does printf */
      char buf[512];
      if (prec > 0) {
        g_snprintf (buf, sizeof buf, "%.*f", (int) MIN (prec, 340), x);
        return hj_float (g_ascii_strtod (buf, NULL));
      }
      scale = pow (10.0, (double) -prec);
      return hj_float (nearbyint (x / scale) * scale);
    }
  }
  scale = pow (10.0, (double) prec);
  x = hj_as_double (v) * scale;
  x = !strcmp (m, "ceil") ? ceil (x) : floor (x);
  return hj_float (x / scale);
}

static gboolean
is_word_char (gunichar c)
{
  return c == '_' || g_unichar_isalnum (c) || g_unichar_ismark (c);
}

typedef struct {
  const char *name;
  const char *params[5];  /* parameter names after the value, in order; NULL-terminated */
} Signature;

static const Signature filter_signatures[] = {
  { "trim", { "chars" } }, { "length", { NULL } }, { "count", { NULL } },
  { "tojson", { "ensure_ascii", "indent", "separators", "sort_keys" } }, { "string", { NULL } },
  { "safe", { NULL } }, { "lower", { NULL } }, { "upper", { NULL } }, { "title", { NULL } },
  { "capitalize", { NULL } }, { "replace", { "old", "new", "count" } }, { "first", { NULL } },
  { "last", { NULL } }, { "join", { "d", "attribute" } }, { "default", { "default_value", "boolean" } },
  { "d", { "default_value", "boolean" } }, { "list", { NULL } }, { "items", { NULL } },
  { "int", { "default", "base" } }, { "float", { "default" } }, { "abs", { NULL } },
  { "round", { "precision", "method" } }, { "indent", { "width", "first", "blank" } },
  { "wordcount", { NULL } }, { "unique", { "case_sensitive", "attribute" } }, { "reverse", { NULL } },
  { "sort", { "reverse", "case_sensitive", "attribute" } }, { "dictsort", { "case_sensitive", "by", "reverse" } },
  { "batch", { "linecount", "fill_with" } }, { "sum", { "attribute", "start" } },
  { "min", { "case_sensitive", "attribute" } }, { "max", { "case_sensitive", "attribute" } },
  { "escape", { NULL } }, { "e", { NULL } }, { "forceescape", { NULL } }, { "attr", { "name" } },
  { "center", { "width" } },
};

static const Signature test_signatures[] = {
  { "divisibleby", { "num" } }, { "sameas", { "other" } }, { "in", { "seq" } }, { "equalto", { "_" } },
  { "eq", { "_" } }, { "==", { "_" } }, { "ne", { "_" } }, { "!=", { "_" } }, { "lt", { "_" } }, { "<", { "_" } },
  { "le", { "_" } }, { "<=", { "_" } }, { "gt", { "_" } }, { ">", { "_" } }, { "ge", { "_" } }, { ">=", { "_" } },
  { "lessthan", { "_" } }, { "greaterthan", { "_" } },
};

/* Python's argument binding errors for a known signature. */
static gboolean
check_args (HjCtx *ctx, const HjNode *at, const Signature *table, gsize n, const char *name, Args *a, gboolean is_test)
{
  const Signature *sig = NULL;
  guint nparams = 0, i, j;
  for (i = 0; i < n; i++)
    if (!strcmp (table[i].name, name))
      sig = &table[i];
  if (!sig) {
    if (!is_test)
      return TRUE;  /* select, map and friends take any arguments and bind them themselves */
    nparams = 0;
  } else
    while (nparams < G_N_ELEMENTS (sig->params) && sig->params[nparams])
      nparams++;
  if (a->npos > nparams) {
    RUNTIME (ctx, at, "TypeError: %s() takes %u positional argument(s) but %u were given", name, nparams + 1,
             a->npos + 1);
    return FALSE;
  }
  for (j = 0; j < a->nkw; j++) {
    gboolean ok = FALSE;
    for (i = 0; i < nparams; i++)
      if (!strcmp (a->kwnames[j], sig->params[i])) {
        if (i < a->npos) {
          RUNTIME (ctx, at, "TypeError: %s() got multiple values for argument '%s'", name, a->kwnames[j]);
          return FALSE;
        }
        ok = TRUE;
      }
    if (!ok) {
      RUNTIME (ctx, at, "TypeError: %s() got an unexpected keyword argument '%s'", name, a->kwnames[j]);
      return FALSE;
    }
  }
  return TRUE;
}

static HjValue *
call_filter (HjCtx *ctx, const HjNode *at, const char *name, HjValue *value, Args *a)
{
  HjValue *s = NULL, *r = NULL;
  gint64 size = value->type == HJ_STRING ? (gint64) value->v.str.len / 64 : value->type == HJ_LIST ? (gint64) value->v.list.n / 8 : 0;
  if (!charge (ctx, at, 1 + size) || !check_args (ctx, at, filter_signatures, G_N_ELEMENTS (filter_signatures), name, a, FALSE))
    return NULL;
#define NEED_STR() G_STMT_START { if (!(s = str_of (ctx, at, value))) return NULL; } G_STMT_END
  if (!strcmp (name, "trim")) {
    NEED_STR ();
    r = py_strip (s, arg (a, 0, "chars"), TRUE, TRUE);
  } else if (!strcmp (name, "length") || !strcmp (name, "count")) {
    switch (value->type) {
    case HJ_STRING: return hj_int ((gint64) value->v.str.nchars);
    case HJ_LIST: return hj_int ((gint64) value->v.list.n);
    case HJ_DICT: return hj_int ((gint64) value->v.dict.n);
    case HJ_UNDEFINED: return hj_int (0);
    default: return type_error (ctx, at, "TypeError: object of type '%s' has no len()", value);
    }
  } else if (!strcmp (name, "tojson"))
    return filter_tojson (ctx, at, value, a);
  else if (!strcmp (name, "string") || !strcmp (name, "safe"))
    return str_of (ctx, at, value);
  else if (!strcmp (name, "lower") || !strcmp (name, "upper") || !strcmp (name, "capitalize")) {
    NEED_STR ();
    r = py_case (ctx, at, s, name);
  } else if (!strcmp (name, "title")) {
    NEED_STR ();
    r = py_case (ctx, at, s, "jinja-title");
  } else if (!strcmp (name, "replace")) {
    HjValue *old = arg (a, 0, "old"), *new_ = arg (a, 1, "new"), *cnt = arg (a, 2, "count");
    gint64 count = -1;
    HjValue *olds, *news;
    if (!old || !new_) {
      RUNTIME (ctx, at, "replace() needs old and new");
      return NULL;
    }
    if (cnt && cnt->type != HJ_NONE && !arg_int (ctx, at, cnt, &count))
      return NULL;
    NEED_STR ();
    olds = str_of (ctx, at, old);
    news = olds ? str_of (ctx, at, new_) : NULL;
    if (news)
      r = py_replace (ctx, at, s, olds, news, count);
    hj_clear (&olds);
    hj_clear (&news);
  } else if (!strcmp (name, "first") || !strcmp (name, "last")) {
    HjValue *list;
    if (value->type == HJ_STRING) {
      if (value->v.str.nchars == 0)
        return hj_undefined ("No %s item, sequence was empty.", name);
      {
        const char *p = name[0] == 'f' ? value->v.str.s
                                       : g_utf8_find_prev_char (value->v.str.s, value->v.str.s + value->v.str.len);
        return hj_string_new (p, g_utf8_next_char (p) - p);
      }
    }
    if (!(list = to_list (ctx, at, value)))
      return NULL;
    if (list->v.list.n == 0)
      r = hj_undefined ("No %s item, sequence was empty.", name);
    else
      r = hj_ref (list->v.list.items[name[0] == 'f' ? 0 : list->v.list.n - 1]);
    hj_unref (list);
    return r;
  } else if (!strcmp (name, "join")) {
    HjValue *d = arg (a, 0, "d"), *attribute = arg (a, 1, "attribute"), *list, *dsep;
    GString *out;
    gsize i;
    if (!(list = to_list (ctx, at, value)))
      return NULL;
    dsep = d ? str_of (ctx, at, d) : hj_string_new ("", 0);
    if (!dsep) {
      hj_unref (list);
      return NULL;
    }
    out = g_string_new (NULL);
    for (i = 0; i < list->v.list.n; i++) {
      HjValue *item = list->v.list.items[i];
      if (i)
        g_string_append_len (out, dsep->v.str.s, dsep->v.str.len);
      if (attribute) {
        HjValue *x = attr_path (ctx, at, item, attribute, NULL);
        gboolean ok = x && hj_append_str (out, x, 0);
        hj_clear (&x);
        if (!ok)
          break;
      } else if (!hj_append_str (out, item, 0))
        break;
      if (out->len > HJ_MAX_STRING)
        break;
    }
    hj_unref (list);
    hj_unref (dsep);
    if (ctx->error) {
      g_string_free (out, TRUE);
      return NULL;
    }
    return make_string (ctx, at, out);
  } else if (!strcmp (name, "default") || !strcmp (name, "d")) {
    HjValue *dflt = arg (a, 0, "default_value"), *boolean = arg (a, 1, "boolean");
    if (value->type == HJ_UNDEFINED || (boolean && hj_truthy (boolean) && !hj_truthy (value)))
      return dflt ? hj_ref (dflt) : hj_string_new ("", 0);
    return hj_ref (value);
  } else if (!strcmp (name, "list")) {
    HjValue *list = to_list (ctx, at, value), *copy;
    gsize i;
    if (!list || list != value)
      return list;
    copy = hj_list_new (list->v.list.n, FALSE);
    for (i = 0; i < list->v.list.n; i++)
      hj_list_push (copy, hj_ref (list->v.list.items[i]));
    hj_unref (list);
    return copy;
  } else if (!strcmp (name, "items")) {
    HjValue *out;
    gsize i;
    if (value->type == HJ_UNDEFINED)
      return hj_list_new (0, FALSE);
    if (value->type != HJ_DICT) {
      RUNTIME (ctx, at, "TypeError: Can only get item pairs from a mapping.");
      return NULL;
    }
    out = hj_list_new (value->v.dict.n, FALSE);
    for (i = 0; i < value->v.dict.n; i++) {
      HjValue *pair = hj_list_new (2, TRUE);
      hj_list_push (pair, hj_ref (value->v.dict.entries[i].key));
      hj_list_push (pair, hj_ref (value->v.dict.entries[i].value));
      hj_list_push (out, pair);
    }
    return out;
  } else if (!strcmp (name, "selectattr"))
    return filter_select (ctx, at, value, a, TRUE, TRUE);
  else if (!strcmp (name, "rejectattr"))
    return filter_select (ctx, at, value, a, TRUE, FALSE);
  else if (!strcmp (name, "select"))
    return filter_select (ctx, at, value, a, FALSE, TRUE);
  else if (!strcmp (name, "reject"))
    return filter_select (ctx, at, value, a, FALSE, FALSE);
  else if (!strcmp (name, "map"))
    return filter_map (ctx, at, value, a);
  else if (!strcmp (name, "int")) {
    HjValue *dflt = arg (a, 0, "default"), *base_v = arg (a, 1, "base");
    gint64 base = 10;
    gboolean ok;
    double f;
    if (base_v && !arg_int (ctx, at, base_v, &base))
      return NULL;
    if (value->type == HJ_UNDEFINED)  /* Undefined.__int__ raises */
      return undefined_error (ctx, at, value);
    if (value->type == HJ_INT)
      return hj_ref (value);
    if (value->type == HJ_BOOL)
      return hj_int (value->v.b);
    if (value->type == HJ_STRING) {
      if (base >= 2 && base <= 36 && (r = py_int_from_string (value, base, &ok)) && ok)
        return r;
      if (py_float_from_string (value, &f) && !isnan (f) && !isinf (f) && fabs (f) < 9.2e18)
        return hj_int ((gint64) f);
    } else if (value->type == HJ_FLOAT && !isnan (value->v.f) && !isinf (value->v.f) && fabs (value->v.f) < 9.2e18)
      return hj_int ((gint64) value->v.f);
    return dflt ? hj_ref (dflt) : hj_int (0);
  } else if (!strcmp (name, "float")) {
    HjValue *dflt = arg (a, 0, "default");
    double f;
    if (value->type == HJ_UNDEFINED)  /* Undefined.__float__ raises */
      return undefined_error (ctx, at, value);
    if (hj_is_number (value))
      return hj_float (hj_as_double (value));
    if (value->type == HJ_STRING && py_float_from_string (value, &f))
      return hj_float (f);
    return dflt ? hj_ref (dflt) : hj_float (0.0);
  } else if (!strcmp (name, "abs")) {
    if (value->type == HJ_INT)
      return value->v.i == G_MININT64 ? (LIMIT (ctx, at, "integer overflow"), NULL) : hj_int (ABS (value->v.i));
    if (value->type == HJ_BOOL)
      return hj_int (value->v.b);
    if (value->type == HJ_FLOAT)
      return hj_float (fabs (value->v.f));
    return type_error (ctx, at, "TypeError: bad operand type for abs(): '%s'", value);
  } else if (!strcmp (name, "round"))
    return filter_round (ctx, at, value, a);
  else if (!strcmp (name, "indent")) {
    if (value->type == HJ_UNDEFINED)  /* do_indent appends "\n" to it */
      return undefined_error (ctx, at, value);
    NEED_STR ();
    r = filter_indent (ctx, at, s, a);
  } else if (!strcmp (name, "wordcount")) {
    const char *p, *end;
    gint64 words = 0;
    gboolean in_word = FALSE;
    NEED_STR ();
    for (p = s->v.str.s, end = p + s->v.str.len; p < end; p = g_utf8_next_char (p)) {
      gboolean w = is_word_char (g_utf8_get_char (p));
      if (w && !in_word)
        words++;
      in_word = w;
    }
    r = hj_int (words);
  } else if (!strcmp (name, "unique")) {
    HjValue *cs = arg (a, 0, "case_sensitive"), *attribute = arg (a, 1, "attribute"), *list, *seen, *out;
    gsize i;
    if (!(list = to_list (ctx, at, value)))
      return NULL;
    seen = hj_list_new (0, FALSE);
    out = hj_list_new (0, FALSE);
    for (i = 0; i < list->v.list.n; i++) {
      HjValue *key = attribute ? attr_path (ctx, at, list->v.list.items[i], attribute, NULL)
                               : hj_ref (list->v.list.items[i]);
      gsize j;
      gboolean dup = FALSE;
      if (!key || !charge (ctx, at, (gint64) seen->v.list.n / 8 + 1)) {
        hj_clear (&key);
        hj_unref (seen);
        hj_unref (out);
        hj_unref (list);
        return NULL;
      }
      if (!(cs && hj_truthy (cs)))
        key = ignore_case (ctx, at, key);
      for (j = 0; j < seen->v.list.n && !dup; j++)
        dup = hj_equal (seen->v.list.items[j], key, 0);
      if (dup)
        hj_unref (key);
      else {
        hj_list_push (seen, key);
        hj_list_push (out, hj_ref (list->v.list.items[i]));
      }
    }
    hj_unref (seen);
    hj_unref (list);
    return out;
  } else if (!strcmp (name, "reverse")) {
    if (value->type == HJ_STRING) {
      GString *out = g_string_sized_new (value->v.str.len);
      const char *p = value->v.str.s + value->v.str.len;
      while (p > value->v.str.s) {
        const char *prev = g_utf8_find_prev_char (value->v.str.s, p);
        g_string_append_len (out, prev, p - prev);
        p = prev;
      }
      return make_string (ctx, at, out);
    } else {
      HjValue *list = to_list (ctx, at, value), *out;
      gsize i;
      if (!list)
        return NULL;
      out = hj_list_new (list->v.list.n, FALSE);
      for (i = list->v.list.n; i > 0; i--)
        hj_list_push (out, hj_ref (list->v.list.items[i - 1]));
      hj_unref (list);
      return out;
    }
  } else if (!strcmp (name, "sort")) {
    HjValue *rev = arg (a, 0, "reverse"), *cs = arg (a, 1, "case_sensitive"), *attribute = arg (a, 2, "attribute");
    HjValue *list = to_list (ctx, at, value);
    if (!list)
      return NULL;
    r = sort_list (ctx, at, list, attribute, cs && hj_truthy (cs), rev && hj_truthy (rev), -1);
    hj_unref (list);
    return r;
  } else if (!strcmp (name, "dictsort")) {
    HjValue *cs = arg (a, 0, "case_sensitive"), *by = arg (a, 1, "by"), *rev = arg (a, 2, "reverse"), *items;
    int pos = 0;
    if (value->type != HJ_DICT)
      return type_error (ctx, at, "TypeError: dictsort needs a mapping, not '%s'", value);
    if (by && by->type == HJ_STRING && !strcmp (by->v.str.s, "value"))
      pos = 1;
    else if (by && !(by->type == HJ_STRING && !strcmp (by->v.str.s, "key"))) {
      RUNTIME (ctx, at, "You can only sort by either \"key\" or \"value\"");
      return NULL;
    }
    {
      Args none = { 0 };
      items = call_filter (ctx, at, "items", value, &none);
    }
    if (!items)
      return NULL;
    r = sort_list (ctx, at, items, NULL, cs && hj_truthy (cs), rev && hj_truthy (rev), pos);
    hj_unref (items);
    return r;
  } else if (!strcmp (name, "batch")) {
    HjValue *lc = arg (a, 0, "linecount"), *fill = arg (a, 1, "fill_with"), *list, *out, *cur = NULL;
    gint64 count = 0;   /* set by arg_int(); initialized for -Wmaybe-uninitialized */
    gsize i;
    if (!lc || !arg_int (ctx, at, lc, &count))
      return ctx->error ? NULL : (RUNTIME (ctx, at, "batch needs a line count"), NULL);
    if (count <= 0) {
      RUNTIME (ctx, at, "ValueError: batch size must be positive");
      return NULL;
    }
    if (!(list = to_list (ctx, at, value)))
      return NULL;
    out = hj_list_new (0, FALSE);
    for (i = 0; i < list->v.list.n; i++) {
      if (!cur)
        cur = hj_list_new (0, FALSE);
      hj_list_push (cur, hj_ref (list->v.list.items[i]));
      if ((gint64) cur->v.list.n == count) {
        hj_list_push (out, cur);
        cur = NULL;
      }
    }
    if (cur) {
      if (fill && fill->type != HJ_NONE)
        while ((gint64) cur->v.list.n < count && charge (ctx, at, 1))
          hj_list_push (cur, hj_ref (fill));
      hj_list_push (out, cur);
    }
    hj_unref (list);
    if (ctx->error) {
      hj_unref (out);
      return NULL;
    }
    return out;
  } else if (!strcmp (name, "sum")) {
    HjValue *attribute = arg (a, 0, "attribute"), *start = arg (a, 1, "start"), *list, *acc;
    gsize i;
    if (!(list = to_list (ctx, at, value)))
      return NULL;
    acc = start ? hj_ref (start) : hj_int (0);
    for (i = 0; i < list->v.list.n; i++) {
      HjValue *x = attribute ? attr_path (ctx, at, list->v.list.items[i], attribute, NULL)
                             : hj_ref (list->v.list.items[i]), *next = NULL;
      if (x && hj_is_number (x) && hj_is_number (acc)) {
        if (x->type == HJ_FLOAT || acc->type == HJ_FLOAT)
          next = hj_float (hj_as_double (acc) + hj_as_double (x));
        else {
          gint64 res, xa = acc->type == HJ_INT ? acc->v.i : acc->v.b, xb = x->type == HJ_INT ? x->v.i : x->v.b;
          if (__builtin_add_overflow (xa, xb, &res))
            LIMIT (ctx, at, "integer overflow");
          else
            next = hj_int (res);
        }
      } else if (x)
        RUNTIME (ctx, at, "TypeError: unsupported operand type(s) for +: '%s' and '%s'", hj_type_name (acc),
                 hj_type_name (x));
      hj_clear (&x);
      hj_unref (acc);
      acc = next;
      if (!acc)
        break;
    }
    hj_unref (list);
    return acc;
  } else if (!strcmp (name, "min") || !strcmp (name, "max")) {
    HjValue *cs = arg (a, 0, "case_sensitive"), *attribute = arg (a, 1, "attribute"), *list, *sorted;
    if (!(list = to_list (ctx, at, value)))
      return NULL;
    sorted = sort_list (ctx, at, list, attribute, cs && hj_truthy (cs), FALSE, -1);
    hj_unref (list);
    if (!sorted)
      return NULL;
    if (sorted->v.list.n == 0)
      r = hj_undefined ("No aggregated item, sequence was empty.");
    else if (name[1] == 'i')
      r = hj_ref (sorted->v.list.items[0]);
    else {
      /* max() returns the first maximal item */
      gsize k = sorted->v.list.n - 1;
      HjValue *last = sorted->v.list.items[k];
      HjValue *lk = attribute ? attr_path (ctx, at, last, attribute, NULL) : hj_ref (last);
      gsize j;
      if (lk && !(cs && hj_truthy (cs)))
        lk = ignore_case (ctx, at, lk);
      for (j = 0; lk && j < sorted->v.list.n; j++) {
        HjValue *ik = attribute ? attr_path (ctx, at, sorted->v.list.items[j], attribute, NULL)
                                : hj_ref (sorted->v.list.items[j]);
        gboolean eq;
        if (!ik)
          break;
        if (!(cs && hj_truthy (cs)))
          ik = ignore_case (ctx, at, ik);
        eq = hj_equal (ik, lk, 0);
        hj_unref (ik);
        if (eq) {
          k = j;
          break;
        }
      }
      hj_clear (&lk);
      r = ctx->error ? NULL : hj_ref (sorted->v.list.items[k]);
      /* items equal to the max keep their original order in `sorted` (stable sort) */
    }
    hj_unref (sorted);
    return r;
  } else if (!strcmp (name, "escape") || !strcmp (name, "e") || !strcmp (name, "forceescape")) {
    GString *out;
    gsize i;
    NEED_STR ();
    out = g_string_sized_new (s->v.str.len);
    for (i = 0; i < s->v.str.len; i++) {
      char c = s->v.str.s[i];
      switch (c) {
      case '&': g_string_append (out, "&amp;"); break;
      case '<': g_string_append (out, "&lt;"); break;
      case '>': g_string_append (out, "&gt;"); break;
      case '"': g_string_append (out, "&#34;"); break;
      case '\'': g_string_append (out, "&#39;"); break;
      default: g_string_append_c (out, c);
      }
    }
    r = make_string (ctx, at, out);
  } else if (!strcmp (name, "attr")) {
    HjValue *nm = arg (a, 0, "name");
    if (!nm || nm->type != HJ_STRING) {
      RUNTIME (ctx, at, "attr needs an attribute name");
      return NULL;
    }
    if (value->type == HJ_UNDEFINED)
      return undefined_error (ctx, at, value);
    r = python_attr (value, nm->v.str.s);
    if (!r)
      r = hj_undefined ("'%s' has no attribute '%s'", object_name (value), nm->v.str.s);
    return r;
  } else if (!strcmp (name, "center")) {
    HjValue *w = arg (a, 0, "width");
    gint64 width = 80, pad, left;
    GString *out;
    if (w && !arg_int (ctx, at, w, &width))
      return NULL;
    NEED_STR ();
    if (width > HJ_MAX_STRING) {
      hj_unref (s);
      LIMIT (ctx, at, "center width too large");
      return NULL;
    }
    pad = width - (gint64) s->v.str.nchars;
    out = g_string_new (NULL);
    if (pad <= 0)
      g_string_append_len (out, s->v.str.s, s->v.str.len);
    else {
      /* Python: left = pad // 2 + (pad & width & 1) */
      left = pad / 2 + (pad & width & 1);
      g_string_append (out, "");
      for (gint64 k = 0; k < left; k++)
        g_string_append_c (out, ' ');
      g_string_append_len (out, s->v.str.s, s->v.str.len);
      for (gint64 k = 0; k < pad - left; k++)
        g_string_append_c (out, ' ');
    }
    r = make_string (ctx, at, out);
  } else {
    RUNTIME (ctx, at, "No filter named '%s'.", name);
    return NULL;
  }
#undef NEED_STR
  hj_clear (&s);
  return r;
}

/* ---- tests ------------------------------------------------------------------ */

/* Returns 1/0, or -1 on error. */
static int
call_test (HjCtx *ctx, const HjNode *at, const char *name, HjValue *v, Args *a)
{
  HjValue *other;
  if (!charge (ctx, at, 1) || !check_args (ctx, at, test_signatures, G_N_ELEMENTS (test_signatures), name, a, TRUE))
    return -1;
  other = arg (a, 0, NULL);
  if (!other && a->nkw == 1)
    other = a->kwvals[0];
  if (!strcmp (name, "defined")) return v->type != HJ_UNDEFINED;
  if (!strcmp (name, "undefined")) return v->type == HJ_UNDEFINED;
  if (!strcmp (name, "none")) return v->type == HJ_NONE;
  if (!strcmp (name, "string")) return v->type == HJ_STRING;
  if (!strcmp (name, "number")) return hj_is_number (v);
  if (!strcmp (name, "integer")) return v->type == HJ_INT;
  if (!strcmp (name, "float")) return v->type == HJ_FLOAT;
  if (!strcmp (name, "boolean")) return v->type == HJ_BOOL;
  if (!strcmp (name, "true")) return v->type == HJ_BOOL && v->v.b;
  if (!strcmp (name, "false")) return v->type == HJ_BOOL && !v->v.b;
  if (!strcmp (name, "mapping")) return v->type == HJ_DICT;
  if (!strcmp (name, "iterable"))
    return v->type == HJ_STRING || v->type == HJ_LIST || v->type == HJ_DICT || v->type == HJ_UNDEFINED;
  if (!strcmp (name, "sequence"))
    return v->type == HJ_STRING || v->type == HJ_LIST || v->type == HJ_DICT || v->type == HJ_UNDEFINED;
  /* jinja2's Undefined defines __call__ (to fail), so callable() says True */
  if (!strcmp (name, "callable")) return v->type == HJ_FUNC || v->type == HJ_UNDEFINED;
  if (!strcmp (name, "escaped")) return FALSE;
  if (!strcmp (name, "lower") || !strcmp (name, "upper")) {
    HjValue *s = str_of (ctx, at, v);
    int r;
    if (!s)
      return -1;
    r = str_case_test (s, name[0] == 'l');
    hj_unref (s);
    return r;
  }
  if (!strcmp (name, "sameas")) {
    if (!other)
      goto missing;
    /* Python `is`: None/True/False are singletons, small ints and equal
     * constants may or may not be shared, everything else is identity */
    if (v->type == HJ_NONE || v->type == HJ_BOOL)
      return v->type == other->type && (v->type != HJ_BOOL || v->v.b == other->v.b);
    if (v->type == HJ_INT && other->type == HJ_INT && v->v.i >= -5 && v->v.i <= 256)
      return v->v.i == other->v.i;
    return v == other;
  }
  if (!strcmp (name, "odd") || !strcmp (name, "even") || !strcmp (name, "divisibleby")) {
    gint64 x, m = 2, want = name[0] == 'o' ? 1 : 0;
    if (name[0] == 'd') {
      if (!other)
        goto missing;
      if (other->type == HJ_FLOAT || v->type == HJ_FLOAT) {
        double fm = hj_as_double (other);
        if (!hj_is_number (v) || !hj_is_number (other))
          goto type;
        if (fm == 0.0) {
          RUNTIME (ctx, at, "ZeroDivisionError: float modulo");
          return -1;
        }
        return fmod (hj_as_double (v), fm) == 0.0;
      }
      if (!arg_int (ctx, at, other, &m))
        return -1;
      want = 0;
    }
    if (v->type == HJ_FLOAT) {
      double r = fmod (v->v.f, (double) m);
      if (r < 0)
        r += (double) m;
      return r == (double) want;
    }
    if (v->type != HJ_INT && v->type != HJ_BOOL)
      goto type;
    if (m == 0) {
      RUNTIME (ctx, at, "ZeroDivisionError: integer modulo by zero");
      return -1;
    }
    x = v->type == HJ_INT ? v->v.i : v->v.b;
    x %= m;
    if (x != 0 && ((x < 0) != (m < 0)))
      x += m;
    return x == want;
  }
  {
    static const struct { const char *name; int op; } ops[] = {
      { "equalto", HJ_OP_EQ }, { "eq", HJ_OP_EQ }, { "==", HJ_OP_EQ }, { "ne", HJ_OP_NE }, { "!=", HJ_OP_NE },
      { "lt", HJ_OP_LT }, { "<", HJ_OP_LT }, { "lessthan", HJ_OP_LT }, { "le", HJ_OP_LE }, { "<=", HJ_OP_LE },
      { "gt", HJ_OP_GT }, { ">", HJ_OP_GT }, { "greaterthan", HJ_OP_GT }, { "ge", HJ_OP_GE }, { ">=", HJ_OP_GE },
    };
    gsize i;
    for (i = 0; i < G_N_ELEMENTS (ops); i++)
      if (!strcmp (name, ops[i].name)) {
        int c;
        if (!other)
          goto missing;
        if (ops[i].op == HJ_OP_EQ)
          return hj_equal (v, other, 0);
        if (ops[i].op == HJ_OP_NE)
          return !hj_equal (v, other, 0);
        if (v->type == HJ_UNDEFINED || other->type == HJ_UNDEFINED) {
          undefined_error (ctx, at, v->type == HJ_UNDEFINED ? v : other);
          return -1;
        }
        if (!hj_compare (v, other, &c, 0))
          goto type;
        if (c == 2)
          return 0;
        switch (ops[i].op) {
        case HJ_OP_LT: return c < 0;
        case HJ_OP_LE: return c <= 0;
        case HJ_OP_GT: return c > 0;
        default: return c >= 0;
        }
      }
  }
  if (!strcmp (name, "in")) {
    gsize i;
    if (!other)
      goto missing;
    switch (other->type) {
    case HJ_STRING:
      if (v->type != HJ_STRING)
        goto type;
      return v->v.str.len == 0 || memmem (other->v.str.s, other->v.str.len, v->v.str.s, v->v.str.len) != NULL;
    case HJ_LIST:
      for (i = 0; i < other->v.list.n; i++)
        if (hj_equal (v, other->v.list.items[i], 0))
          return 1;
      return 0;
    case HJ_DICT:
      return hashable (v) && hj_dict_get (other, v) != NULL;
    case HJ_UNDEFINED:
      return 0;
    default:
      goto type;
    }
  }
  if (!strcmp (name, "filter"))
    return v->type == HJ_STRING && hj_filter_known (v->v.str.s);
  if (!strcmp (name, "test"))
    return v->type == HJ_STRING && hj_test_known (v->v.str.s);
  RUNTIME (ctx, at, "No test named '%s'.", name);
  return -1;

missing:
  RUNTIME (ctx, at, "TypeError: test '%s' needs an argument", name);
  return -1;
type:
  RUNTIME (ctx, at, "TypeError: unsupported operand types for test '%s'", name);
  return -1;
}

/* ---- operators ------------------------------------------------------------ */

static gboolean
contains (HjCtx *ctx, const HjNode *at, HjValue *needle, HjValue *hay, gboolean *out)
{
  gsize i;
  switch (hay->type) {
  case HJ_STRING:
    if (needle->type != HJ_STRING) {
      type_error (ctx, at, "TypeError: 'in <string>' requires string as left operand, not %s", needle);
      return FALSE;
    }
    *out = needle->v.str.len == 0 || memmem (hay->v.str.s, hay->v.str.len, needle->v.str.s, needle->v.str.len);
    return TRUE;
  case HJ_LIST:
    *out = FALSE;
    if (!charge (ctx, at, (gint64) hay->v.list.n / 8))
      return FALSE;
    for (i = 0; i < hay->v.list.n && !*out; i++)
      *out = hj_equal (needle, hay->v.list.items[i], 0);
    return TRUE;
  case HJ_DICT:
    if (!hashable (needle)) {
      type_error (ctx, at, "TypeError: unhashable type: '%s'", needle);
      return FALSE;
    }
    *out = hj_dict_get (hay, needle) != NULL;
    return TRUE;
  case HJ_UNDEFINED:
    *out = FALSE;
    return TRUE;
  default:
    type_error (ctx, at, "TypeError: argument of type '%s' is not iterable", hay);
    return FALSE;
  }
}

static gint64
as_int (const HjValue *v)
{
  return v->type == HJ_BOOL ? v->v.b : v->v.i;
}

static HjValue *
repeat (HjCtx *ctx, const HjNode *at, HjValue *seq, gint64 times)
{
  gint64 k;
  if (times < 0)
    times = 0;
  if (seq->type == HJ_STRING) {
    GString *out;
    if (seq->v.str.len > 0 && (guint64) times > HJ_MAX_STRING / seq->v.str.len) {
      LIMIT (ctx, at, "string repetition beyond %d bytes", HJ_MAX_STRING);
      return NULL;
    }
    out = g_string_sized_new (seq->v.str.len * times);
    for (k = 0; k < times; k++)
      g_string_append_len (out, seq->v.str.s, seq->v.str.len);
    return make_string (ctx, at, out);
  } else {
    HjValue *out;
    gsize i;
    if (seq->v.list.n > 0 && (guint64) times > HJ_MAX_ITEMS / seq->v.list.n) {
      LIMIT (ctx, at, "list repetition beyond %d items", HJ_MAX_ITEMS);
      return NULL;
    }
    if (!charge (ctx, at, times * (gint64) seq->v.list.n))
      return NULL;
    out = hj_list_new (seq->v.list.n * times, seq->v.list.is_tuple);
    for (k = 0; k < times; k++)
      for (i = 0; i < seq->v.list.n; i++)
        hj_list_push (out, hj_ref (seq->v.list.items[i]));
    return out;
  }
}

static HjValue *
binop (HjCtx *ctx, const HjNode *at, int op, HjValue *a, HjValue *b)
{
  if (a->type == HJ_UNDEFINED)
    return undefined_error (ctx, at, a);
  if (b->type == HJ_UNDEFINED)
    return undefined_error (ctx, at, b);
  if (hj_is_number (a) && hj_is_number (b)) {
    gboolean fl = a->type == HJ_FLOAT || b->type == HJ_FLOAT;
    double x = hj_as_double (a), y = hj_as_double (b);
    gint64 i = as_int (a), j = as_int (b), res;
    switch (op) {
    case HJ_OP_ADD:
      if (fl) return hj_float (x + y);
      if (__builtin_add_overflow (i, j, &res)) goto overflow;
      return hj_int (res);
    case HJ_OP_SUB:
      if (fl) return hj_float (x - y);
      if (__builtin_sub_overflow (i, j, &res)) goto overflow;
      return hj_int (res);
    case HJ_OP_MUL:
      if (fl) return hj_float (x * y);
      if (__builtin_mul_overflow (i, j, &res)) goto overflow;
      return hj_int (res);
    case HJ_OP_DIV:
      if (y == 0.0) goto zero;
      return hj_float (x / y);
    case HJ_OP_FLOORDIV:
      if (fl) {
        double m;
        if (y == 0.0) goto zero;
        m = fmod (x, y);
        res = 0;
        {
          double d = (x - m) / y;
          if (m != 0.0 && ((y < 0) != (m < 0)))
            d -= 1.0;
          return hj_float (d == 0.0 ? copysign (0.0, x / y) : floor (d + 0.5) == d ? d : floor (d));
        }
      }
      if (j == 0) goto zero;
      if (i == G_MININT64 && j == -1) goto overflow;
      res = i / j;
      if ((i % j != 0) && ((i < 0) != (j < 0)))
        res--;
      return hj_int (res);
    case HJ_OP_MOD:
      if (fl) {
        double m;
        if (y == 0.0) goto zero;
        m = fmod (x, y);
        if (m != 0.0 && ((y < 0) != (m < 0)))
          m += y;
        else if (m == 0.0)
          m = copysign (0.0, y);
        return hj_float (m);
      }
      if (j == 0) goto zero;
      if (j == -1) return hj_int (0);
      res = i % j;
      if (res != 0 && ((res < 0) != (j < 0)))
        res += j;
      return hj_int (res);
    case HJ_OP_POW:
      if (fl || j < 0) {
        double pw;
        if (x == 0.0 && y < 0) goto zero;
        pw = pow (x, y);
        if (isinf (pw) && !isinf (x) && !isinf (y)) {
          RUNTIME (ctx, at, "OverflowError: (34, 'Numerical result out of range')");
          return NULL;
        }
        if (isnan (pw) && !isnan (x) && !isnan (y)) {
          RUNTIME (ctx, at, "a negative number to a fractional power gives a complex number, which is not supported");
          return NULL;
        }
        return hj_float (pw);
      }
      res = 1;
      while (j > 0) {
        if (j & 1) {
          if (__builtin_mul_overflow (res, i, &res)) goto overflow;
        }
        j >>= 1;
        if (j > 0 && __builtin_mul_overflow (i, i, &i)) goto overflow;
        if (!charge (ctx, at, 1)) return NULL;
      }
      return hj_int (res);
    }
  }
  if (op == HJ_OP_ADD) {
    if (a->type == HJ_STRING && b->type == HJ_STRING) {
      GString *out;
      if (!check_len (ctx, at, a->v.str.len + b->v.str.len))
        return NULL;
      out = g_string_sized_new (a->v.str.len + b->v.str.len);
      g_string_append_len (out, a->v.str.s, a->v.str.len);
      g_string_append_len (out, b->v.str.s, b->v.str.len);
      return make_string (ctx, at, out);
    }
    if (a->type == HJ_LIST && b->type == HJ_LIST && a->v.list.is_tuple == b->v.list.is_tuple) {
      HjValue *out;
      gsize i;
      if (a->v.list.n + b->v.list.n > HJ_MAX_ITEMS) {
        LIMIT (ctx, at, "list grew beyond %d items", HJ_MAX_ITEMS);
        return NULL;
      }
      if (!charge (ctx, at, (gint64) (a->v.list.n + b->v.list.n)))
        return NULL;
      out = hj_list_new (a->v.list.n + b->v.list.n, a->v.list.is_tuple);
      for (i = 0; i < a->v.list.n; i++)
        hj_list_push (out, hj_ref (a->v.list.items[i]));
      for (i = 0; i < b->v.list.n; i++)
        hj_list_push (out, hj_ref (b->v.list.items[i]));
      return out;
    }
    if (a->type == HJ_STRING || a->type == HJ_LIST) {
      RUNTIME (ctx, at, "TypeError: can only concatenate %s (not \"%s\") to %s", hj_type_name (a), hj_type_name (b),
               hj_type_name (a));
      return NULL;
    }
  }
  if (op == HJ_OP_MUL) {
    if ((a->type == HJ_STRING || a->type == HJ_LIST) && (b->type == HJ_INT || b->type == HJ_BOOL))
      return repeat (ctx, at, a, as_int (b));
    if ((b->type == HJ_STRING || b->type == HJ_LIST) && (a->type == HJ_INT || a->type == HJ_BOOL))
      return repeat (ctx, at, b, as_int (a));
  }
  RUNTIME (ctx, at, "TypeError: unsupported operand type(s) for %s: '%s' and '%s'", hj_op_text (op), hj_type_name (a),
           hj_type_name (b));
  return NULL;

overflow:
  LIMIT (ctx, at, "integer overflow (values beyond 64 bits are not supported)");
  return NULL;
zero:
  RUNTIME (ctx, at, "ZeroDivisionError: division by zero");
  return NULL;
}

/* ---- calls ------------------------------------------------------------------ */

static HjValue *
call_global (HjCtx *ctx, const HjNode *at, const char *name, Args *a)
{
  guint i;
  if (!strcmp (name, "raise_exception")) {
    HjValue *msg = arg (a, 0, "message"), *s;
    if (!msg) {
      RUNTIME (ctx, at, "raise_exception() missing its message");
      return NULL;
    }
    if (!(s = str_of (ctx, at, msg)))
      return NULL;
    if (!ctx->error)
      ctx->error = g_error_new_literal (HONE_ERROR, HONE_ERROR_TEMPLATE_RUNTIME, s->v.str.s);
    hj_unref (s);
    return NULL;
  }
  if (!strcmp (name, "range")) {
    gint64 start = 0, stop, step = 1, len, k;
    HjValue *out;
    if (a->npos < 1 || a->npos > 3 || a->nkw) {
      RUNTIME (ctx, at, "TypeError: range expected 1 to 3 arguments");
      return NULL;
    }
    for (i = 0; i < a->npos; i++)
      if (!arg_int (ctx, at, a->pos[i], &k))
        return NULL;
    if (a->npos == 1)
      stop = as_int (a->pos[0]);
    else {
      start = as_int (a->pos[0]);
      stop = as_int (a->pos[1]);
      if (a->npos == 3)
        step = as_int (a->pos[2]);
    }
    if (step == 0) {
      RUNTIME (ctx, at, "ValueError: range() arg 3 must not be zero");
      return NULL;
    }
    if (step > 0)
      len = stop > start ? (gint64) (((guint64) stop - (guint64) start - 1) / (guint64) step + 1) : 0;
    else
      len = start > stop ? (gint64) (((guint64) start - (guint64) stop - 1) / (guint64) (-(step + 1) + 1) + 1) : 0;
    if (len > HJ_MAX_RANGE || len < 0) {
      LIMIT (ctx, at, "OverflowError: Range too big. The sandbox blocks ranges larger than MAX_RANGE (%d).",
             HJ_MAX_RANGE);
      return NULL;
    }
    if (!charge (ctx, at, 4 * len))  /* one allocation per element */
      return NULL;
    out = hj_list_new ((gsize) len, FALSE);
    for (k = 0; k < len; k++)
      hj_list_push (out, hj_int (start + k * step));
    return out;
  }
  if (!strcmp (name, "namespace") || !strcmp (name, "dict")) {
    HjValue *d = hj_dict_new (name[0] == 'n');
    if (a->npos > 1) {
      hj_unref (d);
      RUNTIME (ctx, at, "TypeError: %s expected at most 1 positional argument", name);
      return NULL;
    }
    if (a->npos == 1) {
      HjValue *src = a->pos[0];
      gsize k;
      if (src->type == HJ_DICT || src->type == HJ_NAMESPACE) {
        for (k = 0; k < src->v.dict.n; k++)
          hj_dict_set (d, hj_ref (src->v.dict.entries[k].key), hj_ref (src->v.dict.entries[k].value));
      } else if (src->type == HJ_LIST) {
        for (k = 0; k < src->v.list.n; k++) {
          HjValue *pair = src->v.list.items[k];
          if (pair->type != HJ_LIST || pair->v.list.n != 2 || !hashable (pair->v.list.items[0])) {
            hj_unref (d);
            RUNTIME (ctx, at, "ValueError: dictionary update sequence element has the wrong length");
            return NULL;
          }
          hj_dict_set (d, hj_ref (pair->v.list.items[0]), hj_ref (pair->v.list.items[1]));
        }
      } else {
        hj_unref (d);
        return type_error (ctx, at, "TypeError: '%s' object is not iterable", src);
      }
    }
    for (i = 0; i < a->nkw; i++)
      hj_dict_set (d, hj_string_new (a->kwnames[i], -1), hj_ref (a->kwvals[i]));
    if (d->type == HJ_NAMESPACE)
      g_ptr_array_add (ctx->namespaces, hj_ref (d));
    return d;
  }
  if (!strcmp (name, "strftime_now")) {
    HjValue *fmt = arg (a, 0, "format");
    struct tm tm;
    time_t now;
    char *buf;
    gsize size, n;
    if (!fmt || fmt->type != HJ_STRING) {
      RUNTIME (ctx, at, "strftime_now() needs a format string");
      return NULL;
    }
    if (fmt->v.str.len > 256 || memchr (fmt->v.str.s, 0, fmt->v.str.len)) {
      LIMIT (ctx, at, "strftime_now() format too long");
      return NULL;
    }
    if (ctx->opts && ctx->opts->have_now) {
      now = (time_t) ctx->opts->now;
      gmtime_r (&now, &tm);
    } else {
      now = time (NULL);
      localtime_r (&now, &tm);
    }
    if (fmt->v.str.len == 0)
      return hj_string_new ("", 0);
    size = 64 + fmt->v.str.len * 32;
    buf = g_malloc (size);
    {
      /* transformers runs in Python, whose LC_TIME stays "C": month and day
       * names must not follow the host application's locale */
      static gsize once;
      static locale_t c_locale;
      if (g_once_init_enter (&once)) {
        c_locale = newlocale (LC_TIME_MASK, "C", (locale_t) 0);
        g_once_init_leave (&once, 1);
      }
      n = c_locale ? strftime_l (buf, size, fmt->v.str.s, &tm, c_locale) : strftime (buf, size, fmt->v.str.s, &tm);
    }
    if (n == 0)
      buf[0] = 0;
    if (!g_utf8_validate (buf, n, NULL)) {
      g_free (buf);
      RUNTIME (ctx, at, "strftime_now() produced invalid UTF-8");
      return NULL;
    }
    return hj_string_take (buf, n);
  }
  RUNTIME (ctx, at, "'%s' is not callable", name);
  return NULL;
}

/* Python's arity for the methods we implement: max positional arguments and
 * the keyword names accepted (most str methods take no keywords). */
static gboolean
check_method_args (HjCtx *ctx, const HjNode *at, HjValue *self, const char *name, Args *a)
{
  static const struct { HjType type; const char *name; guint max; const char *kw1, *kw2; } table[] = {
    { HJ_STRING, "strip", 1, NULL, NULL }, { HJ_STRING, "lstrip", 1, NULL, NULL }, { HJ_STRING, "rstrip", 1, NULL, NULL },
    { HJ_STRING, "split", 2, "sep", "maxsplit" }, { HJ_STRING, "rsplit", 2, "sep", "maxsplit" },
    { HJ_STRING, "startswith", 1, NULL, NULL }, { HJ_STRING, "endswith", 1, NULL, NULL },
    { HJ_STRING, "replace", 3, NULL, NULL }, { HJ_STRING, "find", 1, NULL, NULL }, { HJ_STRING, "rfind", 1, NULL, NULL },
    { HJ_STRING, "index", 1, NULL, NULL }, { HJ_STRING, "count", 1, NULL, NULL }, { HJ_STRING, "join", 1, NULL, NULL },
    { HJ_STRING, "splitlines", 1, "keepends", NULL }, { HJ_DICT, "get", 2, NULL, NULL },
    { HJ_LIST, "index", 1, NULL, NULL }, { HJ_LIST, "count", 1, NULL, NULL },
  };
  guint max = 0, i;
  const char *kw1 = NULL, *kw2 = NULL;
  if (self->type == HJ_LOOP)
    return TRUE;
  for (i = 0; i < G_N_ELEMENTS (table); i++)
    if (table[i].type == self->type && !strcmp (table[i].name, name)) {
      max = table[i].max;
      kw1 = table[i].kw1;
      kw2 = table[i].kw2;
    }
  if (a->npos > max) {
    RUNTIME (ctx, at, "TypeError: %s.%s() takes at most %u argument(s) (%u given)", hj_type_name (self), name, max,
             a->npos);
    return FALSE;
  }
  for (i = 0; i < a->nkw; i++)
    if (!((kw1 && !strcmp (a->kwnames[i], kw1)) || (kw2 && !strcmp (a->kwnames[i], kw2)))) {
      RUNTIME (ctx, at, "TypeError: %s.%s() takes no keyword argument '%s'", hj_type_name (self), name, a->kwnames[i]);
      return FALSE;
    }
  return TRUE;
}

static HjValue *
call_method (HjCtx *ctx, const HjNode *at, HjValue *self, const char *name, Args *a)
{
  HjValue *x, *y;
  if (!check_method_args (ctx, at, self, name, a))
    return NULL;
  x = arg (a, 0, NULL);
  y = arg (a, 1, NULL);
  if (!charge (ctx, at, 1 + (self->type == HJ_STRING ? (gint64) self->v.str.len / 64 : 0)))
    return NULL;
  if (self->type == HJ_STRING) {
    if (!strcmp (name, "strip") || !strcmp (name, "lstrip") || !strcmp (name, "rstrip")) {
      if (x && x->type != HJ_STRING && x->type != HJ_NONE)
        return type_error (ctx, at, "TypeError: strip arg must be None or str, not %s", x);
      return py_strip (self, x, name[0] != 'r', name[0] != 'l');
    }
    if (!strcmp (name, "split") || !strcmp (name, "rsplit")) {
      HjValue *sep = arg (a, 0, "sep"), *ms = arg (a, 1, "maxsplit");
      gint64 maxsplit = -1;
      if (ms && !arg_int (ctx, at, ms, &maxsplit))
        return NULL;
      if (name[0] == 'r' && maxsplit >= 0) {
        RUNTIME (ctx, at, "rsplit with maxsplit is not supported");
        return NULL;
      }
      return py_split (ctx, at, self, sep, maxsplit);
    }
    if (!strcmp (name, "startswith") || !strcmp (name, "endswith")) {
      gboolean suffix = name[0] == 'e';
      gsize i;
      if (!x)
        goto missing;
      if (x->type == HJ_STRING)
        return hj_bool (str_has_prefix_at (self, x, suffix));
      if (x->type == HJ_LIST && x->v.list.is_tuple) {
        for (i = 0; i < x->v.list.n; i++) {
          if (x->v.list.items[i]->type != HJ_STRING)
            return type_error (ctx, at, "TypeError: tuple for startswith must only contain str, not %s",
                               x->v.list.items[i]);
          if (str_has_prefix_at (self, x->v.list.items[i], suffix))
            return hj_bool (TRUE);
        }
        return hj_bool (FALSE);
      }
      return type_error (ctx, at, "TypeError: startswith first arg must be str or a tuple of str, not %s", x);
    }
    if (!strcmp (name, "upper") || !strcmp (name, "lower") || !strcmp (name, "title") ||
        !strcmp (name, "capitalize") || !strcmp (name, "swapcase") || !strcmp (name, "casefold"))
      return py_case (ctx, at, self, name);
    if (!strcmp (name, "replace")) {
      HjValue *cnt = arg (a, 2, "count");
      gint64 count = -1;
      if (!x || !y)
        goto missing;
      if (x->type != HJ_STRING || y->type != HJ_STRING)
        return type_error (ctx, at, "TypeError: replace() argument must be str, not %s", x->type != HJ_STRING ? x : y);
      if (cnt && !arg_int (ctx, at, cnt, &count))
        return NULL;
      return py_replace (ctx, at, self, x, y, count);
    }
    if (!strcmp (name, "find") || !strcmp (name, "rfind") || !strcmp (name, "index") || !strcmp (name, "count")) {
      const char *p = self->v.str.s, *end = p + self->v.str.len, *hit = NULL;
      gint64 n = 0;
      if (!x)
        goto missing;
      if (x->type != HJ_STRING)
        return type_error (ctx, at, "TypeError: must be str, not %s", x);
      if (!strcmp (name, "count")) {
        if (x->v.str.len == 0)
          return hj_int ((gint64) self->v.str.nchars + 1);
        while ((hit = memmem (p, end - p, x->v.str.s, x->v.str.len))) {
          n++;
          p = hit + x->v.str.len;
        }
        return hj_int (n);
      }
      if (name[0] == 'r') {
        const char *q;
        for (q = p; (q = memmem (q, end - q, x->v.str.s, x->v.str.len)); q++) {
          hit = q;
          if (q >= end)
            break;
        }
      } else
        hit = memmem (p, end - p, x->v.str.s, x->v.str.len);
      if (!hit && x->v.str.len == 0)
        hit = name[0] == 'r' ? end : p;
      if (!hit) {
        if (name[0] == 'i') {
          RUNTIME (ctx, at, "ValueError: substring not found");
          return NULL;
        }
        return hj_int (-1);
      }
      return hj_int (char_index (self, hit));
    }
    if (!strcmp (name, "join")) {
      HjValue *list;
      GString *out;
      gsize i;
      if (!x)
        goto missing;
      if (!(list = to_list (ctx, at, x)))
        return NULL;
      out = g_string_new (NULL);
      for (i = 0; i < list->v.list.n; i++) {
        HjValue *item = list->v.list.items[i];
        if (item->type != HJ_STRING) {
          hj_unref (list);
          g_string_free (out, TRUE);
          RUNTIME (ctx, at, "TypeError: sequence item %" "zu" ": expected str instance, %s found", i,
                   hj_type_name (item));
          return NULL;
        }
        if (i)
          g_string_append_len (out, self->v.str.s, self->v.str.len);
        g_string_append_len (out, item->v.str.s, item->v.str.len);
        if (out->len > HJ_MAX_STRING)
          break;
      }
      hj_unref (list);
      return make_string (ctx, at, out);
    }
    if (!strcmp (name, "isdigit")) return hj_bool (str_all (self, is_digit_u));
    if (!strcmp (name, "isalpha")) return hj_bool (str_all (self, is_alpha_u));
    if (!strcmp (name, "isalnum")) return hj_bool (str_all (self, is_alnum_u));
    if (!strcmp (name, "isspace")) return hj_bool (str_all (self, hj_unichar_isspace));
    if (!strcmp (name, "islower")) return hj_bool (str_case_test (self, TRUE));
    if (!strcmp (name, "isupper")) return hj_bool (str_case_test (self, FALSE));
    if (!strcmp (name, "splitlines")) {
      HjValue *list = hj_list_new (0, FALSE);
      const char *p = self->v.str.s, *end = p + self->v.str.len, *line = p;
      while (p < end) {
        gunichar c = g_utf8_get_char (p);
        const char *next = g_utf8_next_char (p);
        if (c == '\n' || c == '\r' || c == '\v' || c == '\f' || (c >= 0x1c && c <= 0x1e) || c == 0x85 ||
            c == 0x2028 || c == 0x2029) {
          hj_list_push (list, hj_string_new (line, p - line));
          if (c == '\r' && next < end && *next == '\n')
            next++;
          line = next;
        }
        p = next;
      }
      if (line < end)
        hj_list_push (list, hj_string_new (line, end - line));
      return list;
    }
  } else if (self->type == HJ_DICT) {
    if (!strcmp (name, "items"))
      return call_filter (ctx, at, "items", self, a);
    if (!strcmp (name, "keys"))
      return to_list (ctx, at, self);
    if (!strcmp (name, "copy")) {
      HjValue *d = hj_dict_new (FALSE);
      gsize i;
      for (i = 0; i < self->v.dict.n; i++)
        hj_dict_set (d, hj_ref (self->v.dict.entries[i].key), hj_ref (self->v.dict.entries[i].value));
      return d;
    }
    if (!strcmp (name, "values")) {
      HjValue *out = hj_list_new (self->v.dict.n, FALSE);
      gsize i;
      for (i = 0; i < self->v.dict.n; i++)
        hj_list_push (out, hj_ref (self->v.dict.entries[i].value));
      return out;
    }
    if (!strcmp (name, "get")) {
      HjValue *v;
      if (!x)
        goto missing;
      if (!hashable (x))
        return type_error (ctx, at, "TypeError: unhashable type: '%s'", x);
      v = hj_dict_get (self, x);
      return v ? hj_ref (v) : y ? hj_ref (y) : hj_none ();
    }
  } else if (self->type == HJ_LIST) {
    gsize i;
    if (!strcmp (name, "copy")) {
      HjValue *out = hj_list_new (self->v.list.n, FALSE);
      for (i = 0; i < self->v.list.n; i++)
        hj_list_push (out, hj_ref (self->v.list.items[i]));
      return out;
    }
    if (!x)
      goto missing;
    if (!strcmp (name, "count")) {
      gint64 n = 0;
      for (i = 0; i < self->v.list.n; i++)
        n += hj_equal (self->v.list.items[i], x, 0);
      return hj_int (n);
    }
    if (!strcmp (name, "index")) {
      for (i = 0; i < self->v.list.n; i++)
        if (hj_equal (self->v.list.items[i], x, 0))
          return hj_int ((gint64) i);
      RUNTIME (ctx, at, "ValueError: value is not in list");
      return NULL;
    }
  } else if (self->type == HJ_LOOP && !strcmp (name, "cycle")) {
    if (a->npos == 0) {
      RUNTIME (ctx, at, "TypeError: no items for cycling given");
      return NULL;
    }
    return hj_ref (a->pos[self->v.loop.index0 % a->npos]);
  }
  RUNTIME (ctx, at, "'%s' object has no callable attribute '%s'", hj_type_name (self), name);
  return NULL;

missing:
  RUNTIME (ctx, at, "TypeError: %s() is missing an argument", name);
  return NULL;
}

static ExecStatus exec_node (HjCtx *ctx, Scope *scope, const HjNode *n);

static HjValue *
call_macro (HjCtx *ctx, const HjNode *at, const HjNode *macro, Args *a)
{
  Scope *scope;
  GString *saved = ctx->out, *buf;
  guint nparams = macro->names ? macro->names->len : 0, i, j;
  ExecStatus st;
  HjValue *result = NULL;
  if (a->npos > nparams) {
    RUNTIME (ctx, at, "macro '%s' takes not more than %u argument(s)", macro->str, nparams);
    return NULL;
  }
  for (j = 0; j < a->nkw; j++) {
    gboolean known = FALSE;
    for (i = 0; i < nparams; i++)
      known |= !strcmp (a->kwnames[j], g_ptr_array_index (macro->names, i));
    if (!known) {
      RUNTIME (ctx, at, "macro '%s' takes no keyword argument '%s'", macro->str, a->kwnames[j]);
      return NULL;
    }
  }
  scope = scope_new (ctx->root);
  for (i = 0; i < nparams; i++) {
    const char *pname = g_ptr_array_index (macro->names, i);
    HjValue *v = i < a->npos ? hj_ref (a->pos[i]) : NULL;
    for (j = 0; !v && j < a->nkw; j++)
      if (!strcmp (a->kwnames[j], pname))
        v = hj_ref (a->kwvals[j]);
    if (!v) {
      const HjNode *def = g_ptr_array_index (macro->items2, i);
      v = def ? eval (ctx, scope, def) : hj_undefined ("parameter '%s' was not provided", pname);
      if (!v) {
        scope_free (scope);
        return NULL;
      }
    }
    scope_set (scope, pname, v);
  }
  buf = g_string_new (NULL);
  ctx->out = buf;
  st = exec_body (ctx, scope, macro->b);
  ctx->out = saved;
  scope_free (scope);
  if (st == EX_ERR) {
    g_string_free (buf, TRUE);
    return NULL;
  }
  result = make_string (ctx, at, buf);
  return result;
}

static HjValue *
call_value (HjCtx *ctx, const HjNode *at, HjValue *callee, Args *a)
{
  if (callee->type == HJ_UNDEFINED)
    return undefined_error (ctx, at, callee);
  if (callee->type != HJ_FUNC)
    return type_error (ctx, at, "TypeError: '%s' object is not callable", callee);
  switch (callee->v.func.kind) {
  case HJ_FN_GLOBAL:
    return call_global (ctx, at, callee->v.func.name, a);
  case HJ_FN_METHOD:
    return call_method (ctx, at, callee->v.func.self, callee->v.func.name, a);
  case HJ_FN_MACRO:
    return call_macro (ctx, at, callee->v.func.macro, a);
  case HJ_FN_UNSAFE:
    RUNTIME (ctx, at, "access to attribute '%s' of '%s' object is unsafe.", callee->v.func.name,
             hj_type_name (callee->v.func.self));
    return NULL;
  }
  return NULL;
}

/* Applies a parsed filter chain (innermost input is a placeholder) to input. */
static HjValue *
apply_filter_chain (HjCtx *ctx, Scope *scope, const HjNode *chain, HjValue *input)
{
  HjValue *inner, *r;
  Args a;
  if (chain->kind != HJ_N_FILTER)
    return hj_ref (input);
  if (!(inner = apply_filter_chain (ctx, scope, chain->a, input)))
    return NULL;
  if (!eval_args (ctx, scope, chain, &a)) {
    args_free (&a);
    hj_unref (inner);
    return NULL;
  }
  r = call_filter (ctx, chain, chain->str, inner, &a);
  args_free (&a);
  hj_unref (inner);
  return r;
}

/* ---- expression evaluation ------------------------------------------------ */

static gboolean
enter (HjCtx *ctx, const HjNode *n)
{
  if (++ctx->depth > HJ_MAX_EVAL_DEPTH) {
    LIMIT (ctx, n, "the template recursed deeper than %d levels", HJ_MAX_EVAL_DEPTH);
    return FALSE;
  }
  return charge (ctx, n, 1);
}

static HjValue *
eval_inner (HjCtx *ctx, Scope *scope, const HjNode *n)
{
  HjValue *a = NULL, *b = NULL, *r = NULL;
  guint i;
  switch (n->kind) {
  case HJ_N_CONST:
    return hj_ref (n->value);
  case HJ_N_NAME:
    return lookup (scope, n->str);
  case HJ_N_LIST:
  case HJ_N_TUPLE: {
    HjValue *list = hj_list_new (n->items ? n->items->len : 0, n->kind == HJ_N_TUPLE);
    for (i = 0; n->items && i < n->items->len; i++) {
      HjValue *item = eval (ctx, scope, g_ptr_array_index (n->items, i));
      if (!item) {
        hj_unref (list);
        return NULL;
      }
      hj_list_push (list, item);
    }
    return list;
  }
  case HJ_N_DICT: {
    HjValue *dict = hj_dict_new (FALSE);
    for (i = 0; i < n->items->len; i++) {
      HjValue *k = eval (ctx, scope, g_ptr_array_index (n->items, i)), *v;
      if (!k) {
        hj_unref (dict);
        return NULL;
      }
      if (!hashable (k)) {
        type_error (ctx, n, "TypeError: unhashable type: '%s'", k);
        hj_unref (k);
        hj_unref (dict);
        return NULL;
      }
      if (!(v = eval (ctx, scope, g_ptr_array_index (n->items2, i)))) {
        hj_unref (k);
        hj_unref (dict);
        return NULL;
      }
      hj_dict_set (dict, k, v);
    }
    return dict;
  }
  case HJ_N_GETATTR:
    if (!(a = eval (ctx, scope, n->a)))
      return NULL;
    r = get_attr (ctx, n, a, n->str);
    break;
  case HJ_N_GETITEM:
    if (!(a = eval (ctx, scope, n->a)))
      return NULL;
    if (n->b->kind == HJ_N_SLICE) {
      HjValue *s0 = NULL, *s1 = NULL, *s2 = NULL;
      gboolean ok = (!n->b->a || (s0 = eval (ctx, scope, n->b->a))) && (!n->b->b || (s1 = eval (ctx, scope, n->b->b))) &&
                    (!n->b->c || (s2 = eval (ctx, scope, n->b->c)));
      if (ok)
        r = get_slice (ctx, n, a, s0, s1, s2);
      hj_clear (&s0);
      hj_clear (&s1);
      hj_clear (&s2);
      break;
    }
    if (!(b = eval (ctx, scope, n->b)))
      break;
    r = get_item (ctx, n, a, b);
    break;
  case HJ_N_CALL: {
    Args args;
    if (!(a = eval (ctx, scope, n->a)))
      return NULL;
    if (eval_args (ctx, scope, n, &args))
      r = call_value (ctx, n, a, &args);
    args_free (&args);
    break;
  }
  case HJ_N_FILTER: {
    Args args;
    if (!(a = eval (ctx, scope, n->a)))
      return NULL;
    if (eval_args (ctx, scope, n, &args))
      r = call_filter (ctx, n, n->str, a, &args);
    args_free (&args);
    break;
  }
  case HJ_N_TEST: {
    Args args;
    int t = -1;
    if (!(a = eval (ctx, scope, n->a)))
      return NULL;
    if (eval_args (ctx, scope, n, &args))
      t = call_test (ctx, n, n->str, a, &args);
    args_free (&args);
    if (t >= 0)
      r = hj_bool (n->flag ? !t : t);
    break;
  }
  case HJ_N_BINOP:
    if ((a = eval (ctx, scope, n->a)) && (b = eval (ctx, scope, n->b)))
      r = binop (ctx, n, n->op, a, b);
    break;
  case HJ_N_UNARY:
    if (!(a = eval (ctx, scope, n->a)))
      return NULL;
    if (n->op == HJ_OP_NOT)
      r = hj_bool (!hj_truthy (a));
    else if (a->type == HJ_UNDEFINED)
      undefined_error (ctx, n, a);
    else if (a->type == HJ_INT || a->type == HJ_BOOL) {
      gint64 v = as_int (a);
      if (n->op == HJ_OP_NEG && v == G_MININT64)
        LIMIT (ctx, n, "integer overflow");
      else
        r = hj_int (n->op == HJ_OP_NEG ? -v : v);
    } else if (a->type == HJ_FLOAT)
      r = hj_float (n->op == HJ_OP_NEG ? -a->v.f : a->v.f);
    else
      type_error (ctx, n, "TypeError: bad operand type for unary operator: '%s'", a);
    break;
  case HJ_N_AND:
  case HJ_N_OR:
    if (!(a = eval (ctx, scope, n->a)))
      return NULL;
    if (hj_truthy (a) == (n->kind == HJ_N_OR))
      return a;
    hj_unref (a);
    return eval (ctx, scope, n->b);
  case HJ_N_CONDEXPR:
    if (!(a = eval (ctx, scope, n->a)))
      return NULL;
    if (hj_truthy (a))
      r = eval (ctx, scope, n->b);
    else
      r = n->c ? eval (ctx, scope, n->c) : hj_undefined ("the inline if-expression evaluated to false and no else section was defined.");
    break;
  case HJ_N_CONCAT: {
    GString *out = g_string_new (NULL);
    for (i = 0; i < n->items->len; i++) {
      HjValue *v = eval (ctx, scope, g_ptr_array_index (n->items, i));
      gboolean ok = v && hj_append_str (out, v, 0);
      hj_clear (&v);
      if (!ok || out->len > HJ_MAX_STRING) {
        if (!ctx->error)
          LIMIT (ctx, n, "string grew beyond %d bytes", HJ_MAX_STRING);
        g_string_free (out, TRUE);
        return NULL;
      }
    }
    return make_string (ctx, n, out);
  }
  case HJ_N_COMPARE: {
    HjValue *left;
    if (!(left = eval (ctx, scope, n->a)))
      return NULL;
    for (i = 0; i < n->items->len; i++) {
      int op = GPOINTER_TO_INT (g_ptr_array_index (n->names, i)), c;
      HjValue *right = eval (ctx, scope, g_ptr_array_index (n->items, i));
      gboolean res = FALSE;
      if (!right) {
        hj_unref (left);
        return NULL;
      }
      switch (op) {
      case HJ_OP_EQ: res = hj_equal (left, right, 0); break;
      case HJ_OP_NE: res = !hj_equal (left, right, 0); break;
      case HJ_OP_IN:
      case HJ_OP_NOTIN:
        if (!contains (ctx, n, left, right, &res)) {
          hj_unref (left);
          hj_unref (right);
          return NULL;
        }
        if (op == HJ_OP_NOTIN)
          res = !res;
        break;
      default:
        if (left->type == HJ_UNDEFINED || right->type == HJ_UNDEFINED) {
          undefined_error (ctx, n, left->type == HJ_UNDEFINED ? left : right);
          hj_unref (left);
          hj_unref (right);
          return NULL;
        }
        if (!hj_compare (left, right, &c, 0)) {
          RUNTIME (ctx, n, "TypeError: '%s' not supported between instances of '%s' and '%s'", hj_op_text (op),
                   hj_type_name (left), hj_type_name (right));
          hj_unref (left);
          hj_unref (right);
          return NULL;
        }
        res = c != 2 && (op == HJ_OP_LT ? c < 0 : op == HJ_OP_LE ? c <= 0 : op == HJ_OP_GT ? c > 0 : c >= 0);
      }
      hj_unref (left);
      left = right;
      if (!res) {
        hj_unref (left);
        return hj_bool (FALSE);
      }
    }
    hj_unref (left);
    return hj_bool (TRUE);
  }
  default:
    RUNTIME (ctx, n, "cannot evaluate this node");
    return NULL;
  }
  hj_clear (&a);
  hj_clear (&b);
  return r;
}

static HjValue *
eval (HjCtx *ctx, Scope *scope, const HjNode *n)
{
  HjValue *r = NULL;
  if (enter (ctx, n))
    r = eval_inner (ctx, scope, n);
  ctx->depth--;
  if (hj_value_work > 0) {
    gint64 work = hj_value_work;
    hj_value_work = 0;
    charge (ctx, n, work / 4);
  }
  if (!r && !ctx->error)
    RUNTIME (ctx, n, "evaluation failed");
  if (r && ctx->error) {
    hj_unref (r);
    r = NULL;
  }
  return r;
}

/* ---- statements ------------------------------------------------------------ */

static gboolean
emit (HjCtx *ctx, const HjNode *at, const char *s, gsize len)
{
  if (ctx->out->len + len > HJ_MAX_STRING) {
    LIMIT (ctx, at, "the output grew beyond %d bytes", HJ_MAX_STRING);
    return FALSE;
  }
  g_string_append_len (ctx->out, s, len);
  return charge (ctx, at, (gint64) (len / 16));
}

/* Binds targets (one name, or unpacking) in scope. */
static gboolean
assign (HjCtx *ctx, const HjNode *at, Scope *scope, GPtrArray *names, gboolean unpack, HjValue *value)
{
  HjValue *items;
  guint i;
  if (!unpack) {
    scope_set (scope, g_ptr_array_index (names, 0), hj_ref (value));
    return TRUE;
  }
  if (!(items = to_list (ctx, at, value)))
    return FALSE;
  if (items->v.list.n != names->len) {
    RUNTIME (ctx, at, "ValueError: cannot unpack %" "zu" " values into %u names", items->v.list.n,
             names->len);
    hj_unref (items);
    return FALSE;
  }
  for (i = 0; i < names->len; i++)
    scope_set (scope, g_ptr_array_index (names, i), hj_ref (items->v.list.items[i]));
  hj_unref (items);
  return TRUE;
}

static ExecStatus
exec_for (HjCtx *ctx, Scope *scope, const HjNode *n)
{
  HjValue *iter, *all, *items;
  ExecStatus st = EX_OK;
  gsize i;
  if (!(iter = eval (ctx, scope, n->a)))
    return EX_ERR;
  all = to_list (ctx, n, iter);
  hj_unref (iter);
  if (!all)
    return EX_ERR;
  if (n->d) {
    items = hj_list_new (0, FALSE);
    for (i = 0; i < all->v.list.n; i++) {
      Scope *fs = scope_new (scope);
      HjValue *cond = NULL;
      gboolean ok = assign (ctx, n, fs, n->names, n->flag, all->v.list.items[i]) && (cond = eval (ctx, fs, n->d));
      scope_free (fs);
      if (!ok) {
        hj_unref (items);
        hj_unref (all);
        return EX_ERR;
      }
      if (hj_truthy (cond))
        hj_list_push (items, hj_ref (all->v.list.items[i]));
      hj_unref (cond);
    }
    hj_unref (all);
  } else
    items = all;
  for (i = 0; i < items->v.list.n; i++) {
    Scope *body = scope_new (scope);
    HjValue *loop = hj_func_new (HJ_FN_GLOBAL, NULL, NULL, NULL);
    loop->type = HJ_LOOP;
    memset (&loop->v, 0, sizeof loop->v);
    loop->v.loop.items = hj_ref (items);
    loop->v.loop.index0 = i;
    loop->v.loop.depth = 1;
    scope_set (body, "loop", loop);
    /* an iteration allocates a scope and a loop object: charge it accordingly */
    if (!charge (ctx, n, 8) || !assign (ctx, n, body, n->names, n->flag, items->v.list.items[i]))
      st = EX_ERR;
    else
      st = exec_body (ctx, body, n->b);
    scope_free (body);
    if (st == EX_ERR)
      break;
    if (st == EX_BREAK) {
      st = EX_OK;
      break;
    }
    st = EX_OK;
  }
  if (st == EX_OK && items->v.list.n == 0 && n->c)
    st = exec_body (ctx, scope, n->c);
  hj_unref (items);
  return st;
}

static HjValue *
capture (HjCtx *ctx, Scope *scope, const HjNode *body, const HjNode *at)
{
  GString *saved = ctx->out, *buf = g_string_new (NULL);
  ExecStatus st;
  ctx->out = buf;
  st = exec_body (ctx, scope, body);
  ctx->out = saved;
  if (st == EX_ERR) {
    g_string_free (buf, TRUE);
    return NULL;
  }
  return make_string (ctx, at, buf);
}

static ExecStatus
exec_node (HjCtx *ctx, Scope *scope, const HjNode *n)
{
  HjValue *v;
  ExecStatus st = EX_OK;
  switch (n->kind) {
  case HJ_N_TEXT:
    return emit (ctx, n, n->value->v.str.s, n->value->v.str.len) ? EX_OK : EX_ERR;
  case HJ_N_PRINT: {
    GString *tmp;
    gboolean ok;
    if (!(v = eval (ctx, scope, n->a)))
      return EX_ERR;
    if (v->type == HJ_STRING)
      ok = emit (ctx, n, v->v.str.s, v->v.str.len);
    else {
      tmp = g_string_new (NULL);
      ok = hj_append_str (tmp, v, 0);
      if (!ok)
        LIMIT (ctx, n, "value too large or too deeply nested to print (limit %d bytes)", HJ_MAX_STRING);
      else
        ok = emit (ctx, n, tmp->str, tmp->len);
      g_string_free (tmp, TRUE);
    }
    hj_unref (v);
    return ok ? EX_OK : EX_ERR;
  }
  case HJ_N_BODY:
    return exec_body (ctx, scope, n);
  case HJ_N_IF:
    if (!(v = eval (ctx, scope, n->a)))
      return EX_ERR;
    if (hj_truthy (v))
      st = exec_body (ctx, scope, n->b);
    else if (n->c)
      st = n->c->kind == HJ_N_IF ? exec_node (ctx, scope, n->c) : exec_body (ctx, scope, n->c);
    hj_unref (v);
    return st;
  case HJ_N_FOR:
    return exec_for (ctx, scope, n);
  case HJ_N_SET:
    if (!(v = eval (ctx, scope, n->a)))
      return EX_ERR;
    st = assign (ctx, n, scope, n->names, n->flag, v) ? EX_OK : EX_ERR;
    hj_unref (v);
    return st;
  case HJ_N_SET_ATTR: {
    HjValue *ns = lookup (scope, g_ptr_array_index (n->names, 0));
    if (ns->type != HJ_NAMESPACE) {
      hj_unref (ns);
      RUNTIME (ctx, n, "cannot assign attribute on non-namespace object");
      return EX_ERR;
    }
    if (!(v = eval (ctx, scope, n->a))) {
      hj_unref (ns);
      return EX_ERR;
    }
    hj_dict_set (ns, hj_string_new (n->str, -1), v);
    hj_unref (ns);
    return EX_OK;
  }
  case HJ_N_SET_BLOCK:
  case HJ_N_FILTER_BLOCK: {
    HjValue *body = capture (ctx, scope, n->b, n), *res;
    if (!body)
      return EX_ERR;
    res = n->c ? apply_filter_chain (ctx, scope, n->c, body) : hj_ref (body);
    hj_unref (body);
    if (!res)
      return EX_ERR;
    if (n->kind == HJ_N_SET_BLOCK)
      scope_set (scope, g_ptr_array_index (n->names, 0), res);
    else {
      HjValue *s = str_of (ctx, n, res);
      hj_unref (res);
      if (!s)
        return EX_ERR;
      st = emit (ctx, n, s->v.str.s, s->v.str.len) ? EX_OK : EX_ERR;
      hj_unref (s);
    }
    return st;
  }
  case HJ_N_MACRO:
    scope_set (scope, n->str, hj_func_new (HJ_FN_MACRO, n->str, NULL, n));
    return EX_OK;
  case HJ_N_WITH: {
    Scope *inner = scope_new (scope);
    guint i;
    for (i = 0; i < n->names->len && st == EX_OK; i++) {
      if (!(v = eval (ctx, scope, g_ptr_array_index (n->items, i))))
        st = EX_ERR;
      else
        scope_set (inner, g_ptr_array_index (n->names, i), v);
    }
    if (st == EX_OK)
      st = exec_body (ctx, inner, n->b);
    scope_free (inner);
    return st;
  }
  case HJ_N_BREAK:
    return EX_BREAK;
  case HJ_N_CONTINUE:
    return EX_CONTINUE;
  default:
    RUNTIME (ctx, n, "cannot execute this node");
    return EX_ERR;
  }
}

static ExecStatus
exec_body (HjCtx *ctx, Scope *scope, const HjNode *body)
{
  guint i;
  ExecStatus st = EX_OK;
  if (!body)
    return EX_OK;
  if (body->kind != HJ_N_BODY)
    return exec_node (ctx, scope, body);
  if (!enter (ctx, body)) {
    ctx->depth--;
    return EX_ERR;
  }
  for (i = 0; i < body->items->len; i++) {
    st = exec_node (ctx, scope, g_ptr_array_index (body->items, i));
    if (st != EX_OK)
      break;
  }
  ctx->depth--;
  if (st == EX_ERR && !ctx->error)
    RUNTIME (ctx, body, "rendering failed");
  return st;
}

char *
hj_render (const HjNode *root, HjValue *vars, const HjRenderOptions *opts, GError **error)
{
  HjCtx ctx = { 0 };
  Scope rootscope = { NULL, NULL };
  ExecStatus st;
  guint i;
  char *result = NULL;

  rootscope.vars = hj_dict_new (FALSE);
  for (i = 0; i < vars->v.dict.n; i++)
    hj_dict_set (rootscope.vars, hj_ref (vars->v.dict.entries[i].key), hj_ref (vars->v.dict.entries[i].value));
  ctx.out = g_string_new (NULL);
  ctx.root = &rootscope;
  ctx.namespaces = g_ptr_array_new ();
  ctx.opts = opts;

  st = exec_body (&ctx, &rootscope, root);
  if (st == EX_OK && !ctx.error)
    result = g_string_free (ctx.out, FALSE);
  else {
    g_string_free (ctx.out, TRUE);
    if (!ctx.error)
      ctx.error = g_error_new_literal (HONE_ERROR, HONE_ERROR_TEMPLATE_RUNTIME, _("chat template failed to render"));
    g_propagate_error (error, ctx.error);
  }
  /* break cycles through namespaces before dropping the last references */
  for (i = 0; i < ctx.namespaces->len; i++) {
    HjValue *ns = g_ptr_array_index (ctx.namespaces, i);
    gsize k;
    for (k = 0; k < ns->v.dict.n; k++) {
      hj_unref (ns->v.dict.entries[k].key);
      hj_unref (ns->v.dict.entries[k].value);
    }
    ns->v.dict.n = 0;
    hj_unref (ns);
  }
  g_ptr_array_free (ctx.namespaces, TRUE);
  hj_unref (rootscope.vars);
  return result;
}
