/* hone-safetensors.c — HF safetensors reader (mmap, zero-copy) and writer. */
#include <inttypes.h>
#include "hone-safetensors.h"
#include "hone-error.h"
#include "hone-file-pages.h"
#include "hone-json.h"
#include "hone-i18n.h"

#include <json-glib/json-glib.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/mman.h>
#include <glib/gstdio.h>

/* The header of a valid file nests three deep (object → tensor → shape). */
#define HEADER_MAX_DEPTH 8
/* An index maps names to shard files: two deep. */
#define INDEX_MAX_DEPTH 8

typedef struct {
  const char *name;       /* as in the file */
  HoneDType type;
  int elem_size;
  gboolean supported;
} DTypeInfo;

static const DTypeInfo dtype_table[] = {
  { "F32", HONE_DTYPE_F32, 4, TRUE },
  { "F16", HONE_DTYPE_F16, 2, TRUE },
  { "BF16", HONE_DTYPE_BF16, 2, TRUE },
  { "F64", HONE_DTYPE_F64, 8, TRUE },
  { "I64", HONE_DTYPE_I64, 8, TRUE },
  { "I32", HONE_DTYPE_I32, 4, TRUE },
  { "I16", HONE_DTYPE_I16, 2, TRUE },
  { "I8", HONE_DTYPE_I8, 1, TRUE },
  { "U8", HONE_DTYPE_I8, 1, TRUE },
  /* Known to safetensors, not read by libhone. */
  { "BOOL", HONE_DTYPE_I8, 1, FALSE },
  { "U16", HONE_DTYPE_I16, 2, FALSE },
  { "U32", HONE_DTYPE_I32, 4, FALSE },
  { "U64", HONE_DTYPE_I64, 8, FALSE },
  { "F8_E4M3", HONE_DTYPE_I8, 1, FALSE },
  { "F8_E5M2", HONE_DTYPE_I8, 1, FALSE },
};

static const DTypeInfo *
dtype_lookup (const char *name)
{
  for (gsize i = 0; i < G_N_ELEMENTS (dtype_table); i++)
    if (strcmp (dtype_table[i].name, name) == 0)
      return &dtype_table[i];
  return NULL;
}

static const DTypeInfo *
dtype_for_writer (HoneDType type)
{
  /* The first entry per HoneDType is the signed/float one we write. */
  for (gsize i = 0; i < G_N_ELEMENTS (dtype_table); i++)
    if (dtype_table[i].supported && dtype_table[i].type == type)
      return &dtype_table[i];
  return NULL;
}

/* ---- reader ------------------------------------------------------------ */

typedef struct {
  char *label;            /* file name for messages */
  GMappedFile *map;       /* a file … */
  GBytes *bytes;          /* … or bytes in memory */
  const guint8 *base;
  gsize size;
} Shard;

typedef struct {
  HoneTensor t;
  char *name;
  const char *dtype_name;
  guint shard;
  guint64 begin, end;     /* relative to the shard's data section */
  gpointer copy;          /* aligned copy when the mapping is misaligned */
} Entry;

struct _HoneSafetensors {
  gint ref_count;
  GPtrArray *shards;      /* Shard* */
  GArray *entries;        /* Entry, sorted by name once opened */
  GHashTable *by_name;    /* name → index + 1 */
  GHashTable *metadata;   /* of the first shard */
  gint64 total_bytes;
};

static void
shard_free (gpointer p)
{
  Shard *s = p;
  g_free (s->label);
  if (s->map)
    g_mapped_file_unref (s->map);
  if (s->bytes)
    g_bytes_unref (s->bytes);
  g_free (s);
}

static void
entry_clear (gpointer p)
{
  Entry *e = p;
  g_free (e->name);
  g_free (e->copy);
}

static HoneSafetensors *
st_new (void)
{
  HoneSafetensors *st = g_new0 (HoneSafetensors, 1);
  st->ref_count = 1;
  st->shards = g_ptr_array_new_with_free_func (shard_free);
  st->entries = g_array_new (FALSE, TRUE, sizeof (Entry));
  g_array_set_clear_func (st->entries, entry_clear);
  st->by_name = g_hash_table_new (g_str_hash, g_str_equal);
  return st;
}

HoneSafetensors *
hone_safetensors_ref (HoneSafetensors *st)
{
  g_return_val_if_fail (st != NULL, NULL);
  g_atomic_int_inc (&st->ref_count);
  return st;
}

void
hone_safetensors_unref (HoneSafetensors *st)
{
  if (st == NULL || !g_atomic_int_dec_and_test (&st->ref_count))
    return;
  g_hash_table_unref (st->by_name);
  if (st->metadata)
    g_hash_table_unref (st->metadata);
  g_array_unref (st->entries);
  g_ptr_array_unref (st->shards);
  g_free (st);
}

static gboolean
json_get_int (JsonNode *node, gint64 *out)
{
  if (node == NULL || !JSON_NODE_HOLDS_VALUE (node) || json_node_get_value_type (node) != G_TYPE_INT64)
    return FALSE;
  *out = json_node_get_int (node);
  return TRUE;
}

static int
compare_by_begin (gconstpointer a, gconstpointer b)
{
  const Entry *x = *(const Entry *const *) a, *y = *(const Entry *const *) b;
  if (x->begin != y->begin)
    return x->begin < y->begin ? -1 : 1;
  if (x->end != y->end)
    return x->end < y->end ? -1 : 1;
  return 0;
}

/* Parse one tensor description of @shard into an Entry appended to st->entries. */
static gboolean
parse_tensor (HoneSafetensors *st, guint shard_index, const Shard *shard, const char *name,
              JsonNode *node, guint64 data_size, const guint8 *data, GError **error)
{
  JsonObject *obj;
  JsonNode *dn, *sn, *on;
  JsonArray *shape, *offsets;
  const DTypeInfo *info;
  const char *dtype;
  Entry e = { 0 };
  guint n_dims;
  gint64 begin, end;
  guint64 nbytes;
  gboolean has_zero = FALSE;

  if (!JSON_NODE_HOLDS_OBJECT (node))
    {
      g_set_error (error, HONE_ERROR, HONE_ERROR_INVALID_JSON,
                   _("%s: tensor “%s”: description is not a JSON object"), shard->label, name);
      return FALSE;
    }
  obj = json_node_get_object (node);
  dn = json_object_get_member (obj, "dtype");
  sn = json_object_get_member (obj, "shape");
  on = json_object_get_member (obj, "data_offsets");
  if (dn == NULL || !JSON_NODE_HOLDS_VALUE (dn) || json_node_get_value_type (dn) != G_TYPE_STRING)
    {
      g_set_error (error, HONE_ERROR, HONE_ERROR_INVALID_JSON,
                   _("%s: tensor “%s”: missing or non-string “dtype”"), shard->label, name);
      return FALSE;
    }
  if (sn == NULL || !JSON_NODE_HOLDS_ARRAY (sn))
    {
      g_set_error (error, HONE_ERROR, HONE_ERROR_INVALID_JSON,
                   _("%s: tensor “%s”: missing or non-array “shape”"), shard->label, name);
      return FALSE;
    }
  if (on == NULL || !JSON_NODE_HOLDS_ARRAY (on) || json_array_get_length (json_node_get_array (on)) != 2)
    {
      g_set_error (error, HONE_ERROR, HONE_ERROR_INVALID_JSON,
                   _("%s: tensor “%s”: “data_offsets” must be an array [begin, end]"), shard->label, name);
      return FALSE;
    }

  dtype = json_node_get_string (dn);
  info = dtype_lookup (dtype);
  if (info == NULL || !info->supported)
    {
      g_set_error (error, HONE_ERROR, HONE_ERROR_UNSUPPORTED_TYPE,
                   info ? _("%s: tensor “%s”: dtype %s is not supported")
                        : _("%s: tensor “%s”: unknown dtype “%s”"),
                   shard->label, name, dtype);
      return FALSE;
    }

  shape = json_node_get_array (sn);
  n_dims = json_array_get_length (shape);
  if (n_dims > HONE_TENSOR_MAX_DIMS)
    {
      g_set_error (error, HONE_ERROR, HONE_ERROR_FILE_UNSUPPORTED,
                   _("%s: tensor “%s”: %u dimensions (at most %d supported)"),
                   shard->label, name, n_dims, HONE_TENSOR_MAX_DIMS);
      return FALSE;
    }
  nbytes = (guint64) info->elem_size;
  for (int i = 0; i < HONE_TENSOR_MAX_DIMS; i++)
    e.t.ne[i] = 1;
  for (guint i = 0; i < n_dims; i++)
    {
      gint64 d;
      if (!json_get_int (json_array_get_element (shape, i), &d))
        {
          g_set_error (error, HONE_ERROR, HONE_ERROR_INVALID_JSON,
                       _("%s: tensor “%s”: shape entry %u is not an integer"), shard->label, name, i);
          return FALSE;
        }
      if (d < 0)
        {
          g_set_error (error, HONE_ERROR, HONE_ERROR_FILE_CORRUPT,
                       _("%s: tensor “%s”: negative dimension %" PRId64), shard->label, name, d);
          return FALSE;
        }
      /* Every tensor must fit in the data section: saturate instead of overflowing. */
      if (d == 0)
        has_zero = TRUE;
      else if (nbytes > data_size / (guint64) d + 1)
        nbytes = G_MAXUINT64;
      else if (nbytes != G_MAXUINT64)
        nbytes *= (guint64) d;
      e.t.ne[n_dims - 1 - i] = d;   /* [out, in] → ne = {in, out} */
    }

  if (has_zero)
    nbytes = 0;
  offsets = json_node_get_array (on);
  if (!json_get_int (json_array_get_element (offsets, 0), &begin)
      || !json_get_int (json_array_get_element (offsets, 1), &end))
    {
      g_set_error (error, HONE_ERROR, HONE_ERROR_INVALID_JSON,
                   _("%s: tensor “%s”: data_offsets are not integers"), shard->label, name);
      return FALSE;
    }
  if (begin < 0 || end < begin || (guint64) end > data_size)
    {
      g_set_error (error, HONE_ERROR, HONE_ERROR_FILE_CORRUPT,
                   _("%s: tensor “%s”: data_offsets [%" PRId64 ", %" PRId64
                     "] outside the data section (%" PRIu64 " bytes)"),
                   shard->label, name, begin, end, data_size);
      return FALSE;
    }
  if ((guint64) (end - begin) != nbytes)
    {
      g_set_error (error, HONE_ERROR, HONE_ERROR_FILE_CORRUPT,
                   _("%s: tensor “%s”: %" PRId64 " bytes stored but its dtype and shape need %s"),
                   shard->label, name, end - begin,
                   nbytes == G_MAXUINT64 ? "more than the file holds" : "a different size");
      return FALSE;
    }

  e.name = g_strdup (name);
  e.dtype_name = info->name;
  e.shard = shard_index;
  e.begin = (guint64) begin;
  e.end = (guint64) end;
  e.t.type = info->type;
  e.t.n_dims = (int) n_dims;
  e.t.nbytes = (size_t) nbytes;
  e.t.data = data + begin;
  /* Offsets need not be aligned to the element size; hand out an aligned
   * copy then, so that readers may load elements directly. */
  if (((guintptr) e.t.data) % (guintptr) info->elem_size != 0)
    {
      e.copy = g_malloc (nbytes ? nbytes : 1);
      memcpy (e.copy, e.t.data, nbytes);
      e.t.data = e.copy;
    }
  g_array_append_val (st->entries, e);
  return TRUE;
}

/* Validate one shard's header and append its tensors. */
static gboolean
parse_shard (HoneSafetensors *st, guint shard_index, GError **error)
{
  const Shard *shard = g_ptr_array_index (st->shards, shard_index);
  g_autoptr(JsonParser) parser = NULL;
  g_autoptr(GError) json_error = NULL;
  JsonNode *root;
  JsonObject *obj;
  JsonObjectIter iter;
  const char *member;
  JsonNode *node;
  guint64 header_len, data_size;
  const char *header;
  const guint8 *data;
  guint first = st->entries->len;

  if (shard->size < 8)
    {
      g_set_error (error, HONE_ERROR, HONE_ERROR_FILE_CORRUPT,
                   _("%s: file is truncated (%" "zu" " bytes, no header length)"),
                   shard->label, shard->size);
      return FALSE;
    }
  memcpy (&header_len, shard->base, 8);
  header_len = GUINT64_FROM_LE (header_len);
  if (header_len > shard->size - 8)
    {
      g_set_error (error, HONE_ERROR, HONE_ERROR_FILE_CORRUPT,
                   _("%s: header length %" PRIu64 " exceeds the file size (%" "zu" " bytes)"),
                   shard->label, header_len, shard->size);
      return FALSE;
    }
  if (header_len > HONE_SAFETENSORS_MAX_HEADER)
    {
      g_set_error (error, HONE_ERROR, HONE_ERROR_FILE_CORRUPT,
                   _("%s: header length %" PRIu64 " exceeds the limit of %u bytes"),
                   shard->label, header_len, HONE_SAFETENSORS_MAX_HEADER);
      return FALSE;
    }
  header = (const char *) shard->base + 8;
  data = shard->base + 8 + header_len;
  data_size = shard->size - 8 - header_len;

  if (header_len < 2 || header[0] != '{' || !g_utf8_validate (header, (gssize) header_len, NULL))
    {
      g_set_error (error, HONE_ERROR, HONE_ERROR_INVALID_JSON,
                   _("%s: header is not a UTF-8 JSON object"), shard->label);
      return FALSE;
    }
  parser = json_parser_new_immutable ();
  if (!hone_json_load (parser, header, (gssize) header_len, HEADER_MAX_DEPTH, &json_error))
    {
      g_set_error (error, HONE_ERROR, HONE_ERROR_INVALID_JSON,
                   _("%s: header is not valid JSON: %s"), shard->label, json_error->message);
      return FALSE;
    }
  root = json_parser_get_root (parser);
  if (root == NULL || !JSON_NODE_HOLDS_OBJECT (root))
    {
      g_set_error (error, HONE_ERROR, HONE_ERROR_INVALID_JSON,
                   _("%s: header is not a JSON object"), shard->label);
      return FALSE;
    }
  obj = json_node_get_object (root);

  json_object_iter_init (&iter, obj);
  while (json_object_iter_next (&iter, &member, &node))
    {
      if (strcmp (member, "__metadata__") == 0)
        {
          JsonObjectIter mi;
          const char *key;
          JsonNode *value;
          g_autoptr(GHashTable) meta = NULL;

          if (!JSON_NODE_HOLDS_OBJECT (node))
            {
              g_set_error (error, HONE_ERROR, HONE_ERROR_INVALID_JSON,
                           _("%s: “__metadata__” is not a JSON object"), shard->label);
              return FALSE;
            }
          meta = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, g_free);
          json_object_iter_init (&mi, json_node_get_object (node));
          while (json_object_iter_next (&mi, &key, &value))
            {
              if (!JSON_NODE_HOLDS_VALUE (value) || json_node_get_value_type (value) != G_TYPE_STRING)
                {
                  g_set_error (error, HONE_ERROR, HONE_ERROR_INVALID_JSON,
                               _("%s: “__metadata__” value of “%s” is not a string"), shard->label, key);
                  return FALSE;
                }
              g_hash_table_insert (meta, g_strdup (key), g_strdup (json_node_get_string (value)));
            }
          if (st->metadata == NULL)
            st->metadata = g_steal_pointer (&meta);
          continue;
        }
      if (!parse_tensor (st, shard_index, shard, member, node, data_size, data, error))
        return FALSE;
    }

  /* No two tensors of this shard may share bytes. */
  {
    g_autoptr(GPtrArray) order = g_ptr_array_new ();
    const Entry *last = NULL;   /* the non-empty tensor reaching furthest so far */
    for (guint i = first; i < st->entries->len; i++)
      g_ptr_array_add (order, &g_array_index (st->entries, Entry, i));
    g_ptr_array_sort (order, compare_by_begin);
    for (guint i = 0; i < order->len; i++)
      {
        const Entry *b = g_ptr_array_index (order, i);
        if (b->begin == b->end)
          continue;
        if (last != NULL && b->begin < last->end)
          {
            g_set_error (error, HONE_ERROR, HONE_ERROR_FILE_CORRUPT,
                         _("%s: tensors “%s” and “%s” overlap"), shard->label, last->name, b->name);
            return FALSE;
          }
        last = b;
      }
  }
  return TRUE;
}

static int
compare_entries_by_name (gconstpointer a, gconstpointer b)
{
  return strcmp (((const Entry *) a)->name, ((const Entry *) b)->name);
}

/* Sort, index by name, refuse duplicates across shards. */
static gboolean
finish (HoneSafetensors *st, GError **error)
{
  g_array_sort (st->entries, compare_entries_by_name);
  for (guint i = 0; i < st->entries->len; i++)
    {
      Entry *e = &g_array_index (st->entries, Entry, i);
      e->t.name = e->name;
      if (i > 0 && strcmp (e->name, g_array_index (st->entries, Entry, i - 1).name) == 0)
        {
          const Shard *a = g_ptr_array_index (st->shards, g_array_index (st->entries, Entry, i - 1).shard);
          const Shard *b = g_ptr_array_index (st->shards, e->shard);
          g_set_error (error, HONE_ERROR, HONE_ERROR_FILE_CORRUPT,
                       _("tensor “%s” is stored twice (in %s and %s)"), e->name, a->label, b->label);
          return FALSE;
        }
      g_hash_table_insert (st->by_name, e->name, GUINT_TO_POINTER (i + 1));
    }
  return TRUE;
}

static gboolean
add_file_shard (HoneSafetensors *st, const char *path, GError **error)
{
  g_autoptr(GError) local = NULL;
  Shard *shard;
  GMappedFile *map = g_mapped_file_new (path, FALSE, &local);

  if (map == NULL)
    {
      g_set_error (error, HONE_ERROR, HONE_ERROR_IO, _("Cannot open %s: %s"), path, local->message);
      return FALSE;
    }
  shard = g_new0 (Shard, 1);
  shard->label = g_path_get_basename (path);
  shard->map = map;
  shard->base = (const guint8 *) g_mapped_file_get_contents (map);
  shard->size = g_mapped_file_get_length (map);
  if (shard->base == NULL)
    shard->size = 0;
  st->total_bytes += (gint64) shard->size;
  g_ptr_array_add (st->shards, shard);
  return parse_shard (st, st->shards->len - 1, error);
}

HoneSafetensors *
hone_safetensors_open_bytes (GBytes *bytes, GError **error)
{
  HoneSafetensors *st = st_new ();
  Shard *shard = g_new0 (Shard, 1);
  gsize size;

  g_return_val_if_fail (bytes != NULL, NULL);
  shard->label = g_strdup ("<memory>");
  shard->bytes = g_bytes_ref (bytes);
  shard->base = g_bytes_get_data (bytes, &size);
  shard->size = shard->base ? size : 0;
  st->total_bytes = (gint64) shard->size;
  g_ptr_array_add (st->shards, shard);
  if (!parse_shard (st, 0, error) || !finish (st, error))
    {
      hone_safetensors_unref (st);
      return NULL;
    }
  return st;
}

static gboolean
valid_shard_name (const char *name)
{
  return name[0] != '\0' && strchr (name, '/') == NULL && strchr (name, '\\') == NULL
         && strcmp (name, ".") != 0 && strcmp (name, "..") != 0;
}

static HoneSafetensors *
open_index (const char *index_path, GError **error)
{
  g_autoptr(GError) local = NULL;
  g_autofree char *text = NULL;
  g_autofree char *dir = g_path_get_dirname (index_path);
  g_autofree char *label = g_path_get_basename (index_path);
  g_autoptr(JsonParser) parser = NULL;
  g_autoptr(GPtrArray) shard_names = g_ptr_array_new ();
  g_autoptr(GHashTable) shard_of = g_hash_table_new (g_str_hash, g_str_equal);
  HoneSafetensors *st;
  JsonNode *root, *wm;
  JsonObjectIter iter;
  const char *name;
  JsonNode *value;
  gsize length;
  GStatBuf sb;

  if (g_stat (index_path, &sb) != 0)
    {
      g_set_error (error, HONE_ERROR, HONE_ERROR_IO, _("Cannot open %s: %s"), index_path, g_strerror (errno));
      return NULL;
    }
  if ((guint64) sb.st_size > HONE_SAFETENSORS_MAX_HEADER)
    {
      g_set_error (error, HONE_ERROR, HONE_ERROR_FILE_CORRUPT, _("%s: index is too large"), label);
      return NULL;
    }
  if (!g_file_get_contents (index_path, &text, &length, &local))
    {
      g_set_error (error, HONE_ERROR, HONE_ERROR_IO, _("Cannot read %s: %s"), index_path, local->message);
      return NULL;
    }
  parser = json_parser_new_immutable ();
  if (!hone_json_load (parser, text, (gssize) length, INDEX_MAX_DEPTH, &local))
    {
      g_set_error (error, HONE_ERROR, HONE_ERROR_INVALID_JSON, _("%s: %s"), label, local->message);
      return NULL;
    }
  root = json_parser_get_root (parser);
  wm = root && JSON_NODE_HOLDS_OBJECT (root) ? json_object_get_member (json_node_get_object (root), "weight_map") : NULL;
  if (wm == NULL || !JSON_NODE_HOLDS_OBJECT (wm))
    {
      g_set_error (error, HONE_ERROR, HONE_ERROR_INVALID_JSON, _("%s: no “weight_map” object"), label);
      return NULL;
    }
  json_object_iter_init (&iter, json_node_get_object (wm));
  while (json_object_iter_next (&iter, &name, &value))
    {
      const char *file;
      if (!JSON_NODE_HOLDS_VALUE (value) || json_node_get_value_type (value) != G_TYPE_STRING
          || !valid_shard_name ((file = json_node_get_string (value))))
        {
          g_set_error (error, HONE_ERROR, HONE_ERROR_INVALID_JSON,
                       _("%s: weight_map entry of tensor “%s” is not a file name in the same folder"), label, name);
          return NULL;
        }
      if (!g_hash_table_contains (shard_of, file))
        {
          g_ptr_array_add (shard_names, (gpointer) file);
          g_hash_table_insert (shard_of, (gpointer) file, GUINT_TO_POINTER (shard_names->len));
        }
    }
  if (shard_names->len == 0)
    {
      g_set_error (error, HONE_ERROR, HONE_ERROR_FILE_CORRUPT, _("%s: weight_map is empty"), label);
      return NULL;
    }

  st = st_new ();
  for (guint i = 0; i < shard_names->len; i++)
    {
      g_autofree char *path = g_build_filename (dir, g_ptr_array_index (shard_names, i), NULL);
      if (!add_file_shard (st, path, error))
        goto fail;
    }
  if (!finish (st, error))
    goto fail;

  /* Every tensor the index lists must be in the shard it names. */
  json_object_iter_init (&iter, json_node_get_object (wm));
  while (json_object_iter_next (&iter, &name, &value))
    {
      const char *file = json_node_get_string (value);
      guint want = GPOINTER_TO_UINT (g_hash_table_lookup (shard_of, file)) - 1;
      gpointer idx = g_hash_table_lookup (st->by_name, name);
      if (idx == NULL || g_array_index (st->entries, Entry, GPOINTER_TO_UINT (idx) - 1).shard != want)
        {
          g_set_error (error, HONE_ERROR, HONE_ERROR_FILE_CORRUPT,
                       _("%s: tensor “%s” is not in %s as the index says"), label, name, file);
          goto fail;
        }
    }
  return st;

fail:
  hone_safetensors_unref (st);
  return NULL;
}

HoneSafetensors *
hone_safetensors_open (const char *path, GError **error)
{
  HoneSafetensors *st;

  g_return_val_if_fail (path != NULL, NULL);
  if (g_file_test (path, G_FILE_TEST_IS_DIR))
    {
      g_autofree char *index = g_build_filename (path, "model.safetensors.index.json", NULL);
      g_autofree char *single = g_build_filename (path, "model.safetensors", NULL);
      g_autoptr(GDir) d = NULL;
      g_autofree char *found = NULL;
      const char *entry;
      int n_found = 0;

      if (g_file_test (index, G_FILE_TEST_IS_REGULAR))
        return open_index (index, error);
      if (g_file_test (single, G_FILE_TEST_IS_REGULAR))
        return hone_safetensors_open (single, error);
      d = g_dir_open (path, 0, NULL);
      while (d && (entry = g_dir_read_name (d)) != NULL)
        if (g_str_has_suffix (entry, ".safetensors"))
          {
            n_found++;
            g_free (found);
            found = g_build_filename (path, entry, NULL);
          }
      if (n_found == 1)
        return hone_safetensors_open (found, error);
      g_set_error (error, HONE_ERROR, n_found ? HONE_ERROR_FILE_UNSUPPORTED : HONE_ERROR_IO,
                   n_found ? _("%s: several .safetensors files but no model.safetensors.index.json")
                           : _("%s: no .safetensors file in this folder"),
                   path);
      return NULL;
    }
  if (g_str_has_suffix (path, ".json"))
    return open_index (path, error);

  st = st_new ();
  if (!add_file_shard (st, path, error) || !finish (st, error))
    {
      hone_safetensors_unref (st);
      return NULL;
    }
  return st;
}

guint
hone_safetensors_n_tensors (const HoneSafetensors *st)
{
  return st->entries->len;
}

const HoneTensor *
hone_safetensors_tensor (const HoneSafetensors *st, guint index)
{
  g_return_val_if_fail (index < st->entries->len, NULL);
  return &g_array_index (st->entries, Entry, index).t;
}

const char *
hone_safetensors_tensor_dtype_name (const HoneSafetensors *st, guint index)
{
  g_return_val_if_fail (index < st->entries->len, NULL);
  return g_array_index (st->entries, Entry, index).dtype_name;
}

const HoneTensor *
hone_safetensors_find_tensor (const HoneSafetensors *st, const char *name)
{
  gpointer idx = g_hash_table_lookup (st->by_name, name);
  return idx ? &g_array_index (st->entries, Entry, GPOINTER_TO_UINT (idx) - 1).t : NULL;
}

void
hone_safetensors_release_bytes (const HoneSafetensors *st, const void *data, gsize nbytes)
{
  const guint8 *p = data;
  if (st == NULL || p == NULL || nbytes == 0)
    return;
  for (guint i = 0; i < st->shards->len; i++)
    {
      const Shard *shard = g_ptr_array_index (st->shards, i);
      if (shard->map != NULL && p >= shard->base && nbytes <= shard->size && (gsize) (p - shard->base) <= shard->size - nbytes)
        {
          hone_file_pages_release (p, nbytes);
          return;
        }
    }
}

void
hone_safetensors_release_tensor (const HoneSafetensors *st, const HoneTensor *t)
{
  const gpointer idx = t != NULL && t->name != NULL ? g_hash_table_lookup (st->by_name, t->name) : NULL;
  const Entry *e;

  if (idx == NULL)
    return;
  e = &g_array_index (st->entries, Entry, GPOINTER_TO_UINT (idx) - 1);
  if (&e->t != t || e->copy != NULL)
    return;   /* not this file's tensor, or a copy */
  hone_safetensors_release_bytes (st, t->data, t->nbytes);
}

const char *
hone_safetensors_get_metadata (const HoneSafetensors *st, const char *key)
{
  return st->metadata ? g_hash_table_lookup (st->metadata, key) : NULL;
}

guint
hone_safetensors_n_files (const HoneSafetensors *st)
{
  return st->shards->len;
}

gint64
hone_safetensors_total_bytes (const HoneSafetensors *st)
{
  return st->total_bytes;
}

/* ---- writer ------------------------------------------------------------ */

typedef struct {
  char *name;
  const DTypeInfo *info;
  int n_dims;
  int64_t ne[HONE_TENSOR_MAX_DIMS];
  gsize nbytes;
  GBytes *data;             /* NULL for a deferred tensor: */
  HoneTensorFillFunc fill;
  gpointer fill_data;
  GDestroyNotify fill_destroy;
} WEntry;

struct _HoneSafetensorsWriter {
  GPtrArray *entries;       /* WEntry* */
  GPtrArray *meta;          /* key, value, key, value… (format first) */
  gsize fill_piece;         /* the most bytes a deferred tensor is made in at a time */
  HoneProgressFunc progress;
  gpointer progress_data;
};

static void
wentry_free (gpointer p)
{
  WEntry *e = p;
  g_free (e->name);
  if (e->data)
    g_bytes_unref (e->data);
  if (e->fill_destroy)
    e->fill_destroy (e->fill_data);
  g_free (e);
}

HoneSafetensorsWriter *
hone_safetensors_writer_new (void)
{
  HoneSafetensorsWriter *w = g_new0 (HoneSafetensorsWriter, 1);
  w->entries = g_ptr_array_new_with_free_func (wentry_free);
  w->meta = g_ptr_array_new_with_free_func (g_free);
  w->fill_piece = HONE_TENSOR_FILL_PIECE;
  g_ptr_array_add (w->meta, g_strdup ("format"));
  g_ptr_array_add (w->meta, g_strdup ("pt"));
  return w;
}

void
hone_safetensors_writer_free (HoneSafetensorsWriter *writer)
{
  if (writer == NULL)
    return;
  g_ptr_array_unref (writer->entries);
  g_ptr_array_unref (writer->meta);
  g_free (writer);
}

void
hone_safetensors_writer_set_fill_piece (HoneSafetensorsWriter *writer, gsize max_bytes)
{
  g_return_if_fail (writer != NULL);
  writer->fill_piece = max_bytes > 0 ? max_bytes : HONE_TENSOR_FILL_PIECE;
}

void
hone_safetensors_writer_set_progress (HoneSafetensorsWriter *writer, HoneProgressFunc progress,
                                      gpointer progress_data)
{
  g_return_if_fail (writer != NULL);
  writer->progress = progress;
  writer->progress_data = progress_data;
}

void
hone_safetensors_writer_add_metadata (HoneSafetensorsWriter *writer, const char *key, const char *value)
{
  for (guint i = 0; i < writer->meta->len; i += 2)
    if (strcmp (g_ptr_array_index (writer->meta, i), key) == 0)
      {
        g_free (writer->meta->pdata[i + 1]);
        writer->meta->pdata[i + 1] = g_strdup (value);
        return;
      }
  g_ptr_array_add (writer->meta, g_strdup (key));
  g_ptr_array_add (writer->meta, g_strdup (value));
}

/* Checks the tensor and adds it: @bytes, or (bytes NULL) @nbytes that @fill
 * writes when the file is; takes @bytes and @fill_data (freed on failure). */
static gboolean
writer_add (HoneSafetensorsWriter *writer, const char *name, HoneDType type, int n_dims, const int64_t *ne,
            GBytes *bytes, gsize nbytes, HoneTensorFillFunc fill, gpointer fill_data,
            GDestroyNotify fill_destroy, GError **error)
{
  gboolean ok = FALSE;
  const DTypeInfo *info = dtype_for_writer (type);
  guint64 want;
  WEntry *e;

  if (info == NULL)
    {
      g_set_error (error, HONE_ERROR, HONE_ERROR_UNSUPPORTED_TYPE,
                   _("tensor “%s”: safetensors cannot hold type %s"), name,
                   hone_dtype_name (type) ? hone_dtype_name (type) : "?");
      goto out;
    }
  if (name == NULL || name[0] == '\0' || !g_utf8_validate (name, -1, NULL) || strcmp (name, "__metadata__") == 0)
    {
      g_set_error (error, HONE_ERROR, HONE_ERROR_INVALID_ARGUMENT, _("invalid tensor name"));
      goto out;
    }
  if (n_dims < 0 || n_dims > HONE_TENSOR_MAX_DIMS)
    {
      g_set_error (error, HONE_ERROR, HONE_ERROR_INVALID_ARGUMENT,
                   _("tensor “%s”: %d dimensions"), name, n_dims);
      goto out;
    }
  want = (guint64) info->elem_size;
  for (int i = 0; i < n_dims; i++)
    {
      if (ne[i] < 0 || (ne[i] > 0 && want > G_MAXUINT64 / (guint64) ne[i]))
        {
          g_set_error (error, HONE_ERROR, HONE_ERROR_INVALID_ARGUMENT,
                       _("tensor “%s”: invalid shape"), name);
          goto out;
        }
      want *= (guint64) ne[i];
    }
  if (want != nbytes)
    {
      g_set_error (error, HONE_ERROR, HONE_ERROR_INVALID_ARGUMENT,
                   _("tensor “%s”: %" "zu" " bytes given, shape needs %" PRIu64),
                   name, nbytes, want);
      goto out;
    }
  for (guint i = 0; i < writer->entries->len; i++)
    if (strcmp (((WEntry *) g_ptr_array_index (writer->entries, i))->name, name) == 0)
      {
        g_set_error (error, HONE_ERROR, HONE_ERROR_INVALID_ARGUMENT,
                     _("tensor “%s” added twice"), name);
        goto out;
      }
  e = g_new0 (WEntry, 1);
  e->name = g_strdup (name);
  e->info = info;
  e->n_dims = n_dims;
  for (int i = 0; i < n_dims; i++)
    e->ne[i] = ne[i];
  e->nbytes = nbytes;
  e->data = g_steal_pointer (&bytes);
  e->fill = fill;
  e->fill_data = g_steal_pointer (&fill_data);
  e->fill_destroy = fill_destroy;
  g_ptr_array_add (writer->entries, e);
  ok = TRUE;
out:
  if (bytes != NULL)
    g_bytes_unref (bytes);
  if (fill_data != NULL && fill_destroy != NULL)
    fill_destroy (fill_data);
  return ok;
}

gboolean
hone_safetensors_writer_add_tensor (HoneSafetensorsWriter *writer, const char *name, HoneDType type,
                                    int n_dims, const int64_t *ne, const void *data, gsize nbytes,
                                    GError **error)
{
  return writer_add (writer, name, type, n_dims, ne, g_bytes_new (data, nbytes), nbytes, NULL, NULL, NULL, error);
}

gboolean
hone_safetensors_writer_add_tensor_take (HoneSafetensorsWriter *writer, const char *name, HoneDType type,
                                         int n_dims, const int64_t *ne, gpointer data, gsize nbytes,
                                         GError **error)
{
  return writer_add (writer, name, type, n_dims, ne, g_bytes_new_take (data, nbytes), nbytes, NULL, NULL, NULL, error);
}

gboolean
hone_safetensors_writer_add_tensor_deferred (HoneSafetensorsWriter *writer, const char *name, HoneDType type,
                                             int n_dims, const int64_t *ne, gsize nbytes,
                                             HoneTensorFillFunc fill, gpointer fill_data,
                                             GDestroyNotify fill_destroy, GError **error)
{
  g_return_val_if_fail (fill != NULL, FALSE);
  return writer_add (writer, name, type, n_dims, ne, NULL, nbytes, fill, fill_data, fill_destroy, error);
}

/* Where an entry's bytes go: FALSE when they could not be taken (errno set). */
typedef gboolean (*WSink) (gpointer user, const void *data, gsize n);

/* Hands @e's bytes to @sink: its own, or (deferred) made by its fill function
 * a piece of whole rows at a time (at most the writer's fill piece) in one
 * buffer freed right after; *@done counts the bytes handed over of @total,
 * reported to the writer's progress function. FALSE with @fill_error set when
 * the fill failed or no buffer could be had, FALSE with it unset when @sink
 * failed. */
static gboolean
entry_emit (const HoneSafetensorsWriter *w, const WEntry *e, gsize *done, gsize total, WSink sink, gpointer user,
            GError **fill_error)
{
  gsize piece;
  g_autofree gpointer buf = NULL;

  if (e->data || e->nbytes == 0)
    {
      if (e->nbytes > 0 && !sink (user, g_bytes_get_data (e->data, NULL), e->nbytes))
        return FALSE;
      *done += e->nbytes;
      if (w->progress && total > 0)
        w->progress ((double) *done / (double) total, w->progress_data);
      return TRUE;
    }
  piece = hone_tensor_fill_piece (e->n_dims, e->ne, e->nbytes, w->fill_piece);
  buf = g_try_malloc (piece);
  if (buf == NULL)
    {
      g_set_error (fill_error, HONE_ERROR, HONE_ERROR_OUT_OF_MEMORY, _("tensor “%s”: out of memory (%zu bytes)"),
                   e->name, piece);
      return FALSE;
    }
  for (gsize off = 0; off < e->nbytes; off += piece)
    {
      const gsize n = MIN (piece, e->nbytes - off);
      if (!e->fill (e->fill_data, buf, off, n, fill_error))
        return FALSE;
      if (!sink (user, buf, n))
        return FALSE;
      *done += n;
      if (w->progress)
        w->progress ((double) *done / (double) total, w->progress_data);
    }
  return TRUE;
}

/* Every entry's bytes to @sink, in the header's order (entry_emit). */
static gboolean
emit_entries (const HoneSafetensorsWriter *w, WSink sink, gpointer user, GError **fill_error)
{
  gsize total = 0, done = 0;
  for (guint i = 0; i < w->entries->len; i++)
    total += ((const WEntry *) g_ptr_array_index (w->entries, i))->nbytes;
  for (guint i = 0; i < w->entries->len; i++)
    if (!entry_emit (w, g_ptr_array_index (w->entries, i), &done, total, sink, user, fill_error))
      return FALSE;
  return TRUE;
}

static void
append_json_string (GString *s, const char *str)
{
  g_string_append_c (s, '"');
  for (const char *p = str; *p; p++)
    {
      unsigned char c = (unsigned char) *p;
      if (c == '"' || c == '\\')
        {
          g_string_append_c (s, '\\');
          g_string_append_c (s, (char) c);
        }
      else if (c < 0x20)
        g_string_append_printf (s, "\\u%04x", c);
      else
        g_string_append_c (s, (char) c);
    }
  g_string_append_c (s, '"');
}

static int
compare_wentries (gconstpointer a, gconstpointer b)
{
  const WEntry *x = *(const WEntry *const *) a, *y = *(const WEntry *const *) b;
  /* Widest elements first keeps every tensor aligned without padding gaps
   * (which the reference reader refuses). */
  if (x->info->elem_size != y->info->elem_size)
    return y->info->elem_size - x->info->elem_size;
  return strcmp (x->name, y->name);
}

/* The 8-byte length + padded header; entries sorted in place. */
static GString *
build_header (HoneSafetensorsWriter *writer)
{
  GString *h = g_string_new (NULL);
  guint64 offset = 0, len;

  g_ptr_array_sort (writer->entries, compare_wentries);
  g_string_append (h, "{\"__metadata__\":{");
  for (guint i = 0; i < writer->meta->len; i += 2)
    {
      if (i > 0)
        g_string_append_c (h, ',');
      append_json_string (h, g_ptr_array_index (writer->meta, i));
      g_string_append_c (h, ':');
      append_json_string (h, g_ptr_array_index (writer->meta, i + 1));
    }
  g_string_append_c (h, '}');
  for (guint i = 0; i < writer->entries->len; i++)
    {
      const WEntry *e = g_ptr_array_index (writer->entries, i);
      gsize n = e->nbytes;
      g_string_append_c (h, ',');
      append_json_string (h, e->name);
      g_string_append_printf (h, ":{\"dtype\":\"%s\",\"shape\":[", e->info->name);
      for (int d = e->n_dims - 1; d >= 0; d--)
        g_string_append_printf (h, "%" PRId64 "%s", (gint64) e->ne[d], d ? "," : "");
      g_string_append_printf (h, "],\"data_offsets\":[%" PRIu64 ",%" PRIu64 "]}",
                              offset, offset + n);
      offset += n;
    }
  g_string_append_c (h, '}');
  while (h->len % 8 != 0)
    g_string_append_c (h, ' ');
  len = GUINT64_TO_LE ((guint64) h->len);
  g_string_prepend_len (h, (const char *) &len, 8);
  return h;
}

static gboolean
sink_array (gpointer user, const void *data, gsize n)
{
  g_byte_array_append (user, data, (guint) n);
  return TRUE;
}

GBytes *
hone_safetensors_writer_to_bytes (HoneSafetensorsWriter *writer, GError **error)
{
  GString *h = build_header (writer);
  GByteArray *out = g_byte_array_new ();

  g_byte_array_append (out, (const guint8 *) h->str, h->len);
  g_string_free (h, TRUE);
  if (!emit_entries (writer, sink_array, out, error))
    {
      g_byte_array_unref (out);
      return NULL;
    }
  return g_byte_array_free_to_bytes (out);
}

static gboolean
write_all (int fd, const void *buf, gsize n)
{
  const char *p = buf;
  while (n > 0)
    {
      gssize w = write (fd, p, MIN (n, (gsize) 1 << 30));
      if (w < 0)
        {
          if (errno == EINTR)
            continue;
          return FALSE;
        }
      p += w;
      n -= (gsize) w;
    }
  return TRUE;
}

typedef struct {
  int fd;
  int err;                  /* errno of a failed write */
} FdSink;

static gboolean
sink_fd (gpointer user, const void *data, gsize n)
{
  FdSink *s = user;
  if (write_all (s->fd, data, n))
    return TRUE;
  s->err = errno;
  return FALSE;
}

gboolean
hone_safetensors_writer_write (HoneSafetensorsWriter *writer, const char *path, GError **error)
{
  g_autofree char *tmp = g_strdup_printf ("%s.XXXXXX", path);
  GString *h;
  gboolean ok;
  int fd, saved;
  GError *fill_error = NULL;

  fd = g_mkstemp_full (tmp, O_RDWR | O_CLOEXEC, 0644);
  if (fd < 0)
    {
      g_set_error (error, HONE_ERROR, HONE_ERROR_IO, _("Cannot create a file beside %s: %s"),
                   path, g_strerror (errno));
      return FALSE;
    }
  h = build_header (writer);
  ok = write_all (fd, h->str, h->len);
  g_string_free (h, TRUE);
  saved = errno;
  if (ok)
    {
      FdSink sink = { fd, 0 };
      ok = emit_entries (writer, sink_fd, &sink, &fill_error);
      saved = sink.err;
    }
  if (ok)
    {
      ok = fsync (fd) == 0;
      saved = errno;
    }
  if (close (fd) != 0 && ok)
    {
      ok = FALSE;
      saved = errno;
    }
  if (ok && g_rename (tmp, path) != 0)
    {
      ok = FALSE;
      saved = errno;
    }
  if (!ok)
    {
      g_unlink (tmp);
      if (fill_error != NULL)   /* a deferred tensor's own error (cancelled, out of memory) */
        g_propagate_error (error, fill_error);
      else
        g_set_error (error, HONE_ERROR, HONE_ERROR_IO, _("Cannot write %s: %s"), path, g_strerror (saved));
    }
  return ok;
}
