/* hone-application.h — the app: one engine, one conversation store, the
 * settings; actions quit/about/preferences and the keyboard shortcuts. */
#pragma once

#include <adwaita.h>

#include "hone-conversation-store.h"
#include "hone-engine.h"

G_BEGIN_DECLS

#define HONE_TYPE_APPLICATION (hone_application_get_type ())
G_DECLARE_FINAL_TYPE (HoneApplication, hone_application, HONE, APPLICATION, AdwApplication)

HoneApplication       *hone_application_new (GApplicationFlags extra_flags);
HoneEngine            *hone_application_get_engine (HoneApplication *self);
HoneConversationStore *hone_application_get_store (HoneApplication *self);
GSettings             *hone_application_get_settings (HoneApplication *self);

G_END_DECLS
