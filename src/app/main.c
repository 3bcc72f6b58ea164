/* main.c — start the Hone app. */
#include <locale.h>

#include "hone-application.h"
#include "hone-i18n.h"

int
main (int argc, char *argv[])
{
  g_autoptr(HoneApplication) app = NULL;

  setlocale (LC_ALL, "");
  bindtextdomain (GETTEXT_PACKAGE, HONE_LOCALEDIR);
  bind_textdomain_codeset (GETTEXT_PACKAGE, "UTF-8");
  textdomain (GETTEXT_PACKAGE);

  app = hone_application_new (G_APPLICATION_DEFAULT_FLAGS);
  return g_application_run (G_APPLICATION (app), argc, argv);
}
