/* hone-i18n.h — gettext for libhone's user-visible strings (domain "hone"). */
#pragma once

#include <glib/gi18n-lib.h>
