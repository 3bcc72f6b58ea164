/* hone-progress.h — how long work reports how far it is. */
#pragma once

#include <glib.h>

G_BEGIN_DECLS

/* @fraction of the work done, 0..1, never falling; called on the thread doing
 * the work (a UI hands it to its main context). */
typedef void (*HoneProgressFunc) (double fraction, gpointer user_data);

G_END_DECLS
