/* hone-test-data.h — reading committed fixtures under $HONE_TEST_DATA (tests/data). */
#pragma once

#include <stdint.h>
#include <glib.h>
#include <json-glib/json-glib.h>

/* tests/data/<subdir>/<name>; the caller frees it. */
char       *hone_test_data_path (const char *subdir, const char *name);
/* The whole file; asserts it can be read. */
GBytes     *hone_test_data_load (const char *subdir, const char *name);
/* The root object of a JSON fixture; *parser_out owns it. */
JsonObject *hone_test_data_load_json (const char *subdir, const char *name, JsonParser **parser_out);
/* TRUE when @flag (e.g. "--model") is among the arguments; every copy of it is
 * removed from argv, so call it before g_test_init(). */
gboolean    hone_test_take_flag (int *argc, char **argv, const char *flag);
/* The bit pattern of a float (exact comparisons). */
uint32_t    hone_test_fbits (float f);
/* kB of this process's file-backed resident memory (RssFile of
 * /proc/self/status), or -1 where the kernel does not report it. */
gint64      hone_test_rss_file_kb (void);

/* Deferred tensors of the writer tests (HoneTensorFillFunc): a fill that
 * writes the tensor's byte i = i·7 + seed, or fails with
 * G_IO_ERROR_CANCELLED (always, or at piece fail_at_piece of a pass); it
 * asserts that a pass's pieces come first to last with no gap and counts
 * them; its free function counts itself in *freed. */
typedef struct {
  int seed;
  gboolean fail;
  int fail_at_piece;          /* -1 (hone_test_fill_new): never */
  int *freed;
  gsize next;                 /* the offset the next piece must start at */
  int pieces;                 /* of the last pass */
  gsize largest;              /* the largest piece asked for */
} HoneTestFill;
HoneTestFill *hone_test_fill_new (int seed, gboolean fail, int *freed);
gboolean    hone_test_fill_pattern (gpointer fill, void *buf, gsize offset, gsize nbytes, GError **error);
void        hone_test_fill_free (gpointer fill);

/* A progress callback's record (HoneProgressFunc's data): hone_test_progress
 * asserts every fraction is ≥ the last and ≤ 1, and counts the calls. */
typedef struct {
  double last;
  int calls;
} HoneTestProgress;
void        hone_test_progress (double fraction, gpointer progress);
