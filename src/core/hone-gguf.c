/* hone-gguf.c — GGUF v2/v3 reader (mmap, zero-copy) and writer.
 *
 * The reader walks the whole header once, checking every length against the
 * bytes that are left before it trusts it, and records offsets into the
 * mapping; nothing is allocated from a count until the count is known to fit
 * the file (each element needs at least one byte of its own), so a hostile
 * file cannot make us allocate more than a small multiple of its size.
 */
#include <inttypes.h>
#include "hone-gguf.h"

#include "hone-error.h"
#include "hone-file-pages.h"
#include "hone-i18n.h"

#include <errno.h>
#include <gio/gio.h>
#include <glib/gstdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define GGUF_MAGIC "GGUF"
#define GGUF_DEFAULT_ALIGNMENT 32
/* Arrays of arrays of arrays…: llama.cpp writes none; a bound keeps recursion finite. */
#define GGUF_MAX_ARRAY_DEPTH 8

typedef struct {
  char *key;                 /* NUL-terminated copy */
  HoneGgufType type;
  gsize value_off;           /* offset of the value, just past the u32 type */
  gsize value_len;           /* bytes of the value */
  HoneGgufType array_type;   /* arrays only */
  guint64 array_n;
  gsize array_data_off;      /* offset of the first element */
  gsize *str_offs;           /* string arrays: offset of each element's u64 length */
} Kv;

struct _HoneGguf {
  gint ref_count;
  GBytes *bytes;             /* owns the mapping (or the caller's memory) */
  gboolean mapped;           /* bytes are a file mapping (hone_gguf_open) */
  const guint8 *data;
  gsize size;
  guint32 version;
  gsize alignment;
  gsize data_offset;

  guint n_kv;
  Kv *kvs;
  GHashTable *kv_index;      /* key → index + 1 */

  guint n_tensors;
  HoneTensor *tensors;
  gsize *tensor_offs;        /* offset of each tensor's data relative to the data section */
  GHashTable *tensor_index;  /* name → index + 1 */
};

/* ---- bounds-checked cursor --------------------------------------------- */

typedef struct {
  const guint8 *p;
  gsize size;
  gsize pos;
  GError **error;
} Cursor;

static gboolean
need (Cursor *c, gsize n, const char *what)
{
  if (n <= c->size - c->pos)
    return TRUE;
  g_set_error (c->error, HONE_ERROR, HONE_ERROR_FILE_CORRUPT,
               _("GGUF truncated: %s at offset %" "zu" " needs %" PRIu64
                 " bytes, %" "zu" " left"),
               what, c->pos, (guint64) n, c->size - c->pos);
  return FALSE;
}

static gboolean
read_u32 (Cursor *c, guint32 *out, const char *what)
{
  guint32 v;
  if (!need (c, 4, what))
    return FALSE;
  memcpy (&v, c->p + c->pos, 4);
  *out = GUINT32_FROM_LE (v);
  c->pos += 4;
  return TRUE;
}

static gboolean
read_u64 (Cursor *c, guint64 *out, const char *what)
{
  guint64 v;
  if (!need (c, 8, what))
    return FALSE;
  memcpy (&v, c->p + c->pos, 8);
  *out = GUINT64_FROM_LE (v);
  c->pos += 8;
  return TRUE;
}

/* @n bytes at @p are UTF-8, NULs included (g_utf8_validate stops at one). */
static gboolean
utf8_valid (const char *p, gsize n)
{
  while (n > 0)
    {
      const char *nul = memchr (p, 0, n);
      const gsize run = nul ? (gsize) (nul - p) : n;
      if (!g_utf8_validate (p, (gssize) run, NULL))
        return FALSE;
      if (!nul)
        break;
      p += run + 1;
      n -= run + 1;
    }
  return TRUE;
}

/* A GGUF string: u64 length + bytes. Returns the offset of the bytes. */
static gboolean
read_string (Cursor *c, gsize *off, gsize *len, const char *what)
{
  guint64 n;
  gsize at = c->pos;
  if (!read_u64 (c, &n, what))
    return FALSE;
  if (n > c->size - c->pos)
    {
      g_set_error (c->error, HONE_ERROR, HONE_ERROR_FILE_CORRUPT,
                   _("GGUF corrupt: %s at offset %" "zu" " has length %" PRIu64
                     " past the end of the file (%" "zu" " bytes left)"),
                   what, at, n, c->size - c->pos);
      return FALSE;
    }
  /* GGUF strings are UTF-8 (keys, values, array elements, tensor names): a
   * file whose are not is corrupt or hostile, and its strings would reach
   * messages, labels and exported JSON. (U+0000 is UTF-8 too: keys and tensor
   * names are refused a NUL by their callers.) */
  if (!utf8_valid ((const char *) c->p + c->pos, (gsize) n))
    {
      g_set_error (c->error, HONE_ERROR, HONE_ERROR_FILE_CORRUPT,
                   _("GGUF corrupt: %s at offset %" "zu" " is not valid UTF-8"), what, at);
      return FALSE;
    }
  *off = c->pos;
  *len = (gsize) n;
  c->pos += (gsize) n;
  return TRUE;
}

static gsize
scalar_size (guint32 type)
{
  switch (type)
    {
    case HONE_GGUF_UINT8: case HONE_GGUF_INT8: case HONE_GGUF_BOOL:
      return 1;
    case HONE_GGUF_UINT16: case HONE_GGUF_INT16:
      return 2;
    case HONE_GGUF_UINT32: case HONE_GGUF_INT32: case HONE_GGUF_FLOAT32:
      return 4;
    case HONE_GGUF_UINT64: case HONE_GGUF_INT64: case HONE_GGUF_FLOAT64:
      return 8;
    default:
      return 0;
    }
}

static const char *
gguf_type_name (guint32 type)
{
  static const char *const names[] = {
    "u8", "i8", "u16", "i16", "u32", "i32", "f32", "bool", "string", "array", "u64", "i64", "f64",
  };
  return type < G_N_ELEMENTS (names) ? names[type] : "unknown";
}

/* Skip over one value of @type (validating it) for key @key. */
static gboolean
skip_value (Cursor *c, guint32 type, const char *key, int depth)
{
  gsize sz = scalar_size (type);
  gsize at = c->pos;

  if (sz > 0)
    {
      if (!need (c, sz, key))
        return FALSE;
      c->pos += sz;
      return TRUE;
    }
  if (type == HONE_GGUF_STRING)
    {
      gsize off, len;
      return read_string (c, &off, &len, key);
    }
  if (type == HONE_GGUF_ARRAY)
    {
      guint32 et;
      guint64 n;
      if (depth >= GGUF_MAX_ARRAY_DEPTH)
        {
          g_set_error (c->error, HONE_ERROR, HONE_ERROR_FILE_CORRUPT,
                       _("GGUF corrupt: %s nests arrays deeper than %d at offset %" "zu"),
                       key, GGUF_MAX_ARRAY_DEPTH, at);
          return FALSE;
        }
      if (!read_u32 (c, &et, key) || !read_u64 (c, &n, key))
        return FALSE;
      sz = scalar_size (et);
      if (sz > 0)
        {
          if (n > (c->size - c->pos) / sz)
            goto too_long;
          c->pos += (gsize) n * sz;
          return TRUE;
        }
      if (et == HONE_GGUF_STRING || et == HONE_GGUF_ARRAY)
        {
          /* Each element takes ≥ 8 (string) or ≥ 12 (array) bytes. */
          if (n > (c->size - c->pos) / (et == HONE_GGUF_STRING ? 8 : 12))
            goto too_long;
          for (guint64 i = 0; i < n; i++)
            if (!skip_value (c, et, key, depth + 1))
              return FALSE;
          return TRUE;
        }
      g_set_error (c->error, HONE_ERROR, HONE_ERROR_FILE_CORRUPT,
                   _("GGUF corrupt: %s is an array of unknown type %u at offset %" "zu"),
                   key, et, at);
      return FALSE;
    too_long:
      g_set_error (c->error, HONE_ERROR, HONE_ERROR_FILE_CORRUPT,
                   _("GGUF corrupt: %s has an array of %" PRIu64 " %s elements at offset %"
                     "zu" " that cannot fit in the file"),
                   key, n, gguf_type_name (et), at);
      return FALSE;
    }
  g_set_error (c->error, HONE_ERROR, HONE_ERROR_FILE_CORRUPT,
               _("GGUF corrupt: %s has unknown value type %u at offset %" "zu"),
               key, type, at - 4);
  return FALSE;
}

/* ---- open ---------------------------------------------------------------- */

static void
gguf_free (HoneGguf *g)
{
  for (guint i = 0; i < g->n_kv; i++)
    {
      g_free (g->kvs[i].key);
      g_free (g->kvs[i].str_offs);
    }
  g_free (g->kvs);
  for (guint i = 0; i < g->n_tensors; i++)
    g_free ((char *) g->tensors[i].name);
  g_free (g->tensors);
  g_free (g->tensor_offs);
  if (g->kv_index)
    g_hash_table_unref (g->kv_index);
  if (g->tensor_index)
    g_hash_table_unref (g->tensor_index);
  g_bytes_unref (g->bytes);
  g_free (g);
}

static gboolean parse_kv_value (HoneGguf *g, Cursor *c, Kv *kv, const char *what);

static gboolean
parse_kv (HoneGguf *g, Cursor *c, Kv *kv)
{
  gsize key_off, key_len, at = c->pos;
  char *what;
  gboolean ok;

  if (!read_string (c, &key_off, &key_len, _("metadata key")))
    return FALSE;
  if (memchr (c->p + key_off, 0, key_len) != NULL)
    {
      g_set_error (c->error, HONE_ERROR, HONE_ERROR_FILE_CORRUPT,
                   _("GGUF corrupt: metadata key at offset %" "zu" " contains a NUL byte"), at);
      return FALSE;
    }
  kv->key = g_strndup ((const char *) c->p + key_off, key_len);
  what = g_strdup_printf (_("key '%s'"), kv->key);
  ok = parse_kv_value (g, c, kv, what);
  g_free (what);
  if (!ok)
    return FALSE;
  if (g_hash_table_contains (g->kv_index, kv->key))
    {
      g_set_error (c->error, HONE_ERROR, HONE_ERROR_FILE_CORRUPT,
                   _("GGUF corrupt: duplicate metadata key '%s' at offset %" "zu"), kv->key, at);
      return FALSE;
    }
  g_hash_table_insert (g->kv_index, kv->key, GUINT_TO_POINTER (g->n_kv + 1));
  return TRUE;
}

static gboolean
parse_kv_value (HoneGguf *g, Cursor *c, Kv *kv, const char *what)
{
  guint32 type;

  if (!read_u32 (c, &type, what))
    return FALSE;
  kv->type = type;
  kv->value_off = c->pos;
  if (type == HONE_GGUF_ARRAY)
    {
      guint32 et;
      guint64 n;
      if (!read_u32 (c, &et, what) || !read_u64 (c, &n, what))
        return FALSE;
      kv->array_type = et;
      kv->array_n = n;
      kv->array_data_off = c->pos;
      if (et == HONE_GGUF_STRING)
        {
          if (n > (c->size - c->pos) / 8)
            {
              g_set_error (c->error, HONE_ERROR, HONE_ERROR_FILE_CORRUPT,
                           _("GGUF corrupt: %s has an array of %" PRIu64
                             " strings at offset %" "zu" " that cannot fit in the file"),
                           what, n, kv->value_off);
              return FALSE;
            }
          kv->str_offs = g_new (gsize, n > 0 ? n : 1);
          for (guint64 i = 0; i < n; i++)
            {
              gsize off, len;
              kv->str_offs[i] = c->pos;
              if (!read_string (c, &off, &len, what))
                return FALSE;
            }
        }
      else
        {
          /* Re-parse from the array header so numeric and nested arrays share the checks. */
          c->pos = kv->value_off;
          if (!skip_value (c, HONE_GGUF_ARRAY, what, 0))
            return FALSE;
        }
    }
  else if (!skip_value (c, type, what, 0))
    return FALSE;
  kv->value_len = c->pos - kv->value_off;
  return TRUE;
}

static gboolean
parse_tensor_info (HoneGguf *g, Cursor *c, HoneTensor *t, gsize *rel_off)
{
  gsize name_off, name_len, at = c->pos;
  guint32 n_dims, type;
  guint64 offset, n_elements = 1;
  size_t row_bytes;
  char *name;
  char what[256];

  if (!read_string (c, &name_off, &name_len, _("tensor name")))
    return FALSE;
  if (memchr (c->p + name_off, 0, name_len) != NULL)
    {
      g_set_error (c->error, HONE_ERROR, HONE_ERROR_FILE_CORRUPT,
                   _("GGUF corrupt: tensor name at offset %" "zu" " contains a NUL byte"), at);
      return FALSE;
    }
  name = g_strndup ((const char *) c->p + name_off, name_len);
  t->name = name;
  g_snprintf (what, sizeof what, _("tensor '%s'"), name);
  if (!read_u32 (c, &n_dims, what))
    return FALSE;
  if (n_dims < 1 || n_dims > HONE_TENSOR_MAX_DIMS)
    {
      g_set_error (c->error, HONE_ERROR, HONE_ERROR_FILE_CORRUPT,
                   _("GGUF corrupt: tensor '%s' at offset %" "zu" " has %u dimensions (1 to %d allowed)"),
                   name, at, n_dims, HONE_TENSOR_MAX_DIMS);
      return FALSE;
    }
  t->n_dims = (int) n_dims;
  for (guint32 i = 0; i < n_dims; i++)
    {
      guint64 ne;
      if (!read_u64 (c, &ne, what))
        return FALSE;
      if (ne == 0 || ne > G_MAXINT64 || !g_uint64_checked_mul (&n_elements, n_elements, ne)
          || n_elements > G_MAXINT64)
        {
          g_set_error (c->error, HONE_ERROR, HONE_ERROR_FILE_CORRUPT,
                       _("GGUF corrupt: tensor '%s' at offset %" "zu" " has invalid dimension %u = %"
                         PRIu64 " (zero, or the element count overflows)"),
                       name, at, i, ne);
          return FALSE;
        }
      t->ne[i] = (int64_t) ne;
    }
  for (int i = (int) n_dims; i < HONE_TENSOR_MAX_DIMS; i++)
    t->ne[i] = 1;
  if (!read_u32 (c, &type, what) || !read_u64 (c, &offset, what))
    return FALSE;
  t->type = (HoneDType) type;
  if (hone_dtype_block_size (t->type) == 0 || !hone_dtype_is_gguf (t->type))
    {
      g_set_error (c->error, HONE_ERROR, HONE_ERROR_UNSUPPORTED_TYPE,
                   _("GGUF tensor '%s' has tensor type %u, which Hone cannot read"), name, type);
      return FALSE;
    }
  row_bytes = hone_dtype_row_bytes (t->type, t->ne[0]);
  if (row_bytes == 0)
    {
      g_set_error (c->error, HONE_ERROR, HONE_ERROR_FILE_CORRUPT,
                   _("GGUF corrupt: tensor '%s' of type %s has a row of %" PRId64
                     " elements, not a multiple of the block size %d"),
                   name, hone_dtype_name (t->type), t->ne[0], hone_dtype_block_size (t->type));
      return FALSE;
    }
  {
    guint64 nbytes;
    if (!g_uint64_checked_mul (&nbytes, row_bytes, n_elements / (guint64) t->ne[0]) || nbytes > G_MAXSIZE)
      {
        g_set_error (c->error, HONE_ERROR, HONE_ERROR_FILE_CORRUPT,
                     _("GGUF corrupt: tensor '%s' is too large"), name);
        return FALSE;
      }
    t->nbytes = (size_t) nbytes;
  }
  if (offset % g->alignment != 0)
    {
      g_set_error (c->error, HONE_ERROR, HONE_ERROR_FILE_CORRUPT,
                   _("GGUF corrupt: tensor '%s' data offset %" PRIu64 " is not aligned to %" "zu"),
                   name, offset, g->alignment);
      return FALSE;
    }
  if (offset > G_MAXSIZE)
    offset = G_MAXSIZE;  /* caught by the bounds check once the data section is known */
  *rel_off = (gsize) offset;
  if (g_hash_table_contains (g->tensor_index, name))
    {
      g_set_error (c->error, HONE_ERROR, HONE_ERROR_FILE_CORRUPT,
                   _("GGUF corrupt: duplicate tensor name '%s' at offset %" "zu"), name, at);
      return FALSE;
    }
  g_hash_table_insert (g->tensor_index, name, GUINT_TO_POINTER (g->n_tensors + 1));
  return TRUE;
}

static gboolean
read_alignment (HoneGguf *g, GError **error)
{
  int i = hone_gguf_find_kv (g, "general.alignment");
  guint32 a;

  g->alignment = GGUF_DEFAULT_ALIGNMENT;
  if (i < 0)
    return TRUE;
  if (g->kvs[i].type != HONE_GGUF_UINT32)
    {
      g_set_error (error, HONE_ERROR, HONE_ERROR_FILE_CORRUPT,
                   _("GGUF corrupt: general.alignment has type %s, expected u32"),
                   gguf_type_name (g->kvs[i].type));
      return FALSE;
    }
  memcpy (&a, g->data + g->kvs[i].value_off, 4);
  a = GUINT32_FROM_LE (a);
  if (a == 0 || (a & (a - 1)) != 0)
    {
      g_set_error (error, HONE_ERROR, HONE_ERROR_FILE_CORRUPT,
                   _("GGUF corrupt: general.alignment = %u is not a power of two"), a);
      return FALSE;
    }
  g->alignment = a;
  return TRUE;
}

static int
cmp_by_offset (gconstpointer a, gconstpointer b, gpointer user_data)
{
  const gsize *offs = user_data;
  gsize x = offs[*(const guint *) a], y = offs[*(const guint *) b];
  return x < y ? -1 : x > y ? 1 : 0;
}

static gboolean
check_tensor_layout (HoneGguf *g, GError **error)
{
  gsize data_size = g->data_offset <= g->size ? g->size - g->data_offset : 0;
  guint *order;

  for (guint i = 0; i < g->n_tensors; i++)
    {
      HoneTensor *t = &g->tensors[i];
      gsize off = g->tensor_offs[i];
      if (off > data_size || t->nbytes > data_size - off)
        {
          g_set_error (error, HONE_ERROR, HONE_ERROR_FILE_CORRUPT,
                       _("GGUF corrupt: tensor '%s' data [%" "zu" ", +%" "zu"
                         ") lies outside the data section (%" "zu" " bytes at file offset %"
                         "zu" ")"),
                       t->name, off, (gsize) t->nbytes, data_size, g->data_offset);
          return FALSE;
        }
      t->data = g->data + g->data_offset + off;
    }
  order = g_new (guint, g->n_tensors > 0 ? g->n_tensors : 1);
  for (guint i = 0; i < g->n_tensors; i++)
    order[i] = i;
  g_qsort_with_data (order, (gint) g->n_tensors, sizeof (guint), cmp_by_offset, g->tensor_offs);
  for (guint k = 1; k < g->n_tensors; k++)
    {
      guint a = order[k - 1], b = order[k];
      if (g->tensor_offs[a] + g->tensors[a].nbytes > g->tensor_offs[b])
        {
          g_set_error (error, HONE_ERROR, HONE_ERROR_FILE_CORRUPT,
                       _("GGUF corrupt: tensors '%s' (offset %" "zu" ", %" "zu"
                         " bytes) and '%s' (offset %" "zu" ") overlap"),
                       g->tensors[a].name, g->tensor_offs[a], (gsize) g->tensors[a].nbytes,
                       g->tensors[b].name, g->tensor_offs[b]);
          g_free (order);
          return FALSE;
        }
    }
  g_free (order);
  return TRUE;
}

HoneGguf *
hone_gguf_open_bytes (GBytes *bytes, GError **error)
{
  HoneGguf *g;
  Cursor c;
  guint32 version;
  guint64 n_tensors, n_kv;

  g_return_val_if_fail (bytes != NULL, NULL);
  g_return_val_if_fail (error == NULL || *error == NULL, NULL);

  g = g_new0 (HoneGguf, 1);
  g->ref_count = 1;
  g->bytes = g_bytes_ref (bytes);
  g->data = g_bytes_get_data (bytes, &g->size);
  if (g->data == NULL)
    g->data = (const guint8 *) "";
  g->kv_index = g_hash_table_new (g_str_hash, g_str_equal);
  g->tensor_index = g_hash_table_new (g_str_hash, g_str_equal);
  c = (Cursor) { g->data, g->size, 0, error };

  if (g->size < 4 || memcmp (g->data, GGUF_MAGIC, 4) != 0)
    {
      g_set_error (error, HONE_ERROR, HONE_ERROR_FILE_CORRUPT, _("not a GGUF file (bad magic)"));
      goto fail;
    }
  c.pos = 4;
  if (!read_u32 (&c, &version, _("version")))
    goto fail;
  if (version != 2 && version != 3)
    {
      if (version == 1)
        g_set_error (error, HONE_ERROR, HONE_ERROR_FILE_UNSUPPORTED,
                     _("GGUF version 1 is not supported (re-convert the model to GGUF v3)"));
      else if (GUINT32_SWAP_LE_BE (version) == 2 || GUINT32_SWAP_LE_BE (version) == 3)
        g_set_error (error, HONE_ERROR, HONE_ERROR_FILE_UNSUPPORTED,
                     _("big-endian GGUF files are not supported"));
      else
        g_set_error (error, HONE_ERROR, HONE_ERROR_FILE_UNSUPPORTED,
                     _("GGUF version %u is not supported"), version);
      goto fail;
    }
  g->version = version;
  if (!read_u64 (&c, &n_tensors, _("tensor count")) || !read_u64 (&c, &n_kv, _("metadata count")))
    goto fail;
  /* Smallest possible entries: a kv is 8 (key length) + 4 (type) + 1 (u8) bytes,
   * a tensor info 8 (name length) + 4 + 8 (one dim) + 4 + 8 bytes. */
  if (n_kv > (c.size - c.pos) / 13 || n_kv > G_MAXUINT - 1)
    {
      g_set_error (error, HONE_ERROR, HONE_ERROR_FILE_CORRUPT,
                   _("GGUF corrupt: metadata count %" PRIu64 " cannot fit in a file of %"
                     "zu" " bytes"), n_kv, c.size);
      goto fail;
    }
  if (n_tensors > (c.size - c.pos) / 32 || n_tensors > G_MAXINT)
    {
      g_set_error (error, HONE_ERROR, HONE_ERROR_FILE_CORRUPT,
                   _("GGUF corrupt: tensor count %" PRIu64 " cannot fit in a file of %"
                     "zu" " bytes"), n_tensors, c.size);
      goto fail;
    }

  g->kvs = g_new0 (Kv, n_kv > 0 ? n_kv : 1);
  for (guint64 i = 0; i < n_kv; i++)
    {
      if (!parse_kv (g, &c, &g->kvs[i]))
        {
          /* A failed entry never made it into the index: free it here. */
          g_free (g->kvs[i].key);
          g_free (g->kvs[i].str_offs);
          goto fail;
        }
      g->n_kv++;
    }
  if (!read_alignment (g, error))
    goto fail;

  g->tensors = g_new0 (HoneTensor, n_tensors > 0 ? n_tensors : 1);
  g->tensor_offs = g_new0 (gsize, n_tensors > 0 ? n_tensors : 1);
  for (guint64 i = 0; i < n_tensors; i++)
    {
      gboolean ok = parse_tensor_info (g, &c, &g->tensors[i], &g->tensor_offs[i]);
      if (ok)
        g->n_tensors++;
      else
        {
          /* A failed entry never made it into the index: free its name here. */
          g_free ((char *) g->tensors[i].name);
          g->tensors[i].name = NULL;
          goto fail;
        }
    }
  g->data_offset = c.pos + (g->alignment - c.pos % g->alignment) % g->alignment;
  if (g->data_offset < c.pos)  /* wrapped around: cannot be inside the file */
    g->data_offset = G_MAXSIZE;
  if (!check_tensor_layout (g, error))
    goto fail;
  return g;

fail:
  gguf_free (g);
  return NULL;
}

HoneGguf *
hone_gguf_open (const char *path, GError **error)
{
  GMappedFile *mf;
  GBytes *bytes;
  HoneGguf *g;
  GError *local = NULL;

  g_return_val_if_fail (path != NULL, NULL);

  mf = g_mapped_file_new (path, FALSE, &local);
  if (mf == NULL)
    {
      g_set_error (error, HONE_ERROR, HONE_ERROR_IO, _("cannot open %s: %s"), path, local->message);
      g_error_free (local);
      return NULL;
    }
  bytes = g_mapped_file_get_bytes (mf);
  g_mapped_file_unref (mf);
  g = hone_gguf_open_bytes (bytes, error);
  g_bytes_unref (bytes);
  if (g != NULL)
    g->mapped = TRUE;
  if (g == NULL && error != NULL && *error != NULL)
    g_prefix_error (error, "%s: ", path);
  return g;
}

HoneGguf *
hone_gguf_ref (HoneGguf *gguf)
{
  g_return_val_if_fail (gguf != NULL, NULL);
  g_atomic_int_inc (&gguf->ref_count);
  return gguf;
}

void
hone_gguf_unref (HoneGguf *gguf)
{
  if (gguf != NULL && g_atomic_int_dec_and_test (&gguf->ref_count))
    gguf_free (gguf);
}

void
hone_gguf_release_bytes (const HoneGguf *gguf, const void *data, gsize nbytes)
{
  const guint8 *p = data;
  if (gguf != NULL && gguf->mapped && p != NULL && nbytes > 0 && p >= gguf->data && nbytes <= gguf->size
      && (gsize) (p - gguf->data) <= gguf->size - nbytes)
    hone_file_pages_release (p, nbytes);
}

guint32
hone_gguf_version (const HoneGguf *gguf)
{
  return gguf->version;
}

gsize
hone_gguf_alignment (const HoneGguf *gguf)
{
  return gguf->alignment;
}

gsize
hone_gguf_file_size (const HoneGguf *gguf)
{
  return gguf->size;
}

/* ---- metadata ------------------------------------------------------------ */

guint
hone_gguf_n_kv (const HoneGguf *gguf)
{
  return gguf->n_kv;
}

const char *
hone_gguf_kv_key (const HoneGguf *gguf, guint index)
{
  g_return_val_if_fail (index < gguf->n_kv, NULL);
  return gguf->kvs[index].key;
}

int
hone_gguf_find_kv (const HoneGguf *gguf, const char *key)
{
  gpointer v = g_hash_table_lookup (gguf->kv_index, key);
  return v ? (int) GPOINTER_TO_UINT (v) - 1 : -1;
}

HoneGgufType
hone_gguf_kv_type (const HoneGguf *gguf, guint index)
{
  g_return_val_if_fail (index < gguf->n_kv, (HoneGgufType) -1);
  return gguf->kvs[index].type;
}

HoneGgufType
hone_gguf_kv_array_type (const HoneGguf *gguf, guint index)
{
  g_return_val_if_fail (index < gguf->n_kv, (HoneGgufType) -1);
  if (gguf->kvs[index].type != HONE_GGUF_ARRAY)
    return (HoneGgufType) -1;
  return gguf->kvs[index].array_type;
}

guint64
hone_gguf_kv_array_length (const HoneGguf *gguf, guint index)
{
  g_return_val_if_fail (index < gguf->n_kv, 0);
  if (gguf->kvs[index].type != HONE_GGUF_ARRAY)
    return 0;
  return gguf->kvs[index].array_n;
}

static const Kv *
lookup (const HoneGguf *gguf, const char *key)
{
  int i = hone_gguf_find_kv (gguf, key);
  return i < 0 ? NULL : &gguf->kvs[i];
}

/* Integer value of a kv, as signed or unsigned 64-bit. */
static gboolean
kv_integer (const HoneGguf *g, const Kv *kv, gboolean *is_signed, guint64 *u, gint64 *s)
{
  const guint8 *p = g->data + kv->value_off;
  guint16 v16;
  guint32 v32;
  guint64 v64;

  switch (kv->type)
    {
    case HONE_GGUF_UINT8: *is_signed = FALSE; *u = p[0]; return TRUE;
    case HONE_GGUF_INT8: *is_signed = TRUE; *s = (gint8) p[0]; return TRUE;
    case HONE_GGUF_UINT16: memcpy (&v16, p, 2); *is_signed = FALSE; *u = GUINT16_FROM_LE (v16); return TRUE;
    case HONE_GGUF_INT16: memcpy (&v16, p, 2); *is_signed = TRUE; *s = (gint16) GUINT16_FROM_LE (v16); return TRUE;
    case HONE_GGUF_UINT32: memcpy (&v32, p, 4); *is_signed = FALSE; *u = GUINT32_FROM_LE (v32); return TRUE;
    case HONE_GGUF_INT32: memcpy (&v32, p, 4); *is_signed = TRUE; *s = (gint32) GUINT32_FROM_LE (v32); return TRUE;
    case HONE_GGUF_UINT64: memcpy (&v64, p, 8); *is_signed = FALSE; *u = GUINT64_FROM_LE (v64); return TRUE;
    case HONE_GGUF_INT64: memcpy (&v64, p, 8); *is_signed = TRUE; *s = (gint64) GUINT64_FROM_LE (v64); return TRUE;
    default: return FALSE;
    }
}

gboolean
hone_gguf_get_u32 (const HoneGguf *gguf, const char *key, guint32 *out)
{
  const Kv *kv = lookup (gguf, key);
  gboolean is_signed;
  guint64 u = 0;
  gint64 s = 0;

  if (kv == NULL || !kv_integer (gguf, kv, &is_signed, &u, &s))
    return FALSE;
  if (is_signed)
    {
      if (s < 0 || s > G_MAXUINT32)
        return FALSE;
      u = (guint64) s;
    }
  if (u > G_MAXUINT32)
    return FALSE;
  if (out)
    *out = (guint32) u;
  return TRUE;
}

gboolean
hone_gguf_get_i64 (const HoneGguf *gguf, const char *key, gint64 *out)
{
  const Kv *kv = lookup (gguf, key);
  gboolean is_signed;
  guint64 u = 0;
  gint64 s = 0;

  if (kv == NULL || !kv_integer (gguf, kv, &is_signed, &u, &s))
    return FALSE;
  if (!is_signed)
    {
      if (u > G_MAXINT64)
        return FALSE;
      s = (gint64) u;
    }
  if (out)
    *out = s;
  return TRUE;
}

gboolean
hone_gguf_get_f32 (const HoneGguf *gguf, const char *key, float *out)
{
  const Kv *kv = lookup (gguf, key);
  const guint8 *p;

  if (kv == NULL)
    return FALSE;
  p = gguf->data + kv->value_off;
  if (kv->type == HONE_GGUF_FLOAT32)
    {
      guint32 v;
      float f;
      memcpy (&v, p, 4);
      v = GUINT32_FROM_LE (v);
      memcpy (&f, &v, 4);
      if (out)
        *out = f;
      return TRUE;
    }
  if (kv->type == HONE_GGUF_FLOAT64)
    {
      guint64 v;
      double d;
      memcpy (&v, p, 8);
      v = GUINT64_FROM_LE (v);
      memcpy (&d, &v, 8);
      if (out)
        *out = (float) d;
      return TRUE;
    }
  /* Integers that a float holds exactly (a few converters write e.g. rope
   * bases as integers). */
  {
    gboolean is_signed;
    guint64 u = 0;
    gint64 s = 0;
    if (!kv_integer (gguf, kv, &is_signed, &u, &s))
      return FALSE;
    if (is_signed ? (s < -(1 << 24) || s > (1 << 24)) : u > (1 << 24))
      return FALSE;
    if (out)
      *out = is_signed ? (float) s : (float) u;
    return TRUE;
  }
}

gboolean
hone_gguf_get_bool (const HoneGguf *gguf, const char *key, gboolean *out)
{
  const Kv *kv = lookup (gguf, key);
  if (kv == NULL || kv->type != HONE_GGUF_BOOL)
    return FALSE;
  if (out)
    *out = gguf->data[kv->value_off] != 0;
  return TRUE;
}

const char *
hone_gguf_get_string (const HoneGguf *gguf, const char *key, gsize *length)
{
  const Kv *kv = lookup (gguf, key);
  guint64 n;

  if (kv == NULL || kv->type != HONE_GGUF_STRING)
    return NULL;
  memcpy (&n, gguf->data + kv->value_off, 8);
  if (length)
    *length = (gsize) GUINT64_FROM_LE (n);
  return (const char *) gguf->data + kv->value_off + 8;
}

char *
hone_gguf_dup_string (const HoneGguf *gguf, const char *key)
{
  gsize len;
  const char *s = hone_gguf_get_string (gguf, key, &len);
  return s ? g_strndup (s, len) : NULL;
}

char *
hone_gguf_dup_text (const HoneGguf *gguf, const char *key, gssize max_bytes)
{
  gsize len;
  const char *s = hone_gguf_get_string (gguf, key, &len);
  if (s == NULL)
    return NULL;
  if (max_bytes >= 0 && len > (gsize) max_bytes)
    len = (gsize) max_bytes;
  len = strnlen (s, len);   /* shown as a C string: up to a NUL the value may hold */
  return g_utf8_make_valid (s, (gssize) len);
}

const void *
hone_gguf_get_array (const HoneGguf *gguf, const char *key, HoneGgufType *elem_type, guint64 *n)
{
  const Kv *kv = lookup (gguf, key);
  if (kv == NULL || kv->type != HONE_GGUF_ARRAY)
    return NULL;
  if (elem_type)
    *elem_type = kv->array_type;
  if (n)
    *n = kv->array_n;
  /* For string and nested arrays this is the raw encoded data; callers check elem_type. */
  return gguf->data + kv->array_data_off;
}

const char *
hone_gguf_get_array_string (const HoneGguf *gguf, const char *key, guint64 i, gsize *length)
{
  const Kv *kv = lookup (gguf, key);
  guint64 n;

  if (kv == NULL || kv->type != HONE_GGUF_ARRAY || kv->array_type != HONE_GGUF_STRING || i >= kv->array_n)
    return NULL;
  memcpy (&n, gguf->data + kv->str_offs[i], 8);
  if (length)
    *length = (gsize) GUINT64_FROM_LE (n);
  return (const char *) gguf->data + kv->str_offs[i] + 8;
}

/* ---- tensors ------------------------------------------------------------- */

guint
hone_gguf_n_tensors (const HoneGguf *gguf)
{
  return gguf->n_tensors;
}

const HoneTensor *
hone_gguf_tensor (const HoneGguf *gguf, guint index)
{
  g_return_val_if_fail (index < gguf->n_tensors, NULL);
  return &gguf->tensors[index];
}

const HoneTensor *
hone_gguf_find_tensor (const HoneGguf *gguf, const char *name)
{
  gpointer v = g_hash_table_lookup (gguf->tensor_index, name);
  return v ? &gguf->tensors[GPOINTER_TO_UINT (v) - 1] : NULL;
}

/* ---- writer -------------------------------------------------------------- */

typedef struct {
  char *key;
  GByteArray *value;       /* u32 type + encoded value, as in the file */
} WKv;

typedef struct {
  char *name;
  HoneDType type;
  int n_dims;
  int64_t ne[HONE_TENSOR_MAX_DIMS];
  gsize nbytes;
  GBytes *data;              /* NULL for a deferred tensor: */
  HoneTensorFillFunc fill;
  gpointer fill_data;
  GDestroyNotify fill_destroy;
} WTensor;

struct _HoneGgufWriter {
  guint32 version;
  gsize alignment;
  GPtrArray *kvs;          /* WKv* */
  GHashTable *kv_index;    /* key → WKv* */
  GPtrArray *tensors;      /* WTensor* */
  GHashTable *tensor_names;
  gsize fill_piece;        /* the most bytes a deferred tensor is made in at a time */
  HoneProgressFunc progress;
  gpointer progress_data;
};

static void
wkv_free (gpointer p)
{
  WKv *kv = p;
  g_free (kv->key);
  g_byte_array_unref (kv->value);
  g_free (kv);
}

static void
wtensor_free (gpointer p)
{
  WTensor *t = p;
  g_free (t->name);
  if (t->data)
    g_bytes_unref (t->data);
  if (t->fill_destroy)
    t->fill_destroy (t->fill_data);
  g_free (t);
}

HoneGgufWriter *
hone_gguf_writer_new (void)
{
  HoneGgufWriter *w = g_new0 (HoneGgufWriter, 1);
  w->version = 3;
  w->alignment = GGUF_DEFAULT_ALIGNMENT;
  w->kvs = g_ptr_array_new_with_free_func (wkv_free);
  w->kv_index = g_hash_table_new (g_str_hash, g_str_equal);
  w->tensors = g_ptr_array_new_with_free_func (wtensor_free);
  w->tensor_names = g_hash_table_new (g_str_hash, g_str_equal);
  w->fill_piece = HONE_TENSOR_FILL_PIECE;
  return w;
}

void
hone_gguf_writer_free (HoneGgufWriter *writer)
{
  if (writer == NULL)
    return;
  g_hash_table_unref (writer->kv_index);
  g_hash_table_unref (writer->tensor_names);
  g_ptr_array_unref (writer->kvs);
  g_ptr_array_unref (writer->tensors);
  g_free (writer);
}

static void
put_u32 (GByteArray *a, guint32 v)
{
  v = GUINT32_TO_LE (v);
  g_byte_array_append (a, (const guint8 *) &v, 4);
}

static void
put_u64 (GByteArray *a, guint64 v)
{
  v = GUINT64_TO_LE (v);
  g_byte_array_append (a, (const guint8 *) &v, 8);
}

static void
put_string (GByteArray *a, const char *s, gsize len)
{
  put_u64 (a, len);
  g_byte_array_append (a, (const guint8 *) s, len);
}

/* Start (or restart, replacing the old value in place) the entry for @key. */
static GByteArray *
begin_kv (HoneGgufWriter *w, const char *key, HoneGgufType type)
{
  WKv *kv = g_hash_table_lookup (w->kv_index, key);
  if (kv == NULL)
    {
      kv = g_new0 (WKv, 1);
      kv->key = g_strdup (key);
      kv->value = g_byte_array_new ();
      g_ptr_array_add (w->kvs, kv);
      g_hash_table_insert (w->kv_index, kv->key, kv);
    }
  g_byte_array_set_size (kv->value, 0);
  put_u32 (kv->value, type);
  return kv->value;
}

static void
add_scalar (HoneGgufWriter *w, const char *key, HoneGgufType type, const void *le_value)
{
  g_return_if_fail (w != NULL && key != NULL);
  g_byte_array_append (begin_kv (w, key, type), le_value, scalar_size (type));
}

void
hone_gguf_writer_set_alignment (HoneGgufWriter *writer, gsize alignment)
{
  g_return_if_fail (writer != NULL);
  g_return_if_fail (alignment > 0 && (alignment & (alignment - 1)) == 0 && alignment <= G_MAXUINT32);
  hone_gguf_writer_add_u32 (writer, "general.alignment", (guint32) alignment);
}

void
hone_gguf_writer_add_u8 (HoneGgufWriter *w, const char *key, guint8 value)
{
  add_scalar (w, key, HONE_GGUF_UINT8, &value);
}

void
hone_gguf_writer_add_i8 (HoneGgufWriter *w, const char *key, gint8 value)
{
  add_scalar (w, key, HONE_GGUF_INT8, &value);
}

void
hone_gguf_writer_add_u16 (HoneGgufWriter *w, const char *key, guint16 value)
{
  value = GUINT16_TO_LE (value);
  add_scalar (w, key, HONE_GGUF_UINT16, &value);
}

void
hone_gguf_writer_add_i16 (HoneGgufWriter *w, const char *key, gint16 value)
{
  value = GINT16_TO_LE (value);
  add_scalar (w, key, HONE_GGUF_INT16, &value);
}

void
hone_gguf_writer_add_u32 (HoneGgufWriter *w, const char *key, guint32 value)
{
  guint32 le = GUINT32_TO_LE (value);
  add_scalar (w, key, HONE_GGUF_UINT32, &le);
  /* general.alignment governs the layout of what we write. */
  if (strcmp (key, "general.alignment") == 0 && value > 0 && (value & (value - 1)) == 0)
    w->alignment = value;
}

void
hone_gguf_writer_add_i32 (HoneGgufWriter *w, const char *key, gint32 value)
{
  value = GINT32_TO_LE (value);
  add_scalar (w, key, HONE_GGUF_INT32, &value);
}

void
hone_gguf_writer_add_u64 (HoneGgufWriter *w, const char *key, guint64 value)
{
  value = GUINT64_TO_LE (value);
  add_scalar (w, key, HONE_GGUF_UINT64, &value);
}

void
hone_gguf_writer_add_i64 (HoneGgufWriter *w, const char *key, gint64 value)
{
  value = GINT64_TO_LE (value);
  add_scalar (w, key, HONE_GGUF_INT64, &value);
}

void
hone_gguf_writer_add_f32 (HoneGgufWriter *w, const char *key, float value)
{
  guint32 u;
  memcpy (&u, &value, 4);
  u = GUINT32_TO_LE (u);
  add_scalar (w, key, HONE_GGUF_FLOAT32, &u);
}

void
hone_gguf_writer_add_f64 (HoneGgufWriter *w, const char *key, double value)
{
  guint64 u;
  memcpy (&u, &value, 8);
  u = GUINT64_TO_LE (u);
  add_scalar (w, key, HONE_GGUF_FLOAT64, &u);
}

void
hone_gguf_writer_add_bool (HoneGgufWriter *w, const char *key, gboolean value)
{
  guint8 b = value ? 1 : 0;
  add_scalar (w, key, HONE_GGUF_BOOL, &b);
}

void
hone_gguf_writer_add_string (HoneGgufWriter *w, const char *key, const char *value, gssize length)
{
  g_return_if_fail (w != NULL && key != NULL && value != NULL);
  put_string (begin_kv (w, key, HONE_GGUF_STRING), value, length < 0 ? strlen (value) : (gsize) length);
}

void
hone_gguf_writer_add_array (HoneGgufWriter *w, const char *key, HoneGgufType elem_type, const void *data, guint64 n)
{
  gsize sz = scalar_size (elem_type);
  GByteArray *a;

  g_return_if_fail (w != NULL && key != NULL);
  g_return_if_fail (sz > 0);
  g_return_if_fail (n == 0 || data != NULL);
  a = begin_kv (w, key, HONE_GGUF_ARRAY);
  put_u32 (a, elem_type);
  put_u64 (a, n);
#if G_BYTE_ORDER == G_LITTLE_ENDIAN
  g_byte_array_append (a, data, (guint) (n * sz));
#else
  for (guint64 i = 0; i < n; i++)
    for (gsize b = 0; b < sz; b++)
      g_byte_array_append (a, (const guint8 *) data + i * sz + (sz - 1 - b), 1);
#endif
}

void
hone_gguf_writer_add_string_array (HoneGgufWriter *w, const char *key, const char *const *strings,
                                   const gsize *lengths, guint64 n)
{
  GByteArray *a;

  g_return_if_fail (w != NULL && key != NULL);
  g_return_if_fail (n == 0 || strings != NULL);
  a = begin_kv (w, key, HONE_GGUF_ARRAY);
  put_u32 (a, HONE_GGUF_STRING);
  put_u64 (a, n);
  for (guint64 i = 0; i < n; i++)
    put_string (a, strings[i], lengths ? lengths[i] : strlen (strings[i]));
}

void
hone_gguf_writer_copy_kv (HoneGgufWriter *w, const HoneGguf *from, guint index)
{
  const Kv *kv;
  GByteArray *a;

  g_return_if_fail (w != NULL && from != NULL && index < from->n_kv);
  kv = &from->kvs[index];
  /* The encoding is the same in v2 and v3: copy the validated bytes as they are. */
  a = begin_kv (w, kv->key, kv->type);
  g_byte_array_append (a, from->data + kv->value_off, (guint) kv->value_len);
  if (kv->type == HONE_GGUF_UINT32 && strcmp (kv->key, "general.alignment") == 0)
    {
      guint32 v;
      memcpy (&v, from->data + kv->value_off, 4);
      hone_gguf_writer_add_u32 (w, kv->key, GUINT32_FROM_LE (v));
    }
}

/* @data (a ref is taken), or (data NULL) @nbytes that @fill writes when the
 * file is; @fill_data is the writer's from here on (freed on failure). */
static gboolean
add_tensor (HoneGgufWriter *w, const char *name, HoneDType type, int n_dims, const int64_t *ne,
            GBytes *data, gsize nbytes, HoneTensorFillFunc fill, gpointer fill_data, GDestroyNotify fill_destroy,
            GError **error)
{
  WTensor *t;
  guint64 n = 1;
  gsize row_bytes;
  guint64 expect;
  gboolean ok = FALSE;

  if (name == NULL || g_hash_table_contains (w->tensor_names, name))
    {
      g_set_error (error, HONE_ERROR, HONE_ERROR_INVALID_ARGUMENT,
                   _("GGUF writer: tensor name '%s' is missing or already used"), name ? name : "(null)");
      goto out;
    }
  if (hone_dtype_block_size (type) == 0 || !hone_dtype_is_gguf (type))
    {
      g_set_error (error, HONE_ERROR, HONE_ERROR_UNSUPPORTED_TYPE,
                   _("GGUF writer: tensor '%s' has unknown type %d"), name, (int) type);
      goto out;
    }
  if (n_dims < 1 || n_dims > HONE_TENSOR_MAX_DIMS || ne == NULL)
    {
      g_set_error (error, HONE_ERROR, HONE_ERROR_INVALID_ARGUMENT,
                   _("GGUF writer: tensor '%s' has %d dimensions"), name, n_dims);
      goto out;
    }
  for (int i = 0; i < n_dims; i++)
    if (ne[i] <= 0 || !g_uint64_checked_mul (&n, n, (guint64) ne[i]) || n > G_MAXINT64)
      {
        g_set_error (error, HONE_ERROR, HONE_ERROR_INVALID_ARGUMENT,
                     _("GGUF writer: tensor '%s' has invalid dimension %d"), name, i);
        goto out;
      }
  row_bytes = hone_dtype_row_bytes (type, ne[0]);
  if (row_bytes == 0 || !g_uint64_checked_mul (&expect, row_bytes, n / (guint64) ne[0]) || expect != nbytes)
    {
      g_set_error (error, HONE_ERROR, HONE_ERROR_SHAPE_MISMATCH,
                   _("GGUF writer: tensor '%s' (%s) has %" "zu" " bytes, its shape needs %"
                     PRIu64), name, hone_dtype_name (type), nbytes,
                   row_bytes ? expect : (guint64) 0);
      goto out;
    }
  t = g_new0 (WTensor, 1);
  t->name = g_strdup (name);
  t->type = type;
  t->n_dims = n_dims;
  for (int i = 0; i < HONE_TENSOR_MAX_DIMS; i++)
    t->ne[i] = i < n_dims ? ne[i] : 1;
  t->nbytes = nbytes;
  t->data = data ? g_bytes_ref (data) : NULL;
  t->fill = fill;
  t->fill_data = g_steal_pointer (&fill_data);
  t->fill_destroy = fill_destroy;
  g_ptr_array_add (w->tensors, t);
  g_hash_table_add (w->tensor_names, t->name);
  ok = TRUE;
out:
  if (fill_data != NULL && fill_destroy != NULL)
    fill_destroy (fill_data);
  return ok;
}

gboolean
hone_gguf_writer_add_tensor (HoneGgufWriter *writer, const char *name, HoneDType type,
                             int n_dims, const int64_t *ne, const void *data, gsize nbytes, GError **error)
{
  GBytes *b;
  gboolean ok;

  g_return_val_if_fail (writer != NULL, FALSE);
  g_return_val_if_fail (data != NULL || nbytes == 0, FALSE);
  b = g_bytes_new (data, nbytes);
  ok = add_tensor (writer, name, type, n_dims, ne, b, nbytes, NULL, NULL, NULL, error);
  g_bytes_unref (b);
  return ok;
}

gboolean
hone_gguf_writer_add_tensor_bytes (HoneGgufWriter *writer, const char *name, HoneDType type,
                                   int n_dims, const int64_t *ne, GBytes *data, GError **error)
{
  g_return_val_if_fail (writer != NULL && data != NULL, FALSE);
  return add_tensor (writer, name, type, n_dims, ne, data, g_bytes_get_size (data), NULL, NULL, NULL, error);
}

gboolean
hone_gguf_writer_add_tensor_deferred (HoneGgufWriter *writer, const char *name, HoneDType type, int n_dims,
                                      const int64_t *ne, gsize nbytes, HoneTensorFillFunc fill, gpointer fill_data,
                                      GDestroyNotify fill_destroy, GError **error)
{
  if (writer == NULL || fill == NULL)
    {
      if (fill_data != NULL && fill_destroy != NULL)
        fill_destroy (fill_data);
      g_return_val_if_fail (writer != NULL && fill != NULL, FALSE);
    }
  return add_tensor (writer, name, type, n_dims, ne, NULL, nbytes, fill, fill_data, fill_destroy, error);
}

void
hone_gguf_writer_set_fill_piece (HoneGgufWriter *writer, gsize max_bytes)
{
  g_return_if_fail (writer != NULL);
  writer->fill_piece = max_bytes > 0 ? max_bytes : HONE_TENSOR_FILL_PIECE;
}

void
hone_gguf_writer_set_progress (HoneGgufWriter *writer, HoneProgressFunc progress, gpointer progress_data)
{
  g_return_if_fail (writer != NULL);
  writer->progress = progress;
  writer->progress_data = progress_data;
}

void
hone_gguf_writer_set_version (HoneGgufWriter *writer, guint32 version)
{
  g_return_if_fail (writer != NULL);
  g_return_if_fail (version == 2 || version == 3);
  writer->version = version;
}

static gsize
pad_to (gsize n, gsize a)
{
  return (a - n % a) % a;
}

/* Everything before the data section, padded to the alignment; fills each
 * tensor's offset. */
static GByteArray *
build_header (HoneGgufWriter *w)
{
  GByteArray *h = g_byte_array_new ();
  static const guint8 zeros[64] = { 0 };
  gsize off = 0;

  g_byte_array_append (h, (const guint8 *) GGUF_MAGIC, 4);
  put_u32 (h, w->version);
  put_u64 (h, w->tensors->len);
  put_u64 (h, w->kvs->len);
  for (guint i = 0; i < w->kvs->len; i++)
    {
      WKv *kv = g_ptr_array_index (w->kvs, i);
      put_string (h, kv->key, strlen (kv->key));
      g_byte_array_append (h, kv->value->data, kv->value->len);
    }
  for (guint i = 0; i < w->tensors->len; i++)
    {
      WTensor *t = g_ptr_array_index (w->tensors, i);
      put_string (h, t->name, strlen (t->name));
      put_u32 (h, t->n_dims);
      for (int d = 0; d < t->n_dims; d++)
        put_u64 (h, (guint64) t->ne[d]);
      put_u32 (h, t->type);
      put_u64 (h, off);
      off += t->nbytes;
      off += pad_to (off, w->alignment);
    }
  for (gsize p = pad_to (h->len, w->alignment); p > 0;)
    {
      gsize k = MIN (p, sizeof zeros);
      g_byte_array_append (h, zeros, k);
      p -= k;
    }
  return h;
}

typedef gboolean (*SinkFunc) (gpointer sink, const void *data, gsize len, GError **error);

static gboolean
emit (HoneGgufWriter *w, SinkFunc sink, gpointer user, GError **error)
{
  static const guint8 zeros[64] = { 0 };
  GByteArray *h = build_header (w);
  gboolean ok = sink (user, h->data, h->len, error);
  gsize total = 0, done = 0;

  g_byte_array_unref (h);
  for (guint i = 0; i < w->tensors->len; i++)
    total += ((WTensor *) g_ptr_array_index (w->tensors, i))->nbytes;
  for (guint i = 0; ok && i < w->tensors->len; i++)
    {
      WTensor *t = g_ptr_array_index (w->tensors, i);
      const gsize len = t->nbytes;
      if (t->data != NULL)
        {
          ok = len == 0 || sink (user, g_bytes_get_data (t->data, NULL), len, error);
          done += len;
          if (ok && w->progress && total > 0)
            w->progress ((double) done / (double) total, w->progress_data);
        }
      else if (len > 0)
        {
          /* deferred: made now, a piece of whole rows at a time, into one buffer freed once written */
          const gsize piece = hone_tensor_fill_piece (t->n_dims, t->ne, len, w->fill_piece);
          g_autofree gpointer buf = g_try_malloc (piece);
          if (buf == NULL)
            {
              g_set_error (error, HONE_ERROR, HONE_ERROR_OUT_OF_MEMORY,
                           _("GGUF writer: no memory for tensor '%s' (%zu bytes)"), t->name, piece);
              return FALSE;
            }
          for (gsize off = 0; ok && off < len; off += piece)
            {
              const gsize n = MIN (piece, len - off);
              ok = t->fill (t->fill_data, buf, off, n, error) && sink (user, buf, n, error);
              done += n;
              if (ok && w->progress)
                w->progress ((double) done / (double) total, w->progress_data);
            }
        }
      for (gsize pad = pad_to (len, w->alignment); ok && pad > 0;)
        {
          gsize k = MIN (pad, sizeof zeros);
          ok = sink (user, zeros, k, error);
          pad -= k;
        }
    }
  return ok;
}

static gboolean
sink_bytes (gpointer user, const void *data, gsize len, GError **error)
{
  GByteArray *a = user;
  if (len > G_MAXUINT - a->len)
    {
      g_set_error (error, HONE_ERROR, HONE_ERROR_OUT_OF_MEMORY,
                   _("GGUF writer: file too large to build in memory"));
      return FALSE;
    }
  g_byte_array_append (a, data, (guint) len);
  return TRUE;
}

GBytes *
hone_gguf_writer_to_bytes (HoneGgufWriter *writer, GError **error)
{
  GByteArray *a;

  g_return_val_if_fail (writer != NULL, NULL);
  a = g_byte_array_new ();
  if (!emit (writer, sink_bytes, a, error))
    {
      g_byte_array_unref (a);
      return NULL;
    }
  return g_byte_array_free_to_bytes (a);
}

typedef struct {
  int fd;
  const char *path;
} FdSink;

static gboolean
sink_fd (gpointer user, const void *data, gsize len, GError **error)
{
  FdSink *s = user;
  const guint8 *p = data;
  while (len > 0)
    {
      ssize_t n = write (s->fd, p, MIN (len, (gsize) 1 << 30));
      if (n < 0)
        {
          int e = errno;
          if (e == EINTR)
            continue;
          g_set_error (error, HONE_ERROR, HONE_ERROR_IO, _("cannot write %s: %s"), s->path, g_strerror (e));
          return FALSE;
        }
      p += n;
      len -= (gsize) n;
    }
  return TRUE;
}

gboolean
hone_gguf_writer_write (HoneGgufWriter *writer, const char *path, GError **error)
{
  char *tmp;
  FdSink s;
  gboolean ok;

  g_return_val_if_fail (writer != NULL && path != NULL, FALSE);
  tmp = g_strconcat (path, ".XXXXXX", NULL);
  s.fd = g_mkstemp (tmp);
  s.path = tmp;
  if (s.fd < 0)
    {
      int e = errno;
      g_set_error (error, HONE_ERROR, HONE_ERROR_IO, _("cannot create %s: %s"), tmp, g_strerror (e));
      g_free (tmp);
      return FALSE;
    }
  ok = emit (writer, sink_fd, &s, error);
  if (ok && fsync (s.fd) != 0)
    {
      int e = errno;
      g_set_error (error, HONE_ERROR, HONE_ERROR_IO, _("cannot write %s: %s"), tmp, g_strerror (e));
      ok = FALSE;
    }
  /* mkstemp makes the file 0600; a model file is as readable as any other. */
  if (ok)
    {
      mode_t mask = umask (0);
      umask (mask);
      (void) fchmod (s.fd, 0666 & ~mask);
    }
  if (close (s.fd) != 0 && ok)
    {
      int e = errno;
      g_set_error (error, HONE_ERROR, HONE_ERROR_IO, _("cannot write %s: %s"), tmp, g_strerror (e));
      ok = FALSE;
    }
  if (ok && g_rename (tmp, path) != 0)
    {
      int e = errno;
      g_set_error (error, HONE_ERROR, HONE_ERROR_IO, _("cannot rename %s to %s: %s"), tmp, path, g_strerror (e));
      ok = FALSE;
    }
  if (!ok)
    g_unlink (tmp);
  g_free (tmp);
  return ok;
}
