/* hone-jinja-private.h — internals of the Jinja2-subset chat-template interpreter.
 *
 * Pipeline: hone-jinja-lexer.c turns the source into tokens (whitespace
 * control, trim_blocks and lstrip_blocks applied exactly as jinja2's lexer
 * does), hone-jinja-parser.c builds an AST, hone-jinja-eval.c walks it with
 * Python/jinja2 value semantics from hone-jinja-value.c.  Everything is
 * bounded: parse depth, evaluation depth, a step budget that also charges for
 * every byte/element created, and an output cap.
 */
#pragma once

#include <glib.h>
#include <json-glib/json-glib.h>

G_BEGIN_DECLS

/* ---- limits --------------------------------------------------------------- */
#define HJ_MAX_PARSE_DEPTH   200        /* nested expressions/blocks in the parser */
#define HJ_MAX_EVAL_DEPTH    400        /* nested evaluation incl. macro calls */
#define HJ_MAX_DATA_DEPTH    256        /* nesting of values when printing/comparing */
#define HJ_MAX_STEPS         (2 * 1000 * 1000)  /* work units per render (real templates use ~100 per message) */
#define HJ_MAX_STRING        (4 * 1024 * 1024)  /* bytes in any one string or the output */
#define HJ_MAX_ITEMS         (1024 * 1024)      /* elements in any one list */
#define HJ_MAX_RANGE         100000             /* as jinja2's sandbox MAX_RANGE */

/* ---- values --------------------------------------------------------------- */
typedef enum {
  HJ_UNDEFINED,
  HJ_NONE,
  HJ_BOOL,
  HJ_INT,
  HJ_FLOAT,
  HJ_STRING,
  HJ_LIST,       /* also tuples (is_tuple) */
  HJ_DICT,
  HJ_NAMESPACE,  /* jinja2.utils.Namespace: a dict with settable attributes */
  HJ_FUNC,       /* global function, bound method, macro */
  HJ_LOOP,       /* the `loop` object of a for loop */
} HjType;

typedef struct _HjValue HjValue;
typedef struct _HjNode HjNode;
typedef struct _HjCtx HjCtx;

typedef struct {
  HjValue *key;
  HjValue *value;
} HjEntry;

typedef enum {
  HJ_FN_GLOBAL,   /* name: range, namespace, dict, raise_exception, strftime_now, cycler, joiner */
  HJ_FN_METHOD,   /* name on self */
  HJ_FN_MACRO,    /* node */
  HJ_FN_UNSAFE,   /* an attribute the immutable sandbox refuses (append, update, …) */
} HjFuncKind;

struct _HjValue {
  int refcount;
  HjType type;
  union {
    gboolean b;
    gint64 i;
    double f;
    struct {
      char *s;
      gsize len;      /* bytes */
      gsize nchars;   /* code points */
    } str;
    struct {
      HjValue **items;
      gsize n, cap;
      gboolean is_tuple;
    } list;
    struct {
      HjEntry *entries;
      gsize n, cap;
    } dict;          /* HJ_DICT and HJ_NAMESPACE */
    struct {
      HjFuncKind kind;
      const char *name;
      HjValue *self;      /* bound method / unsafe: the object */
      const HjNode *macro;
    } func;
    struct {
      HjValue *items;     /* list being iterated (after the for-filter) */
      gsize index0;
      int depth;          /* 1-based */
    } loop;
  } v;
  char *undef_hint;  /* HJ_UNDEFINED: message used when it is misused */
};

HjValue *hj_ref (HjValue *v);
void     hj_unref (HjValue *v);
#define hj_clear(pp) G_STMT_START { if (*(pp)) { hj_unref (*(pp)); *(pp) = NULL; } } G_STMT_END

HjValue *hj_undefined (const char *hint_fmt, ...) G_GNUC_PRINTF (1, 2);
HjValue *hj_none (void);
HjValue *hj_bool (gboolean b);
HjValue *hj_int (gint64 i);
HjValue *hj_float (double f);
HjValue *hj_string_take (char *s, gsize len);       /* s must be valid UTF-8 */
HjValue *hj_string_new (const char *s, gssize len);
HjValue *hj_list_new (gsize reserve, gboolean is_tuple);
void     hj_list_push (HjValue *list, HjValue *item);   /* takes item */
HjValue *hj_dict_new (gboolean is_namespace);
void     hj_dict_set (HjValue *dict, HjValue *key, HjValue *value);  /* takes both */
HjValue *hj_dict_get (HjValue *dict, const HjValue *key);            /* borrowed or NULL */
HjValue *hj_dict_get_str (HjValue *dict, const char *key);           /* borrowed or NULL */
HjValue *hj_func_new (HjFuncKind kind, const char *name, HjValue *self, const HjNode *macro);

HjValue *hj_from_json (JsonNode *node, int depth);

gboolean hj_truthy (const HjValue *v);
const char *hj_type_name (const HjValue *v);   /* Python's type name, for messages */
gboolean hj_is_number (const HjValue *v);      /* bool, int, float */
double   hj_as_double (const HjValue *v);

/* Python str()/repr() into buf; FALSE on depth overflow. */
gboolean hj_append_str (GString *buf, const HjValue *v, int depth);
gboolean hj_append_repr (GString *buf, const HjValue *v, int depth);
void     hj_format_float (GString *buf, double f);
void     hj_append_repr_string (GString *buf, const char *s, gsize len);

/* Values visited by hj_equal/hj_compare/hj_append_repr since the evaluator
 * last collected it: deep structures can share items, so their cost is not
 * proportional to what creating them cost and is charged afterwards. */
extern __thread gint64 hj_value_work;

/* Python ==; comparison: returns FALSE (type error) when not orderable. */
gboolean hj_equal (const HjValue *a, const HjValue *b, int depth);
gboolean hj_compare (const HjValue *a, const HjValue *b, int *result, int depth);

/* UTF-8 helpers (strings are always valid UTF-8). */
gboolean hj_unichar_isspace (gunichar c);
const char *hj_utf8_offset (const HjValue *str, gsize char_index);  /* pointer to char i */

/* ---- lexer ---------------------------------------------------------------- */
typedef enum {
  HJ_TOK_EOF,
  HJ_TOK_TEXT,
  HJ_TOK_VAR_BEGIN,
  HJ_TOK_VAR_END,
  HJ_TOK_BLOCK_BEGIN,
  HJ_TOK_BLOCK_END,
  HJ_TOK_NAME,
  HJ_TOK_STRING,
  HJ_TOK_INT,
  HJ_TOK_FLOAT,
  HJ_TOK_OP,
} HjTokType;

typedef enum {
  HJ_OP_ADD = 1, HJ_OP_SUB, HJ_OP_MUL, HJ_OP_DIV, HJ_OP_FLOORDIV, HJ_OP_MOD, HJ_OP_POW,
  HJ_OP_TILDE, HJ_OP_LBRACKET, HJ_OP_RBRACKET, HJ_OP_LPAREN, HJ_OP_RPAREN,
  HJ_OP_LBRACE, HJ_OP_RBRACE, HJ_OP_EQ, HJ_OP_NE, HJ_OP_GT, HJ_OP_GE, HJ_OP_LT, HJ_OP_LE,
  HJ_OP_ASSIGN, HJ_OP_DOT, HJ_OP_COLON, HJ_OP_PIPE, HJ_OP_COMMA, HJ_OP_SEMICOLON,
  /* not lexed, used by the AST */
  HJ_OP_IN, HJ_OP_NOTIN, HJ_OP_NOT, HJ_OP_NEG, HJ_OP_POS,
} HjOp;

typedef struct {
  HjTokType type;
  int op;            /* HJ_TOK_OP */
  char *text;        /* TEXT, NAME, STRING (decoded) */
  gsize len;
  gint64 ival;
  double fval;
  int line, col;
} HjToken;

/* Tokenize (source already newline-normalized by the caller). */
GArray *hj_lex (const char *source, gsize len, GError **error);
void    hj_tokens_free (GArray *tokens);
const char *hj_op_text (int op);

/* ---- AST ------------------------------------------------------------------ */
typedef enum {
  /* statements */
  HJ_N_BODY, HJ_N_TEXT, HJ_N_PRINT, HJ_N_IF, HJ_N_FOR, HJ_N_SET, HJ_N_SET_ATTR,
  HJ_N_SET_BLOCK, HJ_N_MACRO, HJ_N_BREAK, HJ_N_CONTINUE, HJ_N_WITH, HJ_N_FILTER_BLOCK,
  /* expressions */
  HJ_N_CONST, HJ_N_NAME, HJ_N_LIST, HJ_N_TUPLE, HJ_N_DICT, HJ_N_GETATTR, HJ_N_GETITEM,
  HJ_N_SLICE, HJ_N_CALL, HJ_N_FILTER, HJ_N_TEST, HJ_N_BINOP, HJ_N_UNARY, HJ_N_AND,
  HJ_N_OR, HJ_N_COMPARE, HJ_N_CONCAT, HJ_N_CONDEXPR,
} HjNodeKind;

struct _HjNode {
  HjNodeKind kind;
  int op;
  int line, col;
  HjNode *a, *b, *c, *d;
  GPtrArray *items;    /* HjNode*: body statements, positional args, elements, dict keys, compare operands */
  GPtrArray *items2;   /* HjNode*: dict values, kwarg values, macro defaults (NULL entries allowed) */
  GPtrArray *names;    /* char*: for/set targets, kwarg names, macro params, compare ops (as ints) */
  char *str;           /* name / text / attribute / filter / test */
  HjValue *value;      /* HJ_N_CONST */
  gboolean flag;       /* TEST: negated; SET: tuple target; FOR: tuple target */
};

HjNode *hj_parse (const char *source, gsize len, GError **error);
void    hj_node_free (HjNode *node);

gboolean hj_filter_known (const char *name);
gboolean hj_test_known (const char *name);

/* ---- evaluation ----------------------------------------------------------- */
typedef struct {
  gboolean have_now;
  gint64 now;          /* seconds since the epoch, UTC, when pinned */
} HjRenderOptions;

/* Renders with @vars (a HJ_DICT of globals, borrowed). */
char *hj_render (const HjNode *root, HjValue *vars, const HjRenderOptions *opts, GError **error);

G_END_DECLS
