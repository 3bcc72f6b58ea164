/* hone-jinja-parser.c — recursive-descent parser for the chat-template Jinja2 subset.
 *
 * Follows jinja2 3.1's Parser method by method (parse_tuple, parse_condexpr,
 * parse_or … parse_unary, parse_postfix, parse_filter_expr) so precedence and
 * quirks match: filters and `is` tests bind tighter than binary operators,
 * `**` is left-associative, `-x|f` applies f to -x, adjacent string literals
 * concatenate.  Nesting is capped (HJ_MAX_PARSE_DEPTH) so hostile input cannot
 * exhaust the C stack.
 */
#include "hone-jinja-private.h"
#include "hone-error.h"
#include "hone-i18n.h"

#include <string.h>

typedef struct {
  GArray *toks;
  guint i;
  GError **error;
  int depth;
  int loop_depth;   /* for break/continue */
  int soft;         /* inside an if/condexpr: unknown filters/tests fail at run time, as in jinja2 */
  gboolean failed;
} Parser;

static HjToken *
cur (Parser *p)
{
  return &g_array_index (p->toks, HjToken, p->i);
}

static HjToken *
look (Parser *p)
{
  guint j = p->i + 1 < p->toks->len ? p->i + 1 : p->i;
  return &g_array_index (p->toks, HjToken, j);
}

static void
advance (Parser *p)
{
  if (cur (p)->type != HJ_TOK_EOF)
    p->i++;
}

static const char *
describe (const HjToken *t)
{
  switch (t->type) {
  case HJ_TOK_EOF: return "end of template";
  case HJ_TOK_TEXT: return "template data";
  case HJ_TOK_VAR_BEGIN: return "begin of print statement";
  case HJ_TOK_VAR_END: return "end of print statement";
  case HJ_TOK_BLOCK_BEGIN: return "begin of statement block";
  case HJ_TOK_BLOCK_END: return "end of statement block";
  case HJ_TOK_NAME: return t->text;
  case HJ_TOK_STRING: return "string";
  case HJ_TOK_INT: return "integer";
  case HJ_TOK_FLOAT: return "float";
  case HJ_TOK_OP: return hj_op_text (t->op);
  }
  return "?";
}

static void *
fail_at (Parser *p, const HjToken *t, const char *fmt, ...) G_GNUC_PRINTF (3, 4);

static void *
fail_at (Parser *p, const HjToken *t, const char *fmt, ...)
{
  va_list ap;
  char *msg;
  if (p->failed)
    return NULL;
  va_start (ap, fmt);
  msg = g_strdup_vprintf (fmt, ap);
  va_end (ap);
  g_set_error (p->error, HONE_ERROR, HONE_ERROR_TEMPLATE_SYNTAX, _("chat template syntax error at %d:%d: %s"),
               t->line, t->col, msg);
  g_free (msg);
  p->failed = TRUE;
  return NULL;
}

static gboolean
is_op (Parser *p, int op)
{
  return cur (p)->type == HJ_TOK_OP && cur (p)->op == op;
}

static gboolean
is_name (Parser *p, const char *name)
{
  return cur (p)->type == HJ_TOK_NAME && strcmp (cur (p)->text, name) == 0;
}

static gboolean
expect_op (Parser *p, int op)
{
  if (!is_op (p, op)) {
    fail_at (p, cur (p), "expected '%s', got '%s'", hj_op_text (op), describe (cur (p)));
    return FALSE;
  }
  advance (p);
  return TRUE;
}

static gboolean
expect_type (Parser *p, HjTokType type, const char *what)
{
  if (cur (p)->type != type) {
    fail_at (p, cur (p), "expected %s, got '%s'", what, describe (cur (p)));
    return FALSE;
  }
  advance (p);
  return TRUE;
}

static gboolean
enter (Parser *p)
{
  if (++p->depth > HJ_MAX_PARSE_DEPTH) {
    if (!p->failed) {
      g_set_error (p->error, HONE_ERROR, HONE_ERROR_TEMPLATE_LIMIT,
                   _("chat template nests too deeply at %d:%d (limit %d)"), cur (p)->line, cur (p)->col,
                   HJ_MAX_PARSE_DEPTH);
      p->failed = TRUE;
    }
    return FALSE;
  }
  return TRUE;
}

static HjNode *
node_new (HjNodeKind kind, const HjToken *at)
{
  HjNode *n = g_new0 (HjNode, 1);
  n->kind = kind;
  n->line = at->line;
  n->col = at->col;
  return n;
}

static void
add_item (HjNode *n, HjNode *item)
{
  if (!n->items)
    n->items = g_ptr_array_new ();
  g_ptr_array_add (n->items, item);
}

static void
add_item2 (HjNode *n, HjNode *item)
{
  if (!n->items2)
    n->items2 = g_ptr_array_new ();
  g_ptr_array_add (n->items2, item);
}

static void
add_name (HjNode *n, const char *name)
{
  if (!n->names)
    n->names = g_ptr_array_new_with_free_func (g_free);
  g_ptr_array_add (n->names, g_strdup (name));
}

/* Iterative: left-deep chains (x[0][0]…, a + b + …) are built by loops and
 * can be far deeper than the C stack allows to recurse. */
void
hj_node_free (HjNode *n)
{
  GPtrArray *todo;
  guint i;
  if (!n)
    return;
  todo = g_ptr_array_new ();
  g_ptr_array_add (todo, n);
  while (todo->len > 0) {
    n = g_ptr_array_steal_index_fast (todo, todo->len - 1);
    if (n->a) g_ptr_array_add (todo, n->a);
    if (n->b) g_ptr_array_add (todo, n->b);
    if (n->c) g_ptr_array_add (todo, n->c);
    if (n->d) g_ptr_array_add (todo, n->d);
    if (n->items) {
      for (i = 0; i < n->items->len; i++)
        g_ptr_array_add (todo, g_ptr_array_index (n->items, i));
      g_ptr_array_free (n->items, TRUE);
    }
    if (n->items2) {
      for (i = 0; i < n->items2->len; i++)
        if (g_ptr_array_index (n->items2, i))
          g_ptr_array_add (todo, g_ptr_array_index (n->items2, i));
      g_ptr_array_free (n->items2, TRUE);
    }
    if (n->names)
      g_ptr_array_free (n->names, TRUE);
    g_free (n->str);
    if (n->value)
      hj_unref (n->value);
    g_free (n);
  }
  g_ptr_array_free (todo, TRUE);
}

/* ---- expressions ---------------------------------------------------------- */

static HjNode *parse_expression (Parser *p, gboolean with_condexpr);
static HjNode *parse_or (Parser *p);
static HjNode *parse_unary (Parser *p, gboolean with_filter);
static HjNode *parse_primary (Parser *p);
static HjNode *parse_postfix (Parser *p, HjNode *node);
static HjNode *parse_filter_expr (Parser *p, HjNode *node);

/* Parses "(args, kw=value)" into node->items / node->names+items2. */
static gboolean
parse_call_args (Parser *p, HjNode *node)
{
  const HjToken *open = cur (p);
  gboolean need_comma = FALSE;
  if (!expect_op (p, HJ_OP_LPAREN))
    return FALSE;
  if (!node->items)
    node->items = g_ptr_array_new ();
  while (!is_op (p, HJ_OP_RPAREN)) {
    if (need_comma) {
      if (!expect_op (p, HJ_OP_COMMA))
        return FALSE;
      if (is_op (p, HJ_OP_RPAREN))
        break;
    }
    if (is_op (p, HJ_OP_MUL) || is_op (p, HJ_OP_POW)) {
      fail_at (p, cur (p), "*args and **kwargs in calls are not supported");
      return FALSE;
    }
    if (cur (p)->type == HJ_TOK_NAME && look (p)->type == HJ_TOK_OP && look (p)->op == HJ_OP_ASSIGN) {
      char *key = g_strdup (cur (p)->text);
      HjNode *value;
      advance (p);
      advance (p);
      value = parse_expression (p, TRUE);
      if (!value) {
        g_free (key);
        return FALSE;
      }
      add_name (node, key);
      g_free (key);
      add_item2 (node, value);
    } else {
      HjNode *arg;
      if (node->names && node->names->len > 0) {
        fail_at (p, open, "invalid syntax for function call expression");
        return FALSE;
      }
      arg = parse_expression (p, TRUE);
      if (!arg)
        return FALSE;
      add_item (node, arg);
    }
    need_comma = TRUE;
  }
  return expect_op (p, HJ_OP_RPAREN);
}

static HjNode *
parse_filter (Parser *p, HjNode *node, gboolean start_inline)
{
  while (is_op (p, HJ_OP_PIPE) || start_inline) {
    HjNode *f;
    const HjToken *t;
    GString *name;
    if (!start_inline)
      advance (p);
    t = cur (p);
    if (t->type != HJ_TOK_NAME) {
      hj_node_free (node);
      return fail_at (p, t, "expected filter name, got '%s'", describe (t));
    }
    name = g_string_new (t->text);
    advance (p);
    while (is_op (p, HJ_OP_DOT)) {
      advance (p);
      if (cur (p)->type != HJ_TOK_NAME) {
        g_string_free (name, TRUE);
        hj_node_free (node);
        return fail_at (p, cur (p), "expected name");
      }
      g_string_append_printf (name, ".%s", cur (p)->text);
      advance (p);
    }
    f = node_new (HJ_N_FILTER, t);
    f->a = node;
    f->str = g_string_free (name, FALSE);
    if (!p->soft && !hj_filter_known (f->str)) {
      fail_at (p, t, "No filter named '%s'.", f->str);
      hj_node_free (f);
      return NULL;
    }
    if (is_op (p, HJ_OP_LPAREN) && !parse_call_args (p, f)) {
      hj_node_free (f);
      return NULL;
    }
    node = f;
    start_inline = FALSE;
  }
  return node;
}

static HjNode *
parse_test (Parser *p, HjNode *node)
{
  const HjToken *is_tok = cur (p);
  HjNode *t;
  gboolean negated = FALSE;
  advance (p);  /* "is" */
  if (is_name (p, "not")) {
    advance (p);
    negated = TRUE;
  }
  if (cur (p)->type != HJ_TOK_NAME) {
    hj_node_free (node);
    return fail_at (p, cur (p), "expected test name, got '%s'", describe (cur (p)));
  }
  t = node_new (HJ_N_TEST, is_tok);
  t->a = node;
  t->str = g_strdup (cur (p)->text);
  t->flag = negated;
  advance (p);
  while (is_op (p, HJ_OP_DOT)) {
    char *joined;
    advance (p);
    if (cur (p)->type != HJ_TOK_NAME) {
      hj_node_free (t);
      return fail_at (p, cur (p), "expected name");
    }
    joined = g_strdup_printf ("%s.%s", t->str, cur (p)->text);
    g_free (t->str);
    t->str = joined;
    advance (p);
  }
  if (!p->soft && !hj_test_known (t->str)) {
    fail_at (p, is_tok, "No test named '%s'.", t->str);
    hj_node_free (t);
    return NULL;
  }
  if (is_op (p, HJ_OP_LPAREN)) {
    if (!parse_call_args (p, t)) {
      hj_node_free (t);
      return NULL;
    }
  } else {
    const HjToken *c = cur (p);
    gboolean arg_start = c->type == HJ_TOK_NAME || c->type == HJ_TOK_STRING || c->type == HJ_TOK_INT ||
                         c->type == HJ_TOK_FLOAT ||
                         (c->type == HJ_TOK_OP && (c->op == HJ_OP_LPAREN || c->op == HJ_OP_LBRACKET ||
                                                   c->op == HJ_OP_LBRACE));
    if (arg_start && !(is_name (p, "else") || is_name (p, "or") || is_name (p, "and"))) {
      HjNode *arg;
      if (is_name (p, "is")) {
        hj_node_free (t);
        return fail_at (p, c, "You cannot chain multiple tests with is");
      }
      arg = parse_primary (p);
      if (arg)
        arg = parse_postfix (p, arg);
      if (!arg) {
        hj_node_free (t);
        return NULL;
      }
      add_item (t, arg);
    }
  }
  return t;
}

static HjNode *
parse_filter_expr (Parser *p, HjNode *node)
{
  for (;;) {
    if (!node)
      return NULL;
    if (is_op (p, HJ_OP_PIPE))
      node = parse_filter (p, node, FALSE);
    else if (is_name (p, "is"))
      node = parse_test (p, node);
    else if (is_op (p, HJ_OP_LPAREN)) {
      HjNode *call = node_new (HJ_N_CALL, cur (p));
      call->a = node;
      if (!parse_call_args (p, call)) {
        hj_node_free (call);
        return NULL;
      }
      node = call;
    } else
      return node;
  }
}

static HjNode *
parse_subscribed (Parser *p)
{
  const HjToken *start = cur (p);
  HjNode *args[3] = { NULL, NULL, NULL };
  HjNode *slice;
  if (is_op (p, HJ_OP_COLON))
    advance (p);
  else {
    HjNode *node = parse_expression (p, TRUE);
    if (!node)
      return NULL;
    if (!is_op (p, HJ_OP_COLON))
      return node;
    advance (p);
    args[0] = node;
  }
  if (!is_op (p, HJ_OP_COLON) && !is_op (p, HJ_OP_RBRACKET) && !is_op (p, HJ_OP_COMMA)) {
    if (!(args[1] = parse_expression (p, TRUE)))
      goto error;
  }
  if (is_op (p, HJ_OP_COLON)) {
    advance (p);
    if (!is_op (p, HJ_OP_RBRACKET) && !is_op (p, HJ_OP_COMMA)) {
      if (!(args[2] = parse_expression (p, TRUE)))
        goto error;
    }
  }
  slice = node_new (HJ_N_SLICE, start);
  slice->a = args[0];
  slice->b = args[1];
  slice->c = args[2];
  return slice;

error:
  hj_node_free (args[0]);
  hj_node_free (args[1]);
  return NULL;
}

static HjNode *
parse_postfix (Parser *p, HjNode *node)
{
  for (;;) {
    if (!node)
      return NULL;
    if (is_op (p, HJ_OP_DOT)) {
      const HjToken *dot = cur (p), *t;
      advance (p);
      t = cur (p);
      if (t->type == HJ_TOK_NAME) {
        HjNode *g = node_new (HJ_N_GETATTR, dot);
        g->a = node;
        g->str = g_strdup (t->text);
        advance (p);
        node = g;
      } else if (t->type == HJ_TOK_INT) {
        HjNode *g = node_new (HJ_N_GETITEM, dot);
        g->a = node;
        g->b = node_new (HJ_N_CONST, t);
        g->b->value = hj_int (t->ival);
        advance (p);
        node = g;
      } else {
        hj_node_free (node);
        return fail_at (p, t, "expected name or number");
      }
    } else if (is_op (p, HJ_OP_LBRACKET)) {
      const HjToken *open = cur (p);
      HjNode *g = node_new (HJ_N_GETITEM, open), *tuple = NULL, *first = NULL;
      int count = 0;
      g->a = node;
      advance (p);
      while (!is_op (p, HJ_OP_RBRACKET)) {
        HjNode *arg;
        if (count > 0 && !expect_op (p, HJ_OP_COMMA)) {
          hj_node_free (first);
          hj_node_free (tuple);
          hj_node_free (g);
          return NULL;
        }
        arg = parse_subscribed (p);
        if (!arg) {
          hj_node_free (first);
          hj_node_free (tuple);
          hj_node_free (g);
          return NULL;
        }
        if (count == 0)
          first = arg;
        else {
          if (!tuple) {
            tuple = node_new (HJ_N_TUPLE, open);
            add_item (tuple, first);
            first = NULL;
          }
          add_item (tuple, arg);
        }
        count++;
      }
      advance (p);
      if (count == 0)
        tuple = node_new (HJ_N_TUPLE, open);
      g->b = tuple ? tuple : first;
      node = g;
    } else if (is_op (p, HJ_OP_LPAREN)) {
      HjNode *call = node_new (HJ_N_CALL, cur (p));
      call->a = node;
      if (!parse_call_args (p, call)) {
        hj_node_free (call);
        return NULL;
      }
      node = call;
    } else
      return node;
  }
}

/* parse_tuple: comma-separated expressions; a single one without comma is returned as is. */
static HjNode *
parse_tuple (Parser *p, gboolean simplified, gboolean with_condexpr, const char *extra_end,
             gboolean explicit_parens)
{
  const HjToken *start = cur (p);
  HjNode *tuple = NULL, *first = NULL;
  gboolean is_tuple = FALSE;
  int count = 0;
  for (;;) {
    const HjToken *c;
    HjNode *item;
    if (count > 0 && !expect_op (p, HJ_OP_COMMA))
      goto error;
    c = cur (p);
    if (c->type == HJ_TOK_VAR_END || c->type == HJ_TOK_BLOCK_END || (c->type == HJ_TOK_OP && c->op == HJ_OP_RPAREN) ||
        (extra_end && is_name (p, extra_end)))
      break;
    item = simplified ? parse_primary (p) : parse_expression (p, with_condexpr);
    if (!item)
      goto error;
    if (count == 0)
      first = item;
    else
      add_item (tuple, item);
    count++;
    if (is_op (p, HJ_OP_COMMA)) {
      is_tuple = TRUE;
      if (!tuple) {
        tuple = node_new (HJ_N_TUPLE, start);
        add_item (tuple, first);
        first = NULL;
      }
    } else
      break;
  }
  if (!is_tuple) {
    if (first)
      return first;
    if (!explicit_parens)
      return fail_at (p, cur (p), "Expected an expression, got '%s'", describe (cur (p)));
    return node_new (HJ_N_TUPLE, start);
  }
  return tuple;

error:
  hj_node_free (first);
  hj_node_free (tuple);
  return NULL;
}

static HjNode *
parse_primary (Parser *p)
{
  const HjToken *t = cur (p);
  HjNode *n;
  if (!enter (p))
    return NULL;
  switch (t->type) {
  case HJ_TOK_NAME:
    n = node_new (HJ_N_CONST, t);
    if (!strcmp (t->text, "true") || !strcmp (t->text, "True"))
      n->value = hj_bool (TRUE);
    else if (!strcmp (t->text, "false") || !strcmp (t->text, "False"))
      n->value = hj_bool (FALSE);
    else if (!strcmp (t->text, "none") || !strcmp (t->text, "None"))
      n->value = hj_none ();
    else {
      n->kind = HJ_N_NAME;
      n->str = g_strdup (t->text);
    }
    advance (p);
    break;
  case HJ_TOK_STRING: {
    GString *buf = g_string_new_len (t->text, t->len);
    advance (p);
    while (cur (p)->type == HJ_TOK_STRING) {
      g_string_append_len (buf, cur (p)->text, cur (p)->len);
      advance (p);
    }
    n = node_new (HJ_N_CONST, t);
    n->value = hj_string_take (buf->str, buf->len);
    g_string_free (buf, FALSE);
    break;
  }
  case HJ_TOK_INT:
    n = node_new (HJ_N_CONST, t);
    n->value = hj_int (t->ival);
    advance (p);
    break;
  case HJ_TOK_FLOAT:
    n = node_new (HJ_N_CONST, t);
    n->value = hj_float (t->fval);
    advance (p);
    break;
  case HJ_TOK_OP:
    if (t->op == HJ_OP_LPAREN) {
      advance (p);
      n = parse_tuple (p, FALSE, TRUE, NULL, TRUE);
      if (n && !expect_op (p, HJ_OP_RPAREN)) {
        hj_node_free (n);
        n = NULL;
      }
      break;
    }
    if (t->op == HJ_OP_LBRACKET) {
      n = node_new (HJ_N_LIST, t);
      n->items = g_ptr_array_new ();
      advance (p);
      while (!is_op (p, HJ_OP_RBRACKET)) {
        HjNode *item;
        if (n->items->len > 0 && !expect_op (p, HJ_OP_COMMA))
          goto fail;
        if (is_op (p, HJ_OP_RBRACKET))
          break;
        if (!(item = parse_expression (p, TRUE)))
          goto fail;
        add_item (n, item);
      }
      advance (p);
      break;
    }
    if (t->op == HJ_OP_LBRACE) {
      n = node_new (HJ_N_DICT, t);
      n->items = g_ptr_array_new ();
      n->items2 = g_ptr_array_new ();
      advance (p);
      while (!is_op (p, HJ_OP_RBRACE)) {
        HjNode *key, *value;
        if (n->items->len > 0 && !expect_op (p, HJ_OP_COMMA))
          goto fail;
        if (is_op (p, HJ_OP_RBRACE))
          break;
        if (!(key = parse_expression (p, TRUE)))
          goto fail;
        add_item (n, key);
        if (!expect_op (p, HJ_OP_COLON))
          goto fail;
        if (!(value = parse_expression (p, TRUE)))
          goto fail;
        add_item2 (n, value);
      }
      advance (p);
      break;
    }
    /* fall through */
  default:
    p->depth--;
    return fail_at (p, t, "unexpected '%s'", describe (t));
  }
  p->depth--;
  return n;

fail:
  p->depth--;
  hj_node_free (n);
  return NULL;
}

static HjNode *
parse_unary (Parser *p, gboolean with_filter)
{
  const HjToken *t = cur (p);
  HjNode *node;
  if (!enter (p))
    return NULL;
  if (is_op (p, HJ_OP_SUB) || is_op (p, HJ_OP_ADD)) {
    HjNode *inner;
    int op = t->op == HJ_OP_SUB ? HJ_OP_NEG : HJ_OP_POS;
    advance (p);
    inner = parse_unary (p, FALSE);
    if (!inner) {
      p->depth--;
      return NULL;
    }
    node = node_new (HJ_N_UNARY, t);
    node->op = op;
    node->a = inner;
  } else
    node = parse_primary (p);
  node = parse_postfix (p, node);
  if (with_filter)
    node = parse_filter_expr (p, node);
  p->depth--;
  return node;
}

static HjNode *
binop (int op, const HjToken *t, HjNode *a, HjNode *b)
{
  HjNode *n = node_new (HJ_N_BINOP, t);
  n->op = op;
  n->a = a;
  n->b = b;
  return n;
}

static HjNode *
parse_pow (Parser *p)
{
  HjNode *left = parse_unary (p, TRUE);
  while (left && is_op (p, HJ_OP_POW)) {
    const HjToken *t = cur (p);
    HjNode *right;
    advance (p);
    if (!(right = parse_unary (p, TRUE))) {
      hj_node_free (left);
      return NULL;
    }
    left = binop (HJ_OP_POW, t, left, right);
  }
  return left;
}

static HjNode *
parse_math2 (Parser *p)
{
  HjNode *left = parse_pow (p);
  while (left && (is_op (p, HJ_OP_MUL) || is_op (p, HJ_OP_DIV) || is_op (p, HJ_OP_FLOORDIV) || is_op (p, HJ_OP_MOD))) {
    const HjToken *t = cur (p);
    int op = t->op;
    HjNode *right;
    advance (p);
    if (!(right = parse_pow (p))) {
      hj_node_free (left);
      return NULL;
    }
    left = binop (op, t, left, right);
  }
  return left;
}

static HjNode *
parse_concat (Parser *p)
{
  const HjToken *t = cur (p);
  HjNode *first = parse_math2 (p), *cat = NULL;
  while (first && is_op (p, HJ_OP_TILDE)) {
    HjNode *next;
    advance (p);
    if (!(next = parse_math2 (p))) {
      hj_node_free (cat ? cat : first);
      return NULL;
    }
    if (!cat) {
      cat = node_new (HJ_N_CONCAT, t);
      add_item (cat, first);
    }
    add_item (cat, next);
  }
  return cat ? cat : first;
}

static HjNode *
parse_math1 (Parser *p)
{
  HjNode *left = parse_concat (p);
  while (left && (is_op (p, HJ_OP_ADD) || is_op (p, HJ_OP_SUB))) {
    const HjToken *t = cur (p);
    int op = t->op;
    HjNode *right;
    advance (p);
    if (!(right = parse_concat (p))) {
      hj_node_free (left);
      return NULL;
    }
    left = binop (op, t, left, right);
  }
  return left;
}

static HjNode *
parse_compare (Parser *p)
{
  const HjToken *t = cur (p);
  HjNode *expr = parse_math1 (p), *cmp = NULL;
  for (;;) {
    int op;
    HjNode *operand;
    if (!expr)
      return NULL;
    if (cur (p)->type == HJ_TOK_OP &&
        (cur (p)->op == HJ_OP_EQ || cur (p)->op == HJ_OP_NE || cur (p)->op == HJ_OP_LT || cur (p)->op == HJ_OP_LE ||
         cur (p)->op == HJ_OP_GT || cur (p)->op == HJ_OP_GE)) {
      op = cur (p)->op;
      advance (p);
    } else if (is_name (p, "in")) {
      op = HJ_OP_IN;
      advance (p);
    } else if (is_name (p, "not") && look (p)->type == HJ_TOK_NAME && !strcmp (look (p)->text, "in")) {
      op = HJ_OP_NOTIN;
      advance (p);
      advance (p);
    } else
      break;
    if (!(operand = parse_math1 (p))) {
      hj_node_free (cmp ? cmp : expr);
      return NULL;
    }
    if (!cmp) {
      cmp = node_new (HJ_N_COMPARE, t);
      cmp->a = expr;
      cmp->names = g_ptr_array_new ();
    }
    g_ptr_array_add (cmp->names, GINT_TO_POINTER (op));
    add_item (cmp, operand);
  }
  return cmp ? cmp : expr;
}

static HjNode *
parse_not (Parser *p)
{
  if (is_name (p, "not")) {
    const HjToken *t = cur (p);
    HjNode *inner, *n;
    if (!enter (p))
      return NULL;
    advance (p);
    inner = parse_not (p);
    p->depth--;
    if (!inner)
      return NULL;
    n = node_new (HJ_N_UNARY, t);
    n->op = HJ_OP_NOT;
    n->a = inner;
    return n;
  }
  return parse_compare (p);
}

static HjNode *
parse_and (Parser *p)
{
  HjNode *left = parse_not (p);
  while (left && is_name (p, "and")) {
    const HjToken *t = cur (p);
    HjNode *right, *n;
    advance (p);
    if (!(right = parse_not (p))) {
      hj_node_free (left);
      return NULL;
    }
    n = node_new (HJ_N_AND, t);
    n->a = left;
    n->b = right;
    left = n;
  }
  return left;
}

static HjNode *
parse_or (Parser *p)
{
  HjNode *left = parse_and (p);
  while (left && is_name (p, "or")) {
    const HjToken *t = cur (p);
    HjNode *right, *n;
    advance (p);
    if (!(right = parse_and (p))) {
      hj_node_free (left);
      return NULL;
    }
    n = node_new (HJ_N_OR, t);
    n->a = left;
    n->b = right;
    left = n;
  }
  return left;
}

static HjNode *
parse_condexpr (Parser *p)
{
  const HjToken *t = cur (p);
  HjNode *expr1 = parse_or (p);
  while (expr1 && is_name (p, "if")) {
    HjNode *expr2, *expr3 = NULL, *n;
    if (!enter (p)) {
      hj_node_free (expr1);
      return NULL;
    }
    p->soft++;
    advance (p);
    expr2 = parse_or (p);
    if (expr2 && is_name (p, "else")) {
      advance (p);
      if (!(expr3 = parse_condexpr (p))) {
        hj_node_free (expr2);
        expr2 = NULL;
      }
    }
    p->soft--;
    p->depth--;
    if (!expr2) {
      hj_node_free (expr1);
      return NULL;
    }
    n = node_new (HJ_N_CONDEXPR, t);
    n->a = expr2;   /* condition */
    n->b = expr1;   /* value when true */
    n->c = expr3;   /* value when false (NULL: undefined) */
    expr1 = n;
  }
  return expr1;
}

static HjNode *
parse_expression (Parser *p, gboolean with_condexpr)
{
  return with_condexpr ? parse_condexpr (p) : parse_or (p);
}

/* ---- statements ----------------------------------------------------------- */

static HjNode *parse_body (Parser *p, const char *const *end_names, const char *block, char **which);

static gboolean
expect_block_end (Parser *p)
{
  return expect_type (p, HJ_TOK_BLOCK_END, "end of statement block");
}

/* Assignment target: NAME or NAME, NAME… (optionally parenthesised). */
static HjNode *
parse_targets (Parser *p, const HjToken *at, const char *extra_end)
{
  HjNode *n = node_new (HJ_N_SET, at);
  gboolean paren = FALSE;
  n->names = g_ptr_array_new_with_free_func (g_free);
  if (is_op (p, HJ_OP_LPAREN)) {
    paren = TRUE;
    n->flag = TRUE;
    advance (p);
  }
  for (;;) {
    const HjToken *t = cur (p);
    if (t->type != HJ_TOK_NAME || !strcmp (t->text, "true") || !strcmp (t->text, "false") ||
        !strcmp (t->text, "none") || !strcmp (t->text, "True") || !strcmp (t->text, "False") ||
        !strcmp (t->text, "None")) {
      fail_at (p, t, "can't assign to '%s'", describe (t));
      hj_node_free (n);
      return NULL;
    }
    g_ptr_array_add (n->names, g_strdup (t->text));
    advance (p);
    if (!is_op (p, HJ_OP_COMMA))
      break;
    n->flag = TRUE;
    advance (p);
    /* jinja2's is_tuple_end: `for a, in x` is fine, `set a, = 1` is not */
    if ((paren && is_op (p, HJ_OP_RPAREN)) || (extra_end && is_name (p, extra_end)) ||
        cur (p)->type == HJ_TOK_BLOCK_END)
      break;
  }
  if (paren && !expect_op (p, HJ_OP_RPAREN)) {
    hj_node_free (n);
    return NULL;
  }
  return n;
}

static HjNode *
parse_if (Parser *p, const HjToken *at)
{
  static const char *const ends[] = { "elif", "else", "endif", NULL };
  static const char *const endif[] = { "endif", NULL };
  HjNode *n = node_new (HJ_N_IF, at);
  char *which = NULL;
  p->soft++;
  if (!(n->a = parse_tuple (p, FALSE, FALSE, NULL, FALSE)) || !expect_block_end (p) ||
      !(n->b = parse_body (p, ends, "if", &which)))
    goto fail;
  if (!strcmp (which, "elif")) {
    if (!(n->c = parse_if (p, at)))
      goto fail;
  } else if (!strcmp (which, "else")) {
    g_free (which);
    which = NULL;
    if (!expect_block_end (p) || !(n->c = parse_body (p, endif, "if", &which)) || !expect_block_end (p))
      goto fail;
  } else if (!expect_block_end (p))
    goto fail;
  g_free (which);
  p->soft--;
  return n;

fail:
  g_free (which);
  p->soft--;
  hj_node_free (n);
  return NULL;
}

static HjNode *
parse_for (Parser *p, const HjToken *at)
{
  static const char *const ends[] = { "endfor", "else", NULL };
  static const char *const endfor[] = { "endfor", NULL };
  HjNode *n = node_new (HJ_N_FOR, at), *targets;
  char *which = NULL;
  if (!(targets = parse_targets (p, cur (p), "in")))
    goto fail;
  n->names = targets->names;
  n->flag = targets->flag;
  targets->names = NULL;
  hj_node_free (targets);
  if (!is_name (p, "in")) {
    fail_at (p, cur (p), "expected 'in', got '%s'", describe (cur (p)));
    goto fail;
  }
  advance (p);
  if (!(n->a = parse_tuple (p, FALSE, FALSE, "recursive", FALSE)))
    goto fail;
  if (is_name (p, "if")) {
    advance (p);
    if (!(n->d = parse_expression (p, TRUE)))
      goto fail;
  }
  if (is_name (p, "recursive")) {
    fail_at (p, cur (p), "recursive for loops are not supported");
    goto fail;
  }
  if (!expect_block_end (p))
    goto fail;
  p->loop_depth++;
  n->b = parse_body (p, ends, "for", &which);
  p->loop_depth--;
  if (!n->b)
    goto fail;
  if (!strcmp (which, "else")) {
    g_free (which);
    which = NULL;
    if (!expect_block_end (p) || !(n->c = parse_body (p, endfor, "for", &which)))
      goto fail;
  }
  g_free (which);
  if (!expect_block_end (p)) {
    hj_node_free (n);
    return NULL;
  }
  return n;

fail:
  g_free (which);
  hj_node_free (n);
  return NULL;
}

static HjNode *
parse_set (Parser *p, const HjToken *at)
{
  static const char *const endset[] = { "endset", NULL };
  HjNode *n;
  char *which = NULL;
  if (cur (p)->type == HJ_TOK_NAME && look (p)->type == HJ_TOK_OP && look (p)->op == HJ_OP_DOT) {
    n = node_new (HJ_N_SET_ATTR, at);
    add_name (n, cur (p)->text);
    advance (p);
    advance (p);
    if (cur (p)->type != HJ_TOK_NAME) {
      fail_at (p, cur (p), "expected name, got '%s'", describe (cur (p)));
      hj_node_free (n);
      return NULL;
    }
    n->str = g_strdup (cur (p)->text);
    advance (p);
    if (!expect_op (p, HJ_OP_ASSIGN) || !(n->a = parse_tuple (p, FALSE, TRUE, NULL, FALSE)) || !expect_block_end (p)) {
      hj_node_free (n);
      return NULL;
    }
    return n;
  }
  if (cur (p)->type != HJ_TOK_NAME)
    return fail_at (p, cur (p), "Expected an expression, got '%s'", describe (cur (p)));
  if (!(n = parse_targets (p, at, NULL)))
    return NULL;
  if (is_op (p, HJ_OP_ASSIGN)) {
    advance (p);
    if (!(n->a = parse_tuple (p, FALSE, TRUE, NULL, FALSE)) || !expect_block_end (p)) {
      hj_node_free (n);
      return NULL;
    }
    return n;
  }
  /* block set: {% set name | filters %}…{% endset %} */
  n->kind = HJ_N_SET_BLOCK;
  if (n->flag) {
    fail_at (p, at, "block set needs a single name");
    hj_node_free (n);
    return NULL;
  }
  if (is_op (p, HJ_OP_PIPE)) {
    /* the filter chain is applied to a placeholder (NULL) value */
    HjNode *placeholder = node_new (HJ_N_CONST, cur (p));
    placeholder->value = hj_string_new ("", 0);
    n->c = parse_filter (p, placeholder, FALSE);
    if (!n->c) {
      hj_node_free (n);
      return NULL;
    }
  }
  if (!expect_block_end (p) || !(n->b = parse_body (p, endset, "set", &which)) || !expect_block_end (p)) {
    g_free (which);
    hj_node_free (n);
    return NULL;
  }
  g_free (which);
  return n;
}

static HjNode *
parse_macro (Parser *p, const HjToken *at)
{
  static const char *const endmacro[] = { "endmacro", NULL };
  HjNode *n = node_new (HJ_N_MACRO, at);
  char *which = NULL;
  int saved_loop = p->loop_depth;
  if (cur (p)->type != HJ_TOK_NAME) {
    fail_at (p, cur (p), "expected macro name");
    goto fail;
  }
  n->str = g_strdup (cur (p)->text);
  advance (p);
  if (!expect_op (p, HJ_OP_LPAREN))
    goto fail;
  n->names = g_ptr_array_new_with_free_func (g_free);
  n->items2 = g_ptr_array_new ();
  while (!is_op (p, HJ_OP_RPAREN)) {
    HjNode *def = NULL;
    if (n->names->len > 0 && !expect_op (p, HJ_OP_COMMA))
      goto fail;
    if (cur (p)->type != HJ_TOK_NAME) {
      fail_at (p, cur (p), "expected argument name, got '%s'", describe (cur (p)));
      goto fail;
    }
    g_ptr_array_add (n->names, g_strdup (cur (p)->text));
    advance (p);
    if (is_op (p, HJ_OP_ASSIGN)) {
      advance (p);
      if (!(def = parse_expression (p, TRUE)))
        goto fail;
    } else if (n->items2->len > 0 && g_ptr_array_index (n->items2, n->items2->len - 1) != NULL) {
      fail_at (p, cur (p), "non-default argument follows default argument");
      g_ptr_array_add (n->items2, NULL);
      goto fail;
    }
    g_ptr_array_add (n->items2, def);
  }
  advance (p);
  if (!expect_block_end (p))
    goto fail;
  p->loop_depth = 0;
  n->b = parse_body (p, endmacro, "macro", &which);
  p->loop_depth = saved_loop;
  if (!n->b || !expect_block_end (p))
    goto fail;
  g_free (which);
  return n;

fail:
  p->loop_depth = saved_loop;
  g_free (which);
  hj_node_free (n);
  return NULL;
}

static HjNode *
parse_with (Parser *p, const HjToken *at)
{
  static const char *const endwith[] = { "endwith", NULL };
  HjNode *n = node_new (HJ_N_WITH, at);
  char *which = NULL;
  n->names = g_ptr_array_new_with_free_func (g_free);
  n->items = g_ptr_array_new ();
  while (cur (p)->type != HJ_TOK_BLOCK_END) {
    HjNode *value;
    if (n->names->len > 0 && !expect_op (p, HJ_OP_COMMA))
      goto fail;
    if (cur (p)->type != HJ_TOK_NAME) {
      fail_at (p, cur (p), "expected name, got '%s'", describe (cur (p)));
      goto fail;
    }
    g_ptr_array_add (n->names, g_strdup (cur (p)->text));
    advance (p);
    if (!expect_op (p, HJ_OP_ASSIGN) || !(value = parse_expression (p, TRUE)))
      goto fail;
    add_item (n, value);
  }
  advance (p);
  if (!(n->b = parse_body (p, endwith, "with", &which)) || !expect_block_end (p))
    goto fail;
  g_free (which);
  return n;

fail:
  g_free (which);
  hj_node_free (n);
  return NULL;
}

static HjNode *
parse_filter_block (Parser *p, const HjToken *at)
{
  static const char *const endfilter[] = { "endfilter", NULL };
  HjNode *n = node_new (HJ_N_FILTER_BLOCK, at), *placeholder = node_new (HJ_N_CONST, at);
  char *which = NULL;
  placeholder->value = hj_string_new ("", 0);
  if (!(n->c = parse_filter (p, placeholder, TRUE)) || !expect_block_end (p) ||
      !(n->b = parse_body (p, endfilter, "filter", &which)) || !expect_block_end (p)) {
    g_free (which);
    hj_node_free (n);
    return NULL;
  }
  g_free (which);
  return n;
}

static HjNode *
parse_statement (Parser *p)
{
  const HjToken *at = cur (p), *t;
  HjNode *n = NULL;
  advance (p);  /* BLOCK_BEGIN */
  t = cur (p);
  if (t->type != HJ_TOK_NAME)
    return fail_at (p, t, "tag name expected");
  if (!enter (p))
    return NULL;
  advance (p);
  if (!strcmp (t->text, "if"))
    n = parse_if (p, at);
  else if (!strcmp (t->text, "for"))
    n = parse_for (p, at);
  else if (!strcmp (t->text, "set"))
    n = parse_set (p, at);
  else if (!strcmp (t->text, "macro"))
    n = parse_macro (p, at);
  else if (!strcmp (t->text, "with"))
    n = parse_with (p, at);
  else if (!strcmp (t->text, "filter"))
    n = parse_filter_block (p, at);
  else if (!strcmp (t->text, "break") || !strcmp (t->text, "continue")) {
    if (p->loop_depth == 0)
      fail_at (p, t, "'%s' outside of a loop", t->text);
    else if (expect_block_end (p))
      n = node_new (t->text[0] == 'b' ? HJ_N_BREAK : HJ_N_CONTINUE, at);
  } else if (!strcmp (t->text, "generation")) {
    /* transformers' AssistantTracker tag: renders its body unchanged */
    static const char *const endgen[] = { "endgeneration", NULL };
    char *which = NULL;
    if (expect_block_end (p) && (n = parse_body (p, endgen, "generation", &which)) && !expect_block_end (p)) {
      hj_node_free (n);
      n = NULL;
    }
    g_free (which);
  } else
    fail_at (p, t, "Encountered unknown tag '%s'.", t->text);
  p->depth--;
  return n;
}

/* Statements until EOF (end_names NULL) or a block tag named in end_names;
 * on return the cursor is after that tag's name and *which holds it. */
static HjNode *
parse_body (Parser *p, const char *const *end_names, const char *block, char **which)
{
  HjNode *body = node_new (HJ_N_BODY, cur (p));
  body->items = g_ptr_array_new ();
  for (;;) {
    const HjToken *t = cur (p);
    HjNode *stmt = NULL;
    switch (t->type) {
    case HJ_TOK_EOF:
      if (end_names) {
        GString *want = g_string_new (NULL);
        int i;
        for (i = 0; end_names[i]; i++)
          g_string_append_printf (want, "%s'%s'", i ? " or " : "", end_names[i]);
        fail_at (p, t, "Unexpected end of template. Jinja was looking for the following tags: %s. "
                 "The innermost block that needs to be closed is '%s'.", want->str, block);
        g_string_free (want, TRUE);
        hj_node_free (body);
        return NULL;
      }
      return body;
    case HJ_TOK_TEXT:
      stmt = node_new (HJ_N_TEXT, t);
      stmt->value = hj_string_new (t->text, t->len);
      advance (p);
      break;
    case HJ_TOK_VAR_BEGIN:
      advance (p);
      stmt = node_new (HJ_N_PRINT, t);
      if (!(stmt->a = parse_tuple (p, FALSE, TRUE, NULL, FALSE)) ||
          !expect_type (p, HJ_TOK_VAR_END, "end of print statement")) {
        hj_node_free (stmt);
        hj_node_free (body);
        return NULL;
      }
      break;
    case HJ_TOK_BLOCK_BEGIN: {
      const HjToken *name = look (p);
      if (end_names && name->type == HJ_TOK_NAME) {
        int i;
        for (i = 0; end_names[i]; i++)
          if (!strcmp (name->text, end_names[i])) {
            advance (p);
            advance (p);
            *which = g_strdup (end_names[i]);
            return body;
          }
      }
      stmt = parse_statement (p);
      if (!stmt) {
        if (!p->failed)
          fail_at (p, t, "invalid statement");
        hj_node_free (body);
        return NULL;
      }
      break;
    }
    default:
      fail_at (p, t, "unexpected '%s'", describe (t));
      hj_node_free (body);
      return NULL;
    }
    g_ptr_array_add (body->items, stmt);
  }
}

HjNode *
hj_parse (const char *source, gsize len, GError **error)
{
  Parser p = { 0 };
  HjNode *root;
  p.toks = hj_lex (source, len, error);
  if (!p.toks)
    return NULL;
  p.error = error;
  root = parse_body (&p, NULL, NULL, NULL);
  hj_tokens_free (p.toks);
  if (p.failed) {
    hj_node_free (root);
    return NULL;
  }
  return root;
}
