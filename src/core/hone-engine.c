/* hone-engine.c — the engine thread, its job queue, sessions and delivery.
 *
 * Threads. The engine thread runs jobs from a queue one at a time and is the
 * only thread that touches the backend, the loaded HoneModel's backend state,
 * the compiled chat template and the sessions' KV bookkeeping. Every job
 * carries the GMainContext of its caller; the engine thread appends events
 * (progress, tokens, "done") to the job and wakes that context, where one
 * idle source drains them in order, so tokens always arrive before the
 * completion callback. The job (and with it the GTask, which holds the
 * engine) is freed on the caller's context, never on the engine thread, so
 * the last engine ref can never drop on the engine thread itself.
 *
 * Published state (state, model info, capabilities…) is written under a lock
 * and read under it; property notifications go through one GSource attached
 * to the engine's owner context, woken with g_source_set_ready_time().
 */
#include "hone-engine.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "hone-backend.h"
#include "hone-chat-template.h"
#include "hone-error.h"
#include "hone-i18n.h"
#include "hone-model.h"
#include "hone-tokenizer.h"

#ifdef HONE_HAVE_CUDA
#include <cuda_runtime_api.h>
#endif

/* Prompt tokens per forward pass during prefill, unless the backend asks for
 * more (HoneBackendClass.prefill_chunk): progress, cancellation and memory
 * are checked between chunks. */
#define PREFILL_CHUNK 256
/* Tokens per window pass when scoring perplexity (logits of all positions). */
#define PPL_CHUNK 128
/* Default context when neither the caller nor a small model bounds it. */
#define DEFAULT_CONTEXT 4096

/* ---- boxed helpers ------------------------------------------------------------- */

GType
hone_engine_caps_get_type (void)
{
  static gsize type = 0;
  if (g_once_init_enter (&type))
    {
      static const GFlagsValue values[] = {
        { HONE_ENGINE_CAP_INT8_KV, "HONE_ENGINE_CAP_INT8_KV", "int8-kv" },
        { HONE_ENGINE_CAP_SPECULATIVE, "HONE_ENGINE_CAP_SPECULATIVE", "speculative" },
        { HONE_ENGINE_CAP_PD_SPLIT, "HONE_ENGINE_CAP_PD_SPLIT", "pd-split" },
        { HONE_ENGINE_CAP_GPU_SAMPLING, "HONE_ENGINE_CAP_GPU_SAMPLING", "gpu-sampling" },
        { 0, NULL, NULL },
      };
      g_once_init_leave (&type, g_flags_register_static ("HoneEngineCaps", values));
    }
  return type;
}

G_DEFINE_BOXED_TYPE (HoneDevice, hone_device, hone_device_copy, hone_device_free)
G_DEFINE_BOXED_TYPE (HoneGenerateResult, hone_generate_result,
                     hone_generate_result_copy, hone_generate_result_free)

HoneDevice *
hone_device_copy (const HoneDevice *device)
{
  HoneDevice *d = g_memdup2 (device, sizeof *device);
  d->id = g_strdup (device->id);
  d->name = g_strdup (device->name);
  return d;
}

void
hone_device_free (HoneDevice *device)
{
  if (device == NULL)
    return;
  g_free (device->id);
  g_free (device->name);
  g_free (device);
}

GPtrArray *
hone_engine_list_devices (void)
{
  GPtrArray *devices = g_ptr_array_new_with_free_func ((GDestroyNotify) hone_device_free);
  HoneDevice *cpu = g_new0 (HoneDevice, 1);
  g_autofree char *model = hone_metrics_cpu_model ();

  cpu->id = g_strdup ("cpu");
  cpu->kind = HONE_DEVICE_CPU;
  cpu->n_cores = hone_cpu_backend_default_threads ();
  cpu->memory_total = hone_metrics_physical_memory ();
  /* TRANSLATORS: "CPU — <model> (<n> threads, <instruction set> kernels)"; the
   * instruction set is a name such as avx512-vnni, not to be translated */
  cpu->name = g_strdup_printf (_("CPU — %s (%d threads, %s kernels)"), model != NULL ? model : _("unknown"),
                               cpu->n_cores, hone_cpu_backend_isa ());
  g_ptr_array_add (devices, cpu);
#ifdef HONE_HAVE_CUDA
  {
    /* Enumeration only: no context, no allocation (those belong to the
     * engine thread). Errors (no driver, no GPU) just list nothing. */
    int count = 0;
    if (cudaGetDeviceCount (&count) != cudaSuccess)
      {
        (void) cudaGetLastError ();
        count = 0;
      }
    for (int i = 0; i < count; i++)
      {
        struct cudaDeviceProp prop;
        HoneDevice *gpu;
        if (cudaGetDeviceProperties (&prop, i) != cudaSuccess)
          continue;
        gpu = g_new0 (HoneDevice, 1);
        gpu->id = g_strdup_printf ("cuda:%d", i);
        gpu->kind = HONE_DEVICE_CUDA;
        gpu->n_cores = prop.multiProcessorCount;
        gpu->memory_total = (gint64) prop.totalGlobalMem;
        gpu->name = g_strdup_printf ("%s (cuda:%d)", prop.name, i);
        g_ptr_array_add (devices, gpu);
      }
  }
#endif
  return devices;
}

HoneGenerateResult *
hone_generate_result_copy (const HoneGenerateResult *result)
{
  HoneGenerateResult *r = g_new0 (HoneGenerateResult, 1);
  *r = *result;
  r->text = g_strdup (result->text);
  r->prompt_tokens = result->prompt_tokens != NULL
    ? g_array_copy (result->prompt_tokens) : NULL;
  r->generated_tokens = result->generated_tokens != NULL
    ? g_array_copy (result->generated_tokens) : NULL;
  return r;
}

void
hone_generate_result_free (HoneGenerateResult *result)
{
  if (result == NULL)
    return;
  g_free (result->text);
  g_clear_pointer (&result->prompt_tokens, g_array_unref);
  g_clear_pointer (&result->generated_tokens, g_array_unref);
  g_free (result);
}

/* ---- jobs and events ------------------------------------------------------------ */

typedef enum {
  JOB_INIT,           /* engine thread start-up: probe the CPU backend's caps */
  JOB_LOAD,
  JOB_UNLOAD,
  JOB_GENERATE,
  JOB_PERPLEXITY,
  JOB_SESSION_FREE,   /* no task: free a session's KV sequence */
  JOB_QUIT,
} JobKind;

typedef enum {
  INPUT_MESSAGES,
  INPUT_TEXT,
  INPUT_TOKENS,
} InputKind;

typedef enum {
  EVENT_PROGRESS,
  EVENT_TOKEN,
  EVENT_DONE,
} EventKind;

typedef struct {
  EventKind kind;
  double progress;
  char *text;
  gint32 token;
} Event;

typedef struct {
  char *device;
  int n_threads;
  int context_length;
  gint64 memory_budget;
  gboolean int8_kv, speculative, pd_split;
  gboolean precise;             /* CPU: f32 activations (HoneBackendOptions.precise_activations) */
} Options;

typedef struct _Job Job;
struct _Job {
  JobKind kind;
  HoneEngine *engine;           /* not a ref: tasks hold the engine */
  GTask *task;                  /* NULL for internal jobs */
  GMainContext *context;        /* the caller's context (ref) */
  GCancellable *cancel;         /* internal, cancelled by the user's or by unload */
  GCancellable *user_cancellable;
  gulong user_cancel_id;
  gint64 posted_us;

  /* delivery */
  GMutex ev_lock;
  GQueue events;
  gboolean idle_pending;

  HoneEngineProgressFunc progress;
  gpointer progress_data;
  GDestroyNotify progress_destroy;
  double last_progress;
  double load_base;   /* where a retried load's progress starts (the CPU after a GPU OOM) */
  HoneTokenFunc token_func;
  gpointer token_data;
  GDestroyNotify token_destroy;

  /* load */
  char *path;
  Options options;

  /* generate */
  HoneSession *session;         /* ref */
  InputKind input;
  JsonNode *messages;
  char *text;
  GArray *tokens;               /* input tokens (INPUT_TOKENS, perplexity) */
  HoneSamplerParams params;
  int ppl_context, ppl_stride;

  /* session free */
  int free_seq;
  guint64 free_gen;

  /* results (moved into the task on DONE) */
  GError *error;
  HoneGenerateResult *result;
  HonePerplexityResult ppl;
};

/* ---- the engine object ---------------------------------------------------------- */

enum {
  PROP_0,
  PROP_DEVICE, PROP_N_THREADS, PROP_CONTEXT_LENGTH, PROP_MEMORY_BUDGET,
  PROP_INT8_KV, PROP_SPECULATIVE, PROP_PD_SPLIT, PROP_PRECISE,
  PROP_STATE, PROP_MODEL_INFO, PROP_MODEL_PATH, PROP_CAPABILITIES, PROP_LOAD_PROGRESS,
  PROP_ACTIVE_CONTEXT_LENGTH, PROP_ACTIVE_DEVICE, PROP_DEVICE_NOTE,
  N_PROPS
};
static GParamSpec *props[N_PROPS];

struct _HoneEngine {
  GObject parent_instance;
  GMainContext *owner;
  GSource *notify_source;
  GThread *thread;

  GMutex lock;                  /* everything below up to "engine thread only" */
  GCond cond;
  GQueue queue;                 /* Job* waiting */
  Job *current;                 /* running on the engine thread */
  Options options;
  HoneEngineState state;
  HoneModelInfo *model_info;
  char *model_path;
  char *active_device;
  char *device_note;            /* why "auto" ended on the CPU for the loaded model, or NULL */
  HoneEngineCaps caps;
  double load_progress;
  int active_context;
  HoneModel *shared_model;      /* ref for tokenize/render on any thread */
  guint64 generation;           /* bumped at every load/unload */
  GPtrArray *retired;           /* old strings kept for transfer-none getters */
  GPtrArray *retired_objects;   /* old model infos, same reason */
  HoneEngineMetrics snap;
  guint notify_mask;            /* bits: 1 << PROP_* */

  /* engine thread only */
  Options loaded_options;       /* the options the loaded model was loaded with */
  HoneBackend *backend;
  HoneModel *model;
  HoneChatTemplate *tmpl;
  char *tmpl_error;
  int n_ctx;
};

G_DEFINE_FINAL_TYPE (HoneEngine, hone_engine, G_TYPE_OBJECT)

struct _HoneSession {
  GObject parent_instance;
  HoneEngine *engine;           /* ref */
  GMutex lock;                  /* guards tokens for get_tokens() */
  GArray *tokens;               /* what the KV sequence holds (engine thread writes) */
  int seq;                      /* backend sequence, -1 none (engine thread) */
  guint64 gen;                  /* engine generation seq belongs to */
  gint reset_pending;           /* atomic */
};

G_DEFINE_FINAL_TYPE (HoneSession, hone_session, G_TYPE_OBJECT)

static void job_free (Job *job);

/* Marks properties changed; the owner context emits notify. Lock held. */
static void
mark_changed_locked (HoneEngine *self, guint prop)
{
  self->notify_mask |= 1u << prop;
  if (self->notify_source != NULL)
    g_source_set_ready_time (self->notify_source, 0);
}

static gboolean
notify_dispatch (GSource *source, GSourceFunc callback, gpointer user_data)
{
  HoneEngine *self = user_data;
  guint mask;

  g_source_set_ready_time (source, -1);
  g_mutex_lock (&self->lock);
  mask = self->notify_mask;
  self->notify_mask = 0;
  g_mutex_unlock (&self->lock);
  g_object_freeze_notify (G_OBJECT (self));
  for (guint p = 1; p < N_PROPS; p++)
    if (mask & (1u << p))
      g_object_notify_by_pspec (G_OBJECT (self), props[p]);
  g_object_thaw_notify (G_OBJECT (self));
  return G_SOURCE_CONTINUE;
}

static GSourceFuncs notify_funcs = { NULL, NULL, notify_dispatch, NULL, NULL, NULL };

static void
set_state (HoneEngine *self, HoneEngineState state)
{
  g_mutex_lock (&self->lock);
  if (self->state != state)
    {
      self->state = state;
      self->snap.state = state;
      mark_changed_locked (self, PROP_STATE);
    }
  g_mutex_unlock (&self->lock);
}

/* ---- delivery ------------------------------------------------------------------- */

static void
event_free (Event *ev)
{
  g_free (ev->text);
  g_free (ev);
}

static void
complete_task (Job *job)
{
  GTask *task = job->task;

  if (task == NULL)
    return;
  if (job->error != NULL)
    {
      g_task_return_error (task, job->error);
      job->error = NULL;
    }
  else if (job->kind == JOB_GENERATE)
    {
      g_task_return_pointer (task, job->result, (GDestroyNotify) hone_generate_result_free);
      job->result = NULL;
    }
  else if (job->kind == JOB_PERPLEXITY)
    g_task_return_pointer (task, g_memdup2 (&job->ppl, sizeof job->ppl), g_free);
  else
    g_task_return_boolean (task, TRUE);
}

static gboolean
deliver (gpointer data)
{
  Job *job = data;
  GQueue batch = G_QUEUE_INIT;
  gboolean done = FALSE;

  g_mutex_lock (&job->ev_lock);
  batch = job->events;
  g_queue_init (&job->events);
  job->idle_pending = FALSE;
  g_mutex_unlock (&job->ev_lock);

  for (Event *ev; (ev = g_queue_pop_head (&batch)) != NULL; event_free (ev))
    switch (ev->kind)
      {
      case EVENT_PROGRESS:
        if (job->progress != NULL)
          job->progress (ev->progress, job->progress_data);
        break;
      case EVENT_TOKEN:
        if (job->token_func != NULL)
          job->token_func (ev->text != NULL ? ev->text : "", ev->token, job->token_data);
        break;
      case EVENT_DONE:
        done = TRUE;
        break;
      }
  if (done)
    {
      complete_task (job);
      job_free (job);
    }
  return G_SOURCE_REMOVE;
}

static void
post_event (Job *job, Event *ev)
{
  g_mutex_lock (&job->ev_lock);
  g_queue_push_tail (&job->events, ev);
  if (!job->idle_pending)
    {
      GSource *src = g_idle_source_new ();
      job->idle_pending = TRUE;
      g_source_set_priority (src, G_PRIORITY_DEFAULT);
      g_source_set_callback (src, deliver, job, NULL);
      g_source_set_static_name (src, "[hone] engine delivery");
      g_source_attach (src, job->context);
      g_source_unref (src);
    }
  g_mutex_unlock (&job->ev_lock);
}

static void
post_progress (Job *job, double fraction)
{
  Event *ev;

  if (job->progress == NULL)
    return;
  /* Coalesce: the caller needs ~100 steps, not one per layer. */
  if (fraction < 1.0 && fraction - job->last_progress < 0.01)
    return;
  job->last_progress = fraction;
  ev = g_new0 (Event, 1);
  ev->kind = EVENT_PROGRESS;
  ev->progress = CLAMP (fraction, 0.0, 1.0);
  post_event (job, ev);
}

static void
post_token (Job *job, const char *text, gint32 token)
{
  Event *ev = g_new0 (Event, 1);
  ev->kind = EVENT_TOKEN;
  ev->text = g_strdup (text);
  ev->token = token;
  post_event (job, ev);
}

/* The job belongs to the caller's context from here on. */
static void
post_done (Job *job)
{
  Event *ev;

  if (job->task == NULL)
    {
      job_free (job);   /* internal job: nobody waits for it */
      return;
    }
  ev = g_new0 (Event, 1);
  ev->kind = EVENT_DONE;
  post_event (job, ev);
}

static void
user_cancelled (GCancellable *user, gpointer data)
{
  g_cancellable_cancel (G_CANCELLABLE (data));
}

static Job *
job_new (HoneEngine *self, JobKind kind, gpointer source, GCancellable *cancellable,
         GAsyncReadyCallback callback, gpointer user_data, gpointer tag)
{
  Job *job = g_new0 (Job, 1);

  job->kind = kind;
  job->engine = self;
  job->posted_us = g_get_monotonic_time ();
  job->cancel = g_cancellable_new ();
  job->context = g_main_context_ref_thread_default ();
  job->last_progress = -1.0;
  g_mutex_init (&job->ev_lock);
  g_queue_init (&job->events);
  if (callback != NULL || tag != NULL)
    {
      /* We report cancellation ourselves (HONE_ERROR_CANCELLED), so the task
       * gets no cancellable and does not check one. */
      job->task = g_task_new (source, NULL, callback, user_data);
      g_task_set_source_tag (job->task, tag);
      g_task_set_check_cancellable (job->task, FALSE);
    }
  if (cancellable != NULL)
    {
      job->user_cancellable = g_object_ref (cancellable);
      job->user_cancel_id = g_cancellable_connect (cancellable, G_CALLBACK (user_cancelled),
                                                   g_object_ref (job->cancel), g_object_unref);
    }
  return job;
}

static void
options_clear (Options *o)
{
  g_clear_pointer (&o->device, g_free);
}

static void
job_free (Job *job)
{
  if (job->user_cancellable != NULL)
    {
      g_cancellable_disconnect (job->user_cancellable, job->user_cancel_id);
      g_object_unref (job->user_cancellable);
    }
  g_clear_object (&job->cancel);
  g_queue_clear_full (&job->events, (GDestroyNotify) event_free);
  g_mutex_clear (&job->ev_lock);
  if (job->progress_destroy != NULL)
    job->progress_destroy (job->progress_data);
  if (job->token_destroy != NULL)
    job->token_destroy (job->token_data);
  g_free (job->path);
  options_clear (&job->options);
  g_clear_object (&job->session);
  g_clear_pointer (&job->messages, json_node_unref);
  g_free (job->text);
  g_clear_pointer (&job->tokens, g_array_unref);
  hone_sampler_params_clear (&job->params);
  g_clear_error (&job->error);
  g_clear_pointer (&job->result, hone_generate_result_free);
  g_clear_object (&job->task);
  g_main_context_unref (job->context);
  g_free (job);
}

/* Cancel the running job and every queued job (not internal ones). Lock held. */
static void
cancel_all_locked (HoneEngine *self)
{
  if (self->current != NULL && self->current->kind != JOB_SESSION_FREE && self->current->kind != JOB_INIT)
    g_cancellable_cancel (self->current->cancel);
  for (GList *l = self->queue.head; l != NULL; l = l->next)
    {
      Job *j = l->data;
      if (j->kind != JOB_SESSION_FREE && j->kind != JOB_INIT && j->kind != JOB_QUIT)
        g_cancellable_cancel (j->cancel);
    }
}

static void
push_job (HoneEngine *self, Job *job)
{
  g_mutex_lock (&self->lock);
  if (job->kind == JOB_LOAD || job->kind == JOB_UNLOAD)
    cancel_all_locked (self);
  g_queue_push_tail (&self->queue, job);
  self->snap.queued_requests = (int) self->queue.length;
  g_cond_signal (&self->cond);
  g_mutex_unlock (&self->lock);
}

static gboolean
check_cancelled (Job *job, GError **error)
{
  if (g_cancellable_is_cancelled (job->cancel))
    {
      g_set_error_literal (error, HONE_ERROR, HONE_ERROR_CANCELLED, _("cancelled"));
      return TRUE;
    }
  return FALSE;
}

/* A backend failure while our cancellable is set is a cancellation,
 * whatever code the backend chose. */
static void
normalize_cancel (Job *job, GError **error)
{
  if (*error != NULL && g_cancellable_is_cancelled (job->cancel)
      && !g_error_matches (*error, HONE_ERROR, HONE_ERROR_CANCELLED))
    {
      g_clear_error (error);
      g_set_error_literal (error, HONE_ERROR, HONE_ERROR_CANCELLED, _("cancelled"));
    }
}

/* ---- memory sampling -------------------------------------------------------------- */

/* Engine thread: ask the backend and publish into the snapshot. Returns used. */
static gint64
sample_memory (HoneEngine *self)
{
  HoneMemoryReport r = { 0 };

  if (self->backend != NULL && self->backend->klass->memory != NULL)
    self->backend->klass->memory (self->backend, &r);
  if (r.used <= 0)
    r.used = hone_metrics_process_rss ();
  if (r.total <= 0)
    r.total = hone_metrics_physical_memory ();
  g_mutex_lock (&self->lock);
  self->snap.memory_used = r.used;
  self->snap.memory_total = r.total;
  self->snap.memory_peak = MAX (MAX (self->snap.memory_peak, r.peak), r.used);
  self->snap.memory_weights = r.weights;
  self->snap.memory_kv_cache = r.kv_cache;
  self->snap.memory_workspace = r.workspace;
  g_mutex_unlock (&self->lock);
  return r.used;
}

/* ---- load / unload (engine thread) ---------------------------------------------- */

static void
drop_model (HoneEngine *self)
{
  HoneModel *shared;
  HoneModelInfo *info;

  if (self->backend != NULL)
    {
      if (self->model != NULL)
        self->backend->klass->unload (self->backend);
      hone_backend_free (self->backend);
      self->backend = NULL;
    }
  g_clear_pointer (&self->model, hone_model_unref);
  g_clear_pointer (&self->tmpl, hone_chat_template_free);
  g_clear_pointer (&self->tmpl_error, g_free);
  self->n_ctx = 0;

  g_mutex_lock (&self->lock);
  shared = g_steal_pointer (&self->shared_model);
  info = g_steal_pointer (&self->model_info);
  if (info != NULL)
    g_ptr_array_add (self->retired_objects, info);
  if (self->model_path != NULL)
    g_ptr_array_add (self->retired, g_steal_pointer (&self->model_path));
  self->generation++;
  self->active_context = 0;
  self->snap.memory_peak = 0;
  if (self->device_note != NULL)
    {
      g_ptr_array_add (self->retired, g_steal_pointer (&self->device_note));
      mark_changed_locked (self, PROP_DEVICE_NOTE);
    }
  mark_changed_locked (self, PROP_MODEL_INFO);
  mark_changed_locked (self, PROP_MODEL_PATH);
  mark_changed_locked (self, PROP_ACTIVE_CONTEXT_LENGTH);
  g_mutex_unlock (&self->lock);
  if (shared != NULL)
    hone_model_unref (shared);
  /* the next model's peak (the CPU backend's: the process's peak RSS) starts
   * from what is resident now, not from this one's */
  hone_metrics_reset_peak_rss ();
}

static void
load_progress_cb (double fraction, gpointer data)
{
  Job *job = data;
  HoneEngine *self = job->engine;
  double f = 0.05 + 0.95 * CLAMP (fraction, 0.0, 1.0);

  /* A second try (the CPU after the GPU ran out of memory) goes on from where the
   * first stopped, so the bar never steps back. */
  f = job->load_base + (1.0 - job->load_base) * f;

  /* Stop at 0.99 until the load is really over: 1.0 means "done". */
  f = MIN (f, 0.99);
  g_mutex_lock (&self->lock);
  self->load_progress = f;
  self->snap.load_progress = f;
  mark_changed_locked (self, PROP_LOAD_PROGRESS);
  g_mutex_unlock (&self->lock);
  post_progress (job, f);
}

char *
hone_engine_pick_device (const char *wanted, char **why)
{
  if (why != NULL)
    *why = NULL;
  if (wanted != NULL && *wanted != '\0' && g_strcmp0 (wanted, "auto") != 0)
    return g_strdup (wanted);
#ifdef HONE_HAVE_CUDA
  {
    g_autoptr (GPtrArray) devices = hone_engine_list_devices ();
    GError *first = NULL;

    for (guint i = 0; i < devices->len; i++)
      {
        const HoneDevice *d = g_ptr_array_index (devices, i);
        GError *e = NULL;

        if (d->kind != HONE_DEVICE_CUDA)
          continue;
        if (hone_cuda_device_check (atoi (d->id + 5), &e))
          {
            g_clear_error (&first);
            return g_strdup (d->id);
          }
        if (first == NULL)
          first = e;
        else
          g_error_free (e);
      }
    if (first == NULL)   /* none listed: the driver's or the runtime's reason */
      (void) hone_cuda_device_check (0, &first);
    if (why != NULL && first != NULL)
      *why = g_strdup (first->message);
    g_clear_error (&first);
  }
#endif
  return g_strdup ("cpu");
}

static HoneBackend *
create_backend (const char *device, GError **error)
{
  if (device == NULL || *device == '\0' || g_strcmp0 (device, "cpu") == 0)
    return hone_cpu_backend_new (error);
#ifdef HONE_HAVE_CUDA
  if (g_str_has_prefix (device, "cuda"))
    {
      int index = 0;
      if (device[4] == ':')
        index = atoi (device + 5);
      return hone_cuda_backend_new (index, error);
    }
#endif
  g_set_error (error, HONE_ERROR, HONE_ERROR_INVALID_ARGUMENT,
               _("unknown or unavailable device “%s”"), device);
  return NULL;
}

static gboolean
is_auto (const char *device)
{
  return device == NULL || *device == '\0' || g_str_equal (device, "auto");
}

/* Create the backend for @device (a real one, not "auto"), load self->model into it
 * and publish it as the engine's model, with @note as the device note. @job (NULL
 * when restoring a previous model) gets the progress and can cancel. On failure the
 * backend is gone and self->model is left for the caller. */
static gboolean
activate_on (HoneEngine *self, HoneModelInfo **info, const char *path, const Options *options,
             const char *device, const char *note, Job *job, GError **error)
{
  HoneBackendOptions bo = { 0 };
  HoneEngineCaps caps;
  int trained;

  self->backend = create_backend (device, error);
  if (self->backend == NULL)
    return FALSE;
  caps = (HoneEngineCaps) self->backend->klass->caps (self->backend);

  trained = self->model->config.max_context;
  if (options->context_length > 0)
    self->n_ctx = trained > 0 ? MIN (options->context_length, trained) : options->context_length;
  else
    self->n_ctx = trained > 0 ? MIN (trained, DEFAULT_CONTEXT) : DEFAULT_CONTEXT;
  bo.n_threads = options->n_threads;
  bo.device = 0;
  if (g_str_has_prefix (device, "cuda:"))
    bo.device = atoi (device + 5);
  bo.max_context = self->n_ctx;
  bo.int8_kv = options->int8_kv && (caps & HONE_ENGINE_CAP_INT8_KV);
  bo.memory_budget = options->memory_budget;
  bo.precise_activations = options->precise;

  if (!self->backend->klass->load (self->backend, self->model, &bo,
                                   job != NULL ? load_progress_cb : NULL, job,
                                   job != NULL ? job->cancel : NULL, error))
    {
      /* The backend holds nothing on failure; don't call unload() on it. */
      hone_backend_free (self->backend);
      self->backend = NULL;
      if (job != NULL)
        normalize_cancel (job, error);
      return FALSE;
    }
  if (job != NULL && check_cancelled (job, error))
    return FALSE;

  if (self->model->chat_template != NULL)
    {
      GError *terr = NULL;
      self->tmpl = hone_chat_template_new (self->model->chat_template, -1, &terr);
      if (self->tmpl == NULL)
        {
          self->tmpl_error = g_strdup (terr->message);
          g_error_free (terr);
        }
    }

  options_clear (&self->loaded_options);
  self->loaded_options = *options;
  self->loaded_options.device = g_strdup (options->device);

  g_mutex_lock (&self->lock);
  self->model_info = g_steal_pointer (info);
  self->model_path = g_strdup (path);
  if (self->active_device != NULL)
    g_ptr_array_add (self->retired, self->active_device);
  self->active_device = g_strdup (device);
  if (self->device_note != NULL)
    g_ptr_array_add (self->retired, self->device_note);
  self->device_note = g_strdup (note);
  self->shared_model = hone_model_ref (self->model);
  self->caps = caps;
  self->active_context = self->n_ctx;
  self->load_progress = 1.0;
  self->snap.load_progress = 0.0;
  mark_changed_locked (self, PROP_MODEL_INFO);
  mark_changed_locked (self, PROP_MODEL_PATH);
  mark_changed_locked (self, PROP_CAPABILITIES);
  mark_changed_locked (self, PROP_ACTIVE_CONTEXT_LENGTH);
  mark_changed_locked (self, PROP_ACTIVE_DEVICE);
  mark_changed_locked (self, PROP_DEVICE_NOTE);
  mark_changed_locked (self, PROP_LOAD_PROGRESS);
  g_mutex_unlock (&self->lock);
  sample_memory (self);
  return TRUE;
}

/* activate_on() for options->device; "auto" (or none) is resolved here, at every load:
 * the first usable GPU (hone_engine_pick_device), and the CPU when there is none or when
 * the model does not fit in that GPU's memory — the device note then says why. */
static gboolean
activate_model (HoneEngine *self, HoneModelInfo **info, const char *path,
                const Options *options, Job *job, GError **error)
{
  g_autofree char *why = NULL;
  g_autofree char *device = NULL;
  g_autofree char *note = NULL;
  GError *gpu_error = NULL, *cpu_error = NULL;

  if (!is_auto (options->device))
    return activate_on (self, info, path, options, options->device, NULL, job, error);
  device = hone_engine_pick_device ("auto", &why);
  if (g_str_equal (device, "cpu"))
    return activate_on (self, info, path, options, "cpu", why, job, error);
  if (activate_on (self, info, path, options, device, NULL, job, &gpu_error))
    return TRUE;
  /* Only a GPU too small for the model (or its context) goes to the CPU; a corrupt
   * file, a cancel or a driver failure is the answer as it is. */
  if (!g_error_matches (gpu_error, HONE_ERROR, HONE_ERROR_OUT_OF_MEMORY))
    {
      g_propagate_error (error, gpu_error);
      return FALSE;
    }
  /* TRANSLATORS: the first %s is the device ("cuda:0"), the second the out-of-memory
   * error, e.g. "Not enough GPU memory: the model needs 17.20 GiB (…), 7.90 GiB free" */
  note = g_strdup_printf (_("The model does not fit on %s (%s)"), device, gpu_error->message);
  if (job != NULL)
    {
      g_mutex_lock (&self->lock);
      job->load_base = self->load_progress;
      g_mutex_unlock (&self->lock);
    }
  if (activate_on (self, info, path, options, "cpu", note, job, &cpu_error))
    {
      g_error_free (gpu_error);
      return TRUE;
    }
  if (g_error_matches (cpu_error, HONE_ERROR, HONE_ERROR_CANCELLED))
    g_propagate_error (error, g_steal_pointer (&cpu_error));
  else
    {
      /* TRANSLATORS: "<the GPU's error>; on the CPU: <the CPU's error>" */
      g_set_error (error, cpu_error->domain, cpu_error->code, _("%s; on the CPU: %s"),
                   gpu_error->message, cpu_error->message);
      g_error_free (cpu_error);
    }
  g_error_free (gpu_error);
  return FALSE;
}

/* After a failed load that had already let go of the previous model (the backend ran
 * out of memory, say): bring the previous model back as it was. */
static gboolean
restore_model (HoneEngine *self, const char *path, const Options *options)
{
  GError *error = NULL;
  HoneModelInfo *info = hone_model_info_new_for_path (path, &error);

  if (info != NULL)
    self->model = hone_model_open_full (path, HONE_MODEL_OPEN_DEFER_REPACK, &error);
  if (info != NULL && self->model != NULL && activate_model (self, &info, path, options, NULL, &error))
    return TRUE;
  g_warning ("Could not restore the previous model %s: %s", path, error != NULL ? error->message : "?");
  g_clear_error (&error);
  g_clear_object (&info);
  drop_model (self);
  return FALSE;
}

static void
run_load (HoneEngine *self, Job *job)
{
  GError *error = NULL;
  HoneModelInfo *info = NULL;
  HoneModel *new_model = NULL;
  g_autofree char *prev_path = NULL;
  Options prev_options = { 0 };
  gboolean restored = FALSE;

  set_state (self, HONE_ENGINE_STATE_LOADING);
  g_mutex_lock (&self->lock);
  self->load_progress = 0.0;
  self->snap.load_progress = 0.0;
  mark_changed_locked (self, PROP_LOAD_PROGRESS);
  g_mutex_unlock (&self->lock);
  post_progress (job, 0.0);

  /* Read and validate the new model before letting go of the loaded one, so that an
   * unreadable, corrupt or unsupported file leaves the engine exactly as it was. */
  if (check_cancelled (job, &error))
    goto fail_keep;
  info = hone_model_info_new_for_path (job->path, &error);
  if (info == NULL)
    goto fail_keep;
  /* AWQ linears are repacked by the backend's load (with progress and cancel; the CUDA
   * upload makes them chunk by chunk and never holds a whole host copy) */
  new_model = hone_model_open_full (job->path, HONE_MODEL_OPEN_DEFER_REPACK, &error);
  if (new_model == NULL)
    goto fail_keep;
  if (check_cancelled (job, &error))
    goto fail_keep;

  if (self->model != NULL && self->backend != NULL && self->model_path != NULL)
    {
      g_mutex_lock (&self->lock);
      prev_path = g_strdup (self->model_path);
      g_mutex_unlock (&self->lock);
      prev_options = self->loaded_options;
      prev_options.device = g_strdup (self->loaded_options.device);
    }
  drop_model (self);
  self->model = g_steal_pointer (&new_model);
  post_progress (job, 0.05);

  if (!activate_model (self, &info, job->path, &job->options, job, &error))
    goto fail;
  options_clear (&prev_options);
  post_progress (job, 1.0);
  set_state (self, HONE_ENGINE_STATE_READY);
  return;

fail:
  g_clear_object (&info);
  drop_model (self);
  /* A cancelled load means the user gave up on loading: leave the engine empty then. */
  if (prev_path != NULL && !g_error_matches (error, HONE_ERROR, HONE_ERROR_CANCELLED))
    restored = restore_model (self, prev_path, &prev_options);
  options_clear (&prev_options);
  if (restored)
    {
      char *message = g_strdup_printf (_("%s (the previous model is still loaded)"), error->message);
      g_free (error->message);
      error->message = message;
    }
  g_mutex_lock (&self->lock);
  self->load_progress = 0.0;
  self->snap.load_progress = 0.0;
  mark_changed_locked (self, PROP_LOAD_PROGRESS);
  g_mutex_unlock (&self->lock);
  set_state (self, restored ? HONE_ENGINE_STATE_READY : HONE_ENGINE_STATE_EMPTY);
  job->error = error;
  return;

fail_keep:
  /* Nothing of the loaded model was touched: keep serving it. */
  g_clear_object (&info);
  g_clear_pointer (&new_model, hone_model_unref);
  g_mutex_lock (&self->lock);
  self->load_progress = 0.0;
  self->snap.load_progress = 0.0;
  mark_changed_locked (self, PROP_LOAD_PROGRESS);
  g_mutex_unlock (&self->lock);
  set_state (self, self->model != NULL && self->backend != NULL ? HONE_ENGINE_STATE_READY
                                                                : HONE_ENGINE_STATE_EMPTY);
  job->error = error;
}

static void
run_unload (HoneEngine *self, Job *job)
{
  if (self->model != NULL)
    {
      set_state (self, HONE_ENGINE_STATE_LOADING);
      drop_model (self);
    }
  set_state (self, HONE_ENGINE_STATE_EMPTY);
}

static void
run_init (HoneEngine *self)
{
  GError *error = NULL;
  HoneBackend *probe = hone_cpu_backend_new (&error);

  if (probe == NULL)
    {
      g_warning ("CPU backend unavailable: %s", error->message);
      g_error_free (error);
      return;
    }
  g_mutex_lock (&self->lock);
  self->caps = (HoneEngineCaps) probe->klass->caps (probe);
  mark_changed_locked (self, PROP_CAPABILITIES);
  g_mutex_unlock (&self->lock);
  hone_backend_free (probe);
}

/* ---- generation (engine thread) --------------------------------------------------- */

static gboolean
tokenize_with (HoneModel *model, const char *text, HoneEncodeFlags flags, GArray *out, GError **error)
{
  return hone_tokenizer_encode (model->tokenizer, text, -1, flags, out, error);
}

static char *
render_with (HoneModel *model, HoneChatTemplate *tmpl, JsonNode *messages, gboolean add_gen, GError **error)
{
  HoneTokenizer *tok = model->tokenizer;
  int bos = hone_tokenizer_bos (tok), eos = hone_tokenizer_eos (tok);
  const char *bos_text = bos >= 0 ? hone_tokenizer_token_text (tok, bos) : "";
  const char *eos_text = eos >= 0 ? hone_tokenizer_token_text (tok, eos) : "";

  if (messages == NULL || !JSON_NODE_HOLDS_ARRAY (messages))
    {
      g_set_error_literal (error, HONE_ERROR, HONE_ERROR_INVALID_JSON,
                           _("messages must be a JSON array of {\"role\", \"content\"} objects"));
      return NULL;
    }
  return hone_chat_template_render (tmpl, messages, add_gen, bos_text, eos_text, NULL, error);
}

/* Tokenize a rendered chat prompt: specials parsed; BOS added only when the
 * tokenizer wants one and the template did not already write it. */
static gboolean
tokenize_chat_prompt (HoneModel *model, const char *prompt, GArray *out, GError **error)
{
  HoneTokenizer *tok = model->tokenizer;
  int bos = hone_tokenizer_bos (tok);
  HoneEncodeFlags flags = HONE_ENCODE_PARSE_SPECIAL;

  if (hone_tokenizer_adds_bos (tok) && bos >= 0)
    {
      const char *bos_text = hone_tokenizer_token_text (tok, bos);
      if (bos_text == NULL || !g_str_has_prefix (prompt, bos_text))
        g_array_append_val (out, bos);
    }
  return tokenize_with (model, prompt, flags, out, error);
}

/* The "role" of message i when it is a string; NULL for anything else (the
 * messages come from the caller: any JSON the template accepted). */
static const char *
message_role (JsonArray *a, guint i)
{
  JsonNode *m = json_array_get_element (a, i);
  JsonNode *role = JSON_NODE_HOLDS_OBJECT (m) ? json_object_get_member (json_node_get_object (m), "role") : NULL;

  return role != NULL && JSON_NODE_HOLDS_VALUE (role) && json_node_get_value_type (role) == G_TYPE_STRING
    ? json_node_get_string (role) : NULL;
}

/* Render and tokenize the chat with messages [sys, from) left out: the
 * leading system messages stay. */
static gboolean
render_leaving_out (HoneEngine *self, JsonArray *a, guint sys, guint from, GArray *prompt, GError **error)
{
  g_autoptr (JsonArray) kept = json_array_sized_new (json_array_get_length (a) - (from - sys));
  g_autoptr (JsonNode) node = json_node_new (JSON_NODE_ARRAY);
  g_autofree char *text = NULL;

  for (guint i = 0; i < json_array_get_length (a); i++)
    if (i < sys || i >= from)
      json_array_add_element (kept, json_node_copy (json_array_get_element (a, i)));
  json_node_set_array (node, kept);
  text = render_with (self->model, self->tmpl, node, TRUE, error);
  g_array_set_size (prompt, 0);
  return text != NULL && tokenize_chat_prompt (self->model, text, prompt, error);
}

/* Render and tokenize a chat; when it leaves less than the answer's room in
 * the context, leave out its oldest turns (hone_session_chat_async): the
 * fewest that leave the room and an eighth of the context more, else the
 * fewest that leave the room, else all but the last message. Turn k starts
 * at the k-th user message after the system messages; a binary search over
 * k, each step one render. */
static gboolean
build_chat_prompt (HoneEngine *self, Job *job, GArray *prompt, int *dropped, GError **error)
{
  const int n_ctx = self->n_ctx;
  const int room = MIN (job->params.max_tokens > 0 ? job->params.max_tokens : n_ctx / 4, n_ctx / 2);
  g_autofree char *text = render_with (self->model, self->tmpl, job->messages, TRUE, error);
  g_autoptr (GArray) starts = NULL;
  JsonArray *a;
  guint n, sys = 0;

  if (text == NULL || !tokenize_chat_prompt (self->model, text, prompt, error))
    return FALSE;
  if ((int) prompt->len <= n_ctx - room)
    return TRUE;
  a = json_node_get_array (job->messages);
  n = json_array_get_length (a);
  while (sys < n && g_strcmp0 (message_role (a, sys), "system") == 0)
    sys++;
  if (sys + 1 >= n)
    return TRUE;   /* nothing to leave out: the overflow check decides */
  /* starts[k - 1]: the first message kept when k turns go; the last message always stays */
  starts = g_array_new (FALSE, FALSE, sizeof (guint));
  for (guint i = sys + 1; i < n; i++)
    if (i == n - 1 || g_strcmp0 (message_role (a, i), "user") == 0)
      g_array_append_val (starts, i);
  for (int pass = 0; pass < 2; pass++)
    {
      const int target = n_ctx - room - (pass == 0 ? n_ctx / 8 : 0);
      guint lo = 0, hi = starts->len - 1;   /* the answer is in [lo, hi] if any */

      if (!render_leaving_out (self, a, sys, g_array_index (starts, guint, hi), prompt, error))
        return FALSE;
      if ((int) prompt->len > target)
        continue;
      while (lo < hi)
        {
          guint mid = (lo + hi) / 2;
          if (!render_leaving_out (self, a, sys, g_array_index (starts, guint, mid), prompt, error))
            return FALSE;
          if ((int) prompt->len <= target)
            hi = mid;
          else
            lo = mid + 1;
        }
      *dropped = (int) (g_array_index (starts, guint, lo) - sys);
      return render_leaving_out (self, a, sys, g_array_index (starts, guint, lo), prompt, error);
    }
  /* not even the last message leaves the room: keep only it (the overflow check decides) */
  *dropped = (int) (n - 1 - sys);
  return render_leaving_out (self, a, sys, n - 1, prompt, error);
}

static gboolean
build_prompt (HoneEngine *self, Job *job, GArray *prompt, int *dropped, GError **error)
{
  switch (job->input)
    {
    case INPUT_MESSAGES:
      {
        if (self->tmpl == NULL)
          {
            if (self->tmpl_error != NULL)
              g_set_error (error, HONE_ERROR, HONE_ERROR_TEMPLATE_SYNTAX,
                           _("the model's chat template does not parse: %s"), self->tmpl_error);
            else
              g_set_error_literal (error, HONE_ERROR, HONE_ERROR_TEMPLATE_RUNTIME,
                                   _("the model has no chat template"));
            return FALSE;
          }
        return build_chat_prompt (self, job, prompt, dropped, error);
      }
    case INPUT_TEXT:
      if (job->text == NULL || job->text[0] == '\0')
        {
          g_set_error_literal (error, HONE_ERROR, HONE_ERROR_INVALID_ARGUMENT, _("the prompt is empty"));
          return FALSE;
        }
      return tokenize_with (self->model, job->text, HONE_ENCODE_ADD_SPECIAL | HONE_ENCODE_PARSE_SPECIAL,
                            prompt, error);
    case INPUT_TOKENS:
    default:
      {
        int vocab = self->model->config.vocab;
        for (guint i = 0; i < job->tokens->len; i++)
          {
            gint32 t = g_array_index (job->tokens, gint32, i);
            if (t < 0 || t >= vocab)
              {
                g_set_error (error, HONE_ERROR, HONE_ERROR_INVALID_ARGUMENT,
                             _("token id %d at position %u is outside the vocabulary (0..%d)"),
                             t, i, vocab - 1);
                return FALSE;
              }
          }
        g_array_append_vals (prompt, job->tokens->data, job->tokens->len);
        return TRUE;
      }
    }
}

/* Make sure the session has a sequence of the current model; apply a reset. */
static gboolean
session_prepare (HoneEngine *self, HoneSession *s, GError **error)
{
  guint64 gen;

  g_mutex_lock (&self->lock);
  gen = self->generation;
  g_mutex_unlock (&self->lock);
  if (s->seq >= 0 && s->gen != gen)
    s->seq = -1;   /* belonged to a previous model: its backend is gone */
  if (s->seq < 0)
    {
      s->seq = self->backend->klass->seq_new (self->backend, error);
      if (s->seq < 0)
        return FALSE;
      s->gen = gen;
      g_mutex_lock (&s->lock);
      g_array_set_size (s->tokens, 0);
      g_mutex_unlock (&s->lock);
    }
  if (g_atomic_int_compare_and_exchange (&s->reset_pending, 1, 0))
    {
      self->backend->klass->seq_truncate (self->backend, s->seq, 0);
      g_mutex_lock (&s->lock);
      g_array_set_size (s->tokens, 0);
      g_mutex_unlock (&s->lock);
    }
  return TRUE;
}

static void
session_set_length (HoneSession *s, guint len)
{
  g_mutex_lock (&s->lock);
  if (s->tokens->len > len)
    g_array_set_size (s->tokens, len);
  g_mutex_unlock (&s->lock);
}

static void
session_append (HoneSession *s, const gint32 *ids, guint n)
{
  g_mutex_lock (&s->lock);
  g_array_append_vals (s->tokens, ids, n);
  g_mutex_unlock (&s->lock);
}

static void
update_inflight (HoneEngine *self, Job *job, int prompt, int prefilled, int generated,
                 int max_tokens, double decode_tps)
{
  g_mutex_lock (&self->lock);
  self->snap.inflight_prompt_tokens = prompt;
  self->snap.inflight_prefilled_tokens = prefilled;
  self->snap.inflight_generated_tokens = generated;
  self->snap.inflight_max_tokens = max_tokens;
  self->snap.inflight_elapsed_ms = (g_get_monotonic_time () - job->posted_us) / 1000.0;
  self->snap.inflight_decode_tps = decode_tps;
  self->snap.queued_requests = (int) self->queue.length;
  g_mutex_unlock (&self->lock);
}

/* ---- sampling on the device ----------------------------------------------
 * With a backend that has HONE_BACKEND_CAP_GPU_SAMPLING, each forward that
 * ends in a sampled token carries the sampler's parameters, its penalty
 * window and the uniform draw the host sampler would have used for this step
 * (so the seed's sequence of draws is the same either way); the backend then
 * returns only the id. Where it cannot do them exactly it returns the logits
 * and the host samples with that same draw. */

typedef struct {
  gboolean on;              /* the backend samples */
  gboolean drawn;           /* a draw is in bs.u for the step in flight */
  gboolean have_next;       /* bs.u_next holds the next step's draw, taken one step early */
  HoneBatchSampling bs;
  GArray *recent;           /* gint32: accepted tokens, the window is its tail */
} DeviceSampling;

/* Parameters, window and draw for the forward about to run. @next: the
 * token it samples will not be the last, so the backend may start the step
 * after it ahead (HoneBatchSampling.next); that step's draw is then taken now,
 * one step early, which keeps the seed's sequence of draws: step k still uses
 * the k-th. */
static const HoneBatchSampling *
device_sampling_prepare (DeviceSampling *ds, HoneSampler *sampler, gboolean next)
{
  const HoneSamplerParams *p = hone_sampler_get_params (sampler);
  guint w = (guint) MAX (p->penalty_window, 0);

  if (!ds->on)
    return NULL;
  w = MIN (w, ds->recent->len);
  ds->bs.temperature = p->temperature;
  ds->bs.top_k = p->top_k;
  ds->bs.top_p = p->top_p;
  ds->bs.min_p = p->min_p;
  ds->bs.repeat_penalty = p->repeat_penalty;
  ds->bs.presence_penalty = p->presence_penalty;
  ds->bs.frequency_penalty = p->frequency_penalty;
  ds->bs.window = w > 0 ? &g_array_index (ds->recent, gint32, ds->recent->len - w) : NULL;
  ds->bs.n_window = (int) w;
  ds->drawn = p->temperature > 0.0f;
  if (!ds->drawn)
    ds->bs.u = 0.0;
  else if (ds->have_next)
    ds->bs.u = ds->bs.u_next;
  else
    ds->bs.u = hone_sampler_next_double (sampler);
  ds->bs.next = next;
  ds->have_next = next && ds->drawn;
  ds->bs.u_next = ds->have_next ? hone_sampler_next_double (sampler) : 0.0;
  return &ds->bs;
}

/* The next token: the device's when it sampled, else the host's from @logits. */
static gint32
device_sampling_take (DeviceSampling *ds, HoneSampler *sampler, gint32 sampled, float *logits,
                      HoneRequestMetrics *m)
{
  if (ds->on && sampled >= 0)
    {
      m->device_sampled_tokens++;
      return sampled;
    }
  if (ds->on && ds->drawn)
    return hone_sampler_sample_with_draw (sampler, logits, ds->bs.u);
  return hone_sampler_sample (sampler, logits);
}

static void
run_generate (HoneEngine *self, Job *job)
{
  HoneBackend *be = self->backend;
  HoneSession *s = job->session;
  GError *error = NULL;
  g_autoptr (GArray) prompt = g_array_new (FALSE, FALSE, sizeof (gint32));
  g_autoptr (GArray) generated = g_array_new (FALSE, FALSE, sizeof (gint32));
  g_autoptr (HoneSampler) sampler = NULL;
  g_autoptr (HoneDecodeStream) stream = NULL;
  g_autoptr (HoneStopMatcher) stop = NULL;
  g_autoptr (GString) out_text = g_string_new (NULL);
  g_autofree float *logits = NULL;
  HoneRequestMetrics m = { 0 };
  gint64 start_us, t0, t_first = 0;
  guint common = 0, chunk;
  int vocab, max_tokens;
  gint64 peak = 0, used;
  DeviceSampling ds = { 0 };
  gint32 sampled = -1;

  start_us = g_get_monotonic_time ();
  m.queue_ms = (start_us - job->posted_us) / 1000.0;

  if (self->model == NULL || be == NULL)
    {
      g_set_error_literal (&error, HONE_ERROR, HONE_ERROR_NO_MODEL, _("no model is loaded"));
      goto out;
    }
  if (check_cancelled (job, &error))
    goto out;
  vocab = self->model->config.vocab;
  sampler = hone_sampler_new (&job->params, vocab, &error);
  if (sampler == NULL)
    goto out;
  if (!build_prompt (self, job, prompt, &m.dropped_messages, &error))
    goto out;
  if (prompt->len == 0)
    {
      g_set_error_literal (&error, HONE_ERROR, HONE_ERROR_INVALID_ARGUMENT, _("the prompt is empty"));
      goto out;
    }
  if ((int) prompt->len > self->n_ctx)
    {
      g_set_error (&error, HONE_ERROR, HONE_ERROR_CONTEXT_OVERFLOW,
                   _("the prompt has %u tokens but the context holds %d"), prompt->len, self->n_ctx);
      goto out;
    }
  set_state (self, HONE_ENGINE_STATE_BUSY);
  if (!session_prepare (self, s, &error))
    goto out;

  /* Reuse the longest common prefix of the cached tokens; always recompute at
   * least the last prompt token, whose logits we need. */
  g_mutex_lock (&s->lock);
  while (common < s->tokens->len && common < prompt->len
         && g_array_index (s->tokens, gint32, common) == g_array_index (prompt, gint32, common))
    common++;
  g_mutex_unlock (&s->lock);
  if (common == prompt->len)
    common--;
  be->klass->seq_truncate (be, s->seq, (int) common);
  session_set_length (s, common);

  m.prompt_tokens = (int) prompt->len;
  m.cached_tokens = (int) common;
  m.prefill_tokens = (int) (prompt->len - common);
  max_tokens = job->params.max_tokens;
  logits = g_new (float, vocab);
  update_inflight (self, job, m.prefill_tokens, 0, 0, max_tokens, 0.0);

  /* Penalties look back over the prompt too. */
  ds.on = (be->klass->caps (be) & HONE_BACKEND_CAP_GPU_SAMPLING) != 0;
  ds.recent = g_array_new (FALSE, FALSE, sizeof (gint32));
  {
    guint from = prompt->len > (guint) job->params.penalty_window
      ? prompt->len - (guint) job->params.penalty_window : 0;
    for (guint i = from; i < prompt->len; i++)
      hone_sampler_accept (sampler, g_array_index (prompt, gint32, i));
    g_array_append_vals (ds.recent, &g_array_index (prompt, gint32, from), prompt->len - from);
  }

  /* Prefill in chunks; the last one samples the first token when the
   * backend can. */
  t0 = g_get_monotonic_time ();
  chunk = be->klass->prefill_chunk > 0 ? (guint) be->klass->prefill_chunk : PREFILL_CHUNK;
  for (guint pos = common; pos < prompt->len; )
    {
      guint n = MIN (chunk, prompt->len - pos);
      HoneBatch batch = { s->seq, &g_array_index (prompt, gint32, pos), (int) n, FALSE, logits };

      if (check_cancelled (job, &error))
        goto out;
      batch.sampled = -1;
      if (pos + n == prompt->len)
        batch.sampling = device_sampling_prepare (&ds, sampler, max_tokens != 1 && (int) prompt->len < self->n_ctx);
      if (!hone_backend_forward (be, &batch, job->cancel, &error))
        {
          normalize_cancel (job, &error);
          be->klass->seq_truncate (be, s->seq, (int) pos);
          goto out;
        }
      sampled = batch.sampled;
      session_append (s, batch.tokens, n);
      pos += n;
      update_inflight (self, job, m.prefill_tokens, (int) (pos - common), 0, max_tokens, 0.0);
    }
  m.prefill_ms = (g_get_monotonic_time () - t0) / 1000.0;
  used = sample_memory (self);
  peak = MAX (peak, used);

  stream = hone_decode_stream_new (self->model->tokenizer, TRUE);
  stop = hone_stop_matcher_new ((const char *const *) job->params.stop);

  t0 = g_get_monotonic_time ();
  for (;;)
    {
      gint32 tok = device_sampling_take (&ds, sampler, sampled, logits, &m);
      g_autofree char *piece = NULL;
      g_autofree char *safe = NULL;
      gboolean stopped = FALSE;
      gboolean eog;
      HoneBatch batch;

      if (t_first == 0)
        {
          t_first = g_get_monotonic_time ();
          m.ttft_ms = (t_first - job->posted_us) / 1000.0;
          t0 = t_first;
        }
      hone_sampler_accept (sampler, tok);
      g_array_append_val (ds.recent, tok);
      g_array_append_val (generated, tok);
      m.generated_tokens++;
      eog = !job->params.ignore_eog && hone_tokenizer_is_eog (self->model->tokenizer, tok);

      piece = eog ? g_strdup ("") : hone_decode_stream_push (stream, tok);
      safe = hone_stop_matcher_push (stop, piece, &stopped);
      g_string_append (out_text, safe);
      post_token (job, safe, tok);

      if (eog)
        {
          m.stop_reason = HONE_STOP_EOG;
          break;
        }
      if (stopped)
        {
          m.stop_reason = HONE_STOP_STRING;
          break;
        }
      if (max_tokens > 0 && m.generated_tokens >= max_tokens)
        {
          m.stop_reason = HONE_STOP_MAX_TOKENS;
          break;
        }
      if ((int) (prompt->len + generated->len) > self->n_ctx
          || be->klass->seq_length (be, s->seq) >= self->n_ctx)
        {
          m.stop_reason = HONE_STOP_CONTEXT_FULL;
          break;
        }
      if (check_cancelled (job, &error))
        goto out;

      batch = (HoneBatch) { s->seq, &tok, 1, FALSE, logits };
      /* more after the token this step samples? (EOG and stop strings cannot be known) */
      batch.sampling = device_sampling_prepare (&ds, sampler,
                                                (max_tokens <= 0 || m.generated_tokens + 1 < max_tokens)
                                                && (int) (prompt->len + generated->len) + 1 <= self->n_ctx);
      batch.sampled = -1;
      if (!hone_backend_forward (be, &batch, job->cancel, &error))
        {
          normalize_cancel (job, &error);
          be->klass->seq_truncate (be, s->seq, (int) s->tokens->len);
          goto out;
        }
      sampled = batch.sampled;
      session_append (s, &tok, 1);
      m.decode_tokens++;
      m.decode_ahead_tokens += batch.ahead != FALSE;
      if ((m.decode_tokens & 15) == 0)
        {
          used = sample_memory (self);
          peak = MAX (peak, used);
        }
      update_inflight (self, job, m.prefill_tokens, m.prefill_tokens, m.generated_tokens, max_tokens,
                       m.decode_tokens / MAX ((g_get_monotonic_time () - t0) / 1e6, 1e-9));
    }
  m.decode_ms = m.decode_tokens > 0 ? (g_get_monotonic_time () - t0) / 1000.0 : 0.0;

  /* What the stop matcher held back was not a stop string after all. */
  if (m.stop_reason != HONE_STOP_STRING)
    {
      g_autofree char *tail = hone_decode_stream_finish (stream);
      g_autofree char *safe = NULL;
      g_autofree char *rest = NULL;
      gboolean stopped = FALSE;

      safe = hone_stop_matcher_push (stop, tail, &stopped);
      if (stopped)
        m.stop_reason = HONE_STOP_STRING;
      else
        rest = hone_stop_matcher_flush (stop);
      if (safe[0] != '\0' || (rest != NULL && rest[0] != '\0'))
        {
          g_autofree char *all = g_strconcat (safe, rest, NULL);
          g_string_append (out_text, all);
          post_token (job, all, -1);
        }
    }

  used = sample_memory (self);
  m.memory_steady = used;
  m.memory_peak = MAX (peak, used);
  m.total_ms = (g_get_monotonic_time () - job->posted_us) / 1000.0;
  hone_request_metrics_finalize_rates (&m);

  job->result = g_new0 (HoneGenerateResult, 1);
  job->result->text = g_strdup (out_text->str);
  job->result->prompt_tokens = g_steal_pointer (&prompt);
  job->result->generated_tokens = g_steal_pointer (&generated);
  job->result->metrics = m;

  g_mutex_lock (&self->lock);
  self->snap.last_ttft_ms = m.ttft_ms;
  if (m.prefill_tps > 0)
    self->snap.last_prefill_tps = m.prefill_tps;
  if (m.decode_tps > 0)
    self->snap.last_decode_tps = m.decode_tps;
  g_mutex_unlock (&self->lock);

out:
  if (ds.recent != NULL)
    g_array_unref (ds.recent);
  if (error != NULL)
    job->error = error;
  update_inflight (self, job, 0, 0, 0, 0, 0.0);
  g_mutex_lock (&self->lock);
  self->snap.inflight_elapsed_ms = 0;
  g_mutex_unlock (&self->lock);
  if (self->model != NULL)
    set_state (self, HONE_ENGINE_STATE_READY);
}

/* -log softmax(logits)[target], stable. */
static double
token_nll (const float *logits, int vocab, gint32 target)
{
  float mx = logits[0];
  double sum = 0.0;

  for (int i = 1; i < vocab; i++)
    mx = MAX (mx, logits[i]);
  for (int i = 0; i < vocab; i++)
    sum += exp ((double) logits[i] - mx);
  return log (sum) + mx - logits[target];
}

static void
run_perplexity (HoneEngine *self, Job *job)
{
  HoneBackend *be = self->backend;
  GError *error = NULL;
  GArray *toks = job->tokens;
  int vocab, ctx = job->ppl_context, stride = job->ppl_stride;
  int seq = -1;
  gint64 t0 = g_get_monotonic_time ();
  int prev_end = 0;
  g_autofree float *logits = NULL;
  double nll = 0.0;
  gint64 scored = 0;
  int windows = 0;

  if (self->model == NULL || be == NULL)
    {
      g_set_error_literal (&error, HONE_ERROR, HONE_ERROR_NO_MODEL, _("no model is loaded"));
      goto out;
    }
  vocab = self->model->config.vocab;
  if (ctx <= 0)
    ctx = self->n_ctx;
  if (ctx < 2 || ctx > self->n_ctx)
    {
      g_set_error (&error, HONE_ERROR, HONE_ERROR_INVALID_ARGUMENT,
                   _("perplexity context %d must be between 2 and the engine's context %d"), ctx, self->n_ctx);
      goto out;
    }
  if (stride <= 0)
    stride = ctx;
  if (stride > ctx)
    {
      g_set_error (&error, HONE_ERROR, HONE_ERROR_INVALID_ARGUMENT,
                   _("stride %d must not exceed the context %d"), stride, ctx);
      goto out;
    }
  if (toks->len < 2)
    {
      g_set_error_literal (&error, HONE_ERROR, HONE_ERROR_INVALID_ARGUMENT,
                           _("need at least 2 tokens to score"));
      goto out;
    }
  for (guint i = 0; i < toks->len; i++)
    {
      gint32 t = g_array_index (toks, gint32, i);
      if (t < 0 || t >= vocab)
        {
          g_set_error (&error, HONE_ERROR, HONE_ERROR_INVALID_ARGUMENT,
                       _("token id %d at position %u is outside the vocabulary"), t, i);
          goto out;
        }
    }
  set_state (self, HONE_ENGINE_STATE_BUSY);
  seq = be->klass->seq_new (be, &error);
  if (seq < 0)
    goto out;
  logits = g_new (float, (gsize) PPL_CHUNK * vocab);

  /* HF's strided recipe: window [begin, end), score the positions the
   * previous window did not (the last end − prev_end tokens). */
  for (int begin = 0; begin < (int) toks->len; begin += stride)
    {
      int end = MIN (begin + ctx, (int) toks->len);
      int first_scored = MAX (prev_end, begin + 1);   /* position of the first scored target */

      be->klass->seq_truncate (be, seq, 0);
      for (int pos = begin; pos < end; )
        {
          int n = MIN (PPL_CHUNK, end - pos);
          HoneBatch batch = { seq, &g_array_index (toks, gint32, pos), n, TRUE, logits };

          if (check_cancelled (job, &error))
            goto out;
          if (!hone_backend_forward (be, &batch, job->cancel, &error))
            {
              normalize_cancel (job, &error);
              goto out;
            }
          /* logits row i predicts the token at pos + i + 1 */
          for (int i = 0; i < n; i++)
            {
              int target = pos + i + 1;
              if (target >= first_scored && target < end)
                {
                  nll += token_nll (logits + (gsize) i * vocab, vocab, g_array_index (toks, gint32, target));
                  scored++;
                }
            }
          pos += n;
          post_progress (job, (double) pos / toks->len);
        }
      windows++;
      prev_end = end;
      if (end == (int) toks->len)
        break;
    }
  job->ppl.nll_sum = nll;
  job->ppl.n_scored = scored;
  job->ppl.perplexity = scored > 0 ? exp (nll / scored) : 0.0;
  job->ppl.n_windows = windows;
  job->ppl.elapsed_ms = (g_get_monotonic_time () - t0) / 1000.0;
  post_progress (job, 1.0);

out:
  if (seq >= 0)
    be->klass->seq_free (be, seq);
  if (error != NULL)
    job->error = error;
  if (self->model != NULL)
    set_state (self, HONE_ENGINE_STATE_READY);
}

static gpointer
engine_thread (gpointer data)
{
  HoneEngine *self = data;

  for (;;)
    {
      Job *job;

      g_mutex_lock (&self->lock);
      while (g_queue_is_empty (&self->queue))
        g_cond_wait (&self->cond, &self->lock);
      job = g_queue_pop_head (&self->queue);
      self->current = job;
      self->snap.queued_requests = (int) self->queue.length;
      g_mutex_unlock (&self->lock);

      switch (job->kind)
        {
        case JOB_INIT:
          run_init (self);
          break;
        case JOB_LOAD:
          run_load (self, job);
          break;
        case JOB_UNLOAD:
          run_unload (self, job);
          break;
        case JOB_GENERATE:
          run_generate (self, job);
          break;
        case JOB_PERPLEXITY:
          run_perplexity (self, job);
          break;
        case JOB_SESSION_FREE:
          if (self->backend != NULL && job->free_seq >= 0 && job->free_gen == self->generation)
            self->backend->klass->seq_free (self->backend, job->free_seq);
          break;
        case JOB_QUIT:
          break;
        }

      g_mutex_lock (&self->lock);
      self->current = NULL;
      g_mutex_unlock (&self->lock);

      if (job->kind == JOB_QUIT)
        {
          job_free (job);
          break;
        }
      post_done (job);
    }
  drop_model (self);
  return NULL;
}

/* ---- GObject ------------------------------------------------------------------------ */

static void
hone_engine_init (HoneEngine *self)
{
  g_mutex_init (&self->lock);
  g_cond_init (&self->cond);
  g_queue_init (&self->queue);
  self->retired = g_ptr_array_new_with_free_func (g_free);
  self->retired_objects = g_ptr_array_new_with_free_func (g_object_unref);
  self->options.device = g_strdup ("cpu");
  self->state = HONE_ENGINE_STATE_EMPTY;
  self->owner = g_main_context_ref_thread_default ();
  self->notify_source = g_source_new (&notify_funcs, sizeof (GSource));
  g_source_set_callback (self->notify_source, NULL, self, NULL);
  g_source_set_static_name (self->notify_source, "[hone] engine notify");
  g_source_set_ready_time (self->notify_source, -1);
  g_source_attach (self->notify_source, self->owner);
  self->thread = g_thread_new ("hone-engine", engine_thread, self);
  push_job (self, job_new (self, JOB_INIT, NULL, NULL, NULL, NULL, NULL));
}

static void
hone_engine_dispose (GObject *object)
{
  HoneEngine *self = HONE_ENGINE (object);

  if (self->thread != NULL)
    {
      g_mutex_lock (&self->lock);
      cancel_all_locked (self);
      g_mutex_unlock (&self->lock);
      push_job (self, job_new (self, JOB_QUIT, NULL, NULL, NULL, NULL, NULL));
      g_thread_join (self->thread);
      self->thread = NULL;
    }
  if (self->notify_source != NULL)
    {
      g_source_destroy (self->notify_source);
      g_clear_pointer (&self->notify_source, g_source_unref);
    }
  G_OBJECT_CLASS (hone_engine_parent_class)->dispose (object);
}

static void
hone_engine_finalize (GObject *object)
{
  HoneEngine *self = HONE_ENGINE (object);

  /* Jobs left in the queue were taken by the thread before QUIT; none remain. */
  g_queue_clear (&self->queue);
  options_clear (&self->options);
  options_clear (&self->loaded_options);
  g_clear_object (&self->model_info);
  g_free (self->model_path);
  g_free (self->active_device);
  g_free (self->device_note);
  g_ptr_array_unref (self->retired);
  g_ptr_array_unref (self->retired_objects);
  g_main_context_unref (self->owner);
  g_mutex_clear (&self->lock);
  g_cond_clear (&self->cond);
  G_OBJECT_CLASS (hone_engine_parent_class)->finalize (object);
}

static void
hone_engine_get_property (GObject *object, guint prop_id, GValue *value, GParamSpec *pspec)
{
  HoneEngine *self = HONE_ENGINE (object);

  g_mutex_lock (&self->lock);
  switch (prop_id)
    {
    case PROP_DEVICE: g_value_set_string (value, self->options.device); break;
    case PROP_N_THREADS: g_value_set_int (value, self->options.n_threads); break;
    case PROP_CONTEXT_LENGTH: g_value_set_int (value, self->options.context_length); break;
    case PROP_MEMORY_BUDGET: g_value_set_int64 (value, self->options.memory_budget); break;
    case PROP_INT8_KV: g_value_set_boolean (value, self->options.int8_kv); break;
    case PROP_SPECULATIVE: g_value_set_boolean (value, self->options.speculative); break;
    case PROP_PD_SPLIT: g_value_set_boolean (value, self->options.pd_split); break;
    case PROP_PRECISE: g_value_set_boolean (value, self->options.precise); break;
    case PROP_STATE: g_value_set_enum (value, self->state); break;
    case PROP_MODEL_INFO: g_value_set_object (value, self->model_info); break;
    case PROP_MODEL_PATH: g_value_set_string (value, self->model_path); break;
    case PROP_CAPABILITIES: g_value_set_flags (value, self->caps); break;
    case PROP_LOAD_PROGRESS: g_value_set_double (value, self->load_progress); break;
    case PROP_ACTIVE_CONTEXT_LENGTH: g_value_set_int (value, self->active_context); break;
    case PROP_ACTIVE_DEVICE: g_value_set_string (value, self->active_device); break;
    case PROP_DEVICE_NOTE: g_value_set_string (value, self->device_note); break;
    default: G_OBJECT_WARN_INVALID_PROPERTY_ID (object, prop_id, pspec);
    }
  g_mutex_unlock (&self->lock);
}

static void
hone_engine_set_property (GObject *object, guint prop_id, const GValue *value, GParamSpec *pspec)
{
  HoneEngine *self = HONE_ENGINE (object);

  switch (prop_id)
    {
    case PROP_DEVICE: hone_engine_set_device (self, g_value_get_string (value)); break;
    case PROP_N_THREADS: hone_engine_set_n_threads (self, g_value_get_int (value)); break;
    case PROP_CONTEXT_LENGTH: hone_engine_set_context_length (self, g_value_get_int (value)); break;
    case PROP_MEMORY_BUDGET: hone_engine_set_memory_budget (self, g_value_get_int64 (value)); break;
    case PROP_INT8_KV: hone_engine_set_int8_kv (self, g_value_get_boolean (value)); break;
    case PROP_SPECULATIVE: hone_engine_set_speculative (self, g_value_get_boolean (value)); break;
    case PROP_PD_SPLIT: hone_engine_set_pd_split (self, g_value_get_boolean (value)); break;
    case PROP_PRECISE: hone_engine_set_precise (self, g_value_get_boolean (value)); break;
    default: G_OBJECT_WARN_INVALID_PROPERTY_ID (object, prop_id, pspec);
    }
}

static void
hone_engine_class_init (HoneEngineClass *klass)
{
  GObjectClass *oc = G_OBJECT_CLASS (klass);
  GParamFlags rw = G_PARAM_READWRITE | G_PARAM_EXPLICIT_NOTIFY | G_PARAM_STATIC_STRINGS;
  GParamFlags ro = G_PARAM_READABLE | G_PARAM_STATIC_STRINGS;

  oc->dispose = hone_engine_dispose;
  oc->finalize = hone_engine_finalize;
  oc->get_property = hone_engine_get_property;
  oc->set_property = hone_engine_set_property;

  props[PROP_DEVICE] = g_param_spec_string ("device", NULL, NULL, "cpu", rw);
  props[PROP_N_THREADS] = g_param_spec_int ("n-threads", NULL, NULL, 0, 1024, 0, rw);
  props[PROP_CONTEXT_LENGTH] = g_param_spec_int ("context-length", NULL, NULL, 0, G_MAXINT, 0, rw);
  props[PROP_MEMORY_BUDGET] = g_param_spec_int64 ("memory-budget", NULL, NULL, 0, G_MAXINT64, 0, rw);
  props[PROP_INT8_KV] = g_param_spec_boolean ("int8-kv", NULL, NULL, FALSE, rw);
  props[PROP_SPECULATIVE] = g_param_spec_boolean ("speculative", NULL, NULL, FALSE, rw);
  props[PROP_PD_SPLIT] = g_param_spec_boolean ("pd-split", NULL, NULL, FALSE, rw);
  props[PROP_PRECISE] = g_param_spec_boolean ("precise", NULL, NULL, FALSE, rw);
  props[PROP_STATE] = g_param_spec_enum ("state", NULL, NULL, HONE_TYPE_ENGINE_STATE,
                                         HONE_ENGINE_STATE_EMPTY, ro);
  props[PROP_MODEL_INFO] = g_param_spec_object ("model-info", NULL, NULL, HONE_TYPE_MODEL_INFO, ro);
  props[PROP_MODEL_PATH] = g_param_spec_string ("model-path", NULL, NULL, NULL, ro);
  props[PROP_CAPABILITIES] = g_param_spec_flags ("capabilities", NULL, NULL, HONE_TYPE_ENGINE_CAPS, 0, ro);
  props[PROP_LOAD_PROGRESS] = g_param_spec_double ("load-progress", NULL, NULL, 0.0, 1.0, 0.0, ro);
  props[PROP_ACTIVE_CONTEXT_LENGTH] = g_param_spec_int ("active-context-length", NULL, NULL, 0, G_MAXINT, 0, ro);
  props[PROP_ACTIVE_DEVICE] = g_param_spec_string ("active-device", NULL, NULL, NULL, ro);
  props[PROP_DEVICE_NOTE] = g_param_spec_string ("device-note", NULL, NULL, NULL, ro);
  g_object_class_install_properties (oc, N_PROPS, props);
}

HoneEngine *
hone_engine_new (void)
{
  return g_object_new (HONE_TYPE_ENGINE, NULL);
}

/* ---- options ------------------------------------------------------------------------ */

#define OPTION_SETTER(name, field, type, prop)                                  \
  void                                                                          \
  hone_engine_set_##name (HoneEngine *self, type value)                         \
  {                                                                             \
    gboolean changed;                                                           \
    g_return_if_fail (HONE_IS_ENGINE (self));                                   \
    g_mutex_lock (&self->lock);                                                 \
    changed = self->options.field != value;                                     \
    self->options.field = value;                                                \
    g_mutex_unlock (&self->lock);                                               \
    if (changed)                                                                \
      g_object_notify_by_pspec (G_OBJECT (self), props[prop]);                  \
  }                                                                             \
  type                                                                          \
  hone_engine_get_##name (HoneEngine *self)                                     \
  {                                                                             \
    type v;                                                                     \
    g_return_val_if_fail (HONE_IS_ENGINE (self), 0);                            \
    g_mutex_lock (&self->lock);                                                 \
    v = self->options.field;                                                    \
    g_mutex_unlock (&self->lock);                                               \
    return v;                                                                   \
  }

OPTION_SETTER (n_threads, n_threads, int, PROP_N_THREADS)
OPTION_SETTER (context_length, context_length, int, PROP_CONTEXT_LENGTH)
OPTION_SETTER (memory_budget, memory_budget, gint64, PROP_MEMORY_BUDGET)
OPTION_SETTER (int8_kv, int8_kv, gboolean, PROP_INT8_KV)
OPTION_SETTER (speculative, speculative, gboolean, PROP_SPECULATIVE)
OPTION_SETTER (pd_split, pd_split, gboolean, PROP_PD_SPLIT)
OPTION_SETTER (precise, precise, gboolean, PROP_PRECISE)

const char *
hone_engine_get_device (HoneEngine *self)
{
  const char *d;
  g_return_val_if_fail (HONE_IS_ENGINE (self), NULL);
  g_mutex_lock (&self->lock);
  d = self->options.device;
  g_mutex_unlock (&self->lock);
  return d;
}

void
hone_engine_set_device (HoneEngine *self, const char *device)
{
  gboolean changed;

  g_return_if_fail (HONE_IS_ENGINE (self));
  if (device == NULL)
    device = "cpu";
  g_mutex_lock (&self->lock);
  changed = g_strcmp0 (self->options.device, device) != 0;
  if (changed)
    {
      /* Old string stays valid for transfer-none callers until finalize. */
      g_ptr_array_add (self->retired, self->options.device);
      self->options.device = g_strdup (device);
    }
  g_mutex_unlock (&self->lock);
  if (changed)
    g_object_notify_by_pspec (G_OBJECT (self), props[PROP_DEVICE]);
}

HoneEngineState
hone_engine_get_state (HoneEngine *self)
{
  HoneEngineState s;
  g_mutex_lock (&self->lock);
  s = self->state;
  g_mutex_unlock (&self->lock);
  return s;
}

HoneModelInfo *
hone_engine_get_model_info (HoneEngine *self)
{
  HoneModelInfo *i;
  g_mutex_lock (&self->lock);
  i = self->model_info;
  g_mutex_unlock (&self->lock);
  return i;
}

const char *
hone_engine_get_model_path (HoneEngine *self)
{
  const char *p;
  g_mutex_lock (&self->lock);
  p = self->model_path;
  g_mutex_unlock (&self->lock);
  return p;
}

HoneEngineCaps
hone_engine_get_capabilities (HoneEngine *self)
{
  HoneEngineCaps c;
  g_mutex_lock (&self->lock);
  c = self->caps;
  g_mutex_unlock (&self->lock);
  return c;
}

double
hone_engine_get_load_progress (HoneEngine *self)
{
  double p;
  g_mutex_lock (&self->lock);
  p = self->load_progress;
  g_mutex_unlock (&self->lock);
  return p;
}

int
hone_engine_get_active_context_length (HoneEngine *self)
{
  int c;
  g_mutex_lock (&self->lock);
  c = self->active_context;
  g_mutex_unlock (&self->lock);
  return c;
}

void
hone_engine_get_metrics_snapshot (HoneEngine *self, HoneEngineMetrics *metrics)
{
  g_return_if_fail (HONE_IS_ENGINE (self));
  g_mutex_lock (&self->lock);
  *metrics = self->snap;
  metrics->state = self->state;
  if (self->current != NULL && self->current->kind == JOB_GENERATE)
    metrics->inflight_elapsed_ms = (g_get_monotonic_time () - self->current->posted_us) / 1000.0;
  g_mutex_unlock (&self->lock);
  /* Between requests the backend is not asked; on the CPU, RSS is ours to read. */
  if (metrics->state != HONE_ENGINE_STATE_BUSY)
    {
      g_autofree char *dev = NULL;
      g_mutex_lock (&self->lock);
      dev = g_strdup (self->active_device != NULL ? self->active_device : self->options.device);
      g_mutex_unlock (&self->lock);
      if (dev == NULL || g_str_equal (dev, "cpu"))
        {
          metrics->memory_used = hone_metrics_process_rss ();
          /* The process may have grown since the engine last sampled its peak. */
          metrics->memory_peak = MAX (metrics->memory_peak, metrics->memory_used);
          if (metrics->memory_total == 0)
            metrics->memory_total = hone_metrics_physical_memory ();
        }
    }
}

gboolean
hone_engine_estimate_memory (HoneEngine *self, const char *path, int context_length,
                             HoneMemoryEstimate *estimate, GError **error)
{
  g_autoptr (HoneModelInfo) info = hone_model_info_new_for_path (path, error);
  Options o;
  int ctx;

  if (info == NULL)
    return FALSE;
  g_mutex_lock (&self->lock);
  o = self->options;
  g_mutex_unlock (&self->lock);
  ctx = context_length > 0 ? context_length : o.context_length;
  if (ctx <= 0)
    ctx = MIN (hone_model_info_get_context_length (info) > 0 ? hone_model_info_get_context_length (info)
                                                             : DEFAULT_CONTEXT, DEFAULT_CONTEXT);
  hone_model_info_estimate_memory (info, ctx, o.int8_kv, estimate);
  return TRUE;
}

/* ---- load / unload API ------------------------------------------------------------- */

void
hone_engine_load_async (HoneEngine *self, const char *path,
                        HoneEngineProgressFunc progress, gpointer progress_data,
                        GDestroyNotify progress_destroy,
                        GCancellable *cancellable,
                        GAsyncReadyCallback callback, gpointer user_data)
{
  Job *job;

  g_return_if_fail (HONE_IS_ENGINE (self));
  g_return_if_fail (path != NULL);
  job = job_new (self, JOB_LOAD, self, cancellable, callback, user_data, hone_engine_load_async);
  job->path = g_strdup (path);
  job->progress = progress;
  job->progress_data = progress_data;
  job->progress_destroy = progress_destroy;
  g_mutex_lock (&self->lock);
  job->options = self->options;
  job->options.device = g_strdup (self->options.device);
  g_mutex_unlock (&self->lock);
  push_job (self, job);
}

gboolean
hone_engine_load_finish (HoneEngine *self, GAsyncResult *result, GError **error)
{
  g_return_val_if_fail (g_task_is_valid (result, self), FALSE);
  return g_task_propagate_boolean (G_TASK (result), error);
}

void
hone_engine_unload_async (HoneEngine *self, GCancellable *cancellable,
                          GAsyncReadyCallback callback, gpointer user_data)
{
  g_return_if_fail (HONE_IS_ENGINE (self));
  push_job (self, job_new (self, JOB_UNLOAD, self, cancellable, callback, user_data, hone_engine_unload_async));
}

gboolean
hone_engine_unload_finish (HoneEngine *self, GAsyncResult *result, GError **error)
{
  g_return_val_if_fail (g_task_is_valid (result, self), FALSE);
  return g_task_propagate_boolean (G_TASK (result), error);
}

/* ---- sync helpers ------------------------------------------------------------------ */

typedef struct {
  GMainContext *ctx;
  GAsyncResult *result;
} SyncData;

static void
sync_cb (GObject *source, GAsyncResult *result, gpointer data)
{
  SyncData *sd = data;
  sd->result = g_object_ref (result);
  g_main_context_wakeup (sd->ctx);
}

static void
sync_begin (SyncData *sd)
{
  sd->ctx = g_main_context_new ();
  sd->result = NULL;
  g_main_context_push_thread_default (sd->ctx);
}

static void
sync_wait_end (SyncData *sd)
{
  while (sd->result == NULL)
    g_main_context_iteration (sd->ctx, TRUE);
  /* Drain what is left (e.g. a GTask idle) before dropping the context. */
  while (g_main_context_iteration (sd->ctx, FALSE))
    ;
  g_main_context_pop_thread_default (sd->ctx);
  g_main_context_unref (sd->ctx);
}

gboolean
hone_engine_load_sync (HoneEngine *self, const char *path,
                       HoneEngineProgressFunc progress, gpointer progress_data,
                       GCancellable *cancellable, GError **error)
{
  SyncData sd;
  gboolean ok;

  sync_begin (&sd);
  hone_engine_load_async (self, path, progress, progress_data, NULL, cancellable, sync_cb, &sd);
  sync_wait_end (&sd);
  ok = hone_engine_load_finish (self, sd.result, error);
  g_object_unref (sd.result);
  return ok;
}

/* ---- tokenization helpers (any thread) ------------------------------------------- */

static HoneModel *
ref_shared_model (HoneEngine *self, GError **error)
{
  HoneModel *m;

  g_mutex_lock (&self->lock);
  m = self->shared_model != NULL ? hone_model_ref (self->shared_model) : NULL;
  g_mutex_unlock (&self->lock);
  if (m == NULL)
    g_set_error_literal (error, HONE_ERROR, HONE_ERROR_NO_MODEL, _("no model is loaded"));
  return m;
}

GArray *
hone_engine_tokenize (HoneEngine *self, const char *text, gboolean add_special,
                      gboolean parse_special, GError **error)
{
  g_autoptr (HoneModel) m = ref_shared_model (self, error);
  GArray *out;
  HoneEncodeFlags flags = (add_special ? HONE_ENCODE_ADD_SPECIAL : 0)
                          | (parse_special ? HONE_ENCODE_PARSE_SPECIAL : 0);

  if (m == NULL)
    return NULL;
  out = g_array_new (FALSE, FALSE, sizeof (gint32));
  if (!hone_tokenizer_encode (m->tokenizer, text, -1, flags, out, error))
    {
      g_array_unref (out);
      return NULL;
    }
  return out;
}

char *
hone_engine_detokenize (HoneEngine *self, const gint32 *ids, gsize n, gboolean skip_special, GError **error)
{
  g_autoptr (HoneModel) m = ref_shared_model (self, error);
  int vocab;

  if (m == NULL)
    return NULL;
  vocab = hone_tokenizer_n_vocab (m->tokenizer);
  for (gsize i = 0; i < n; i++)
    if (ids[i] < 0 || ids[i] >= vocab)
      {
        g_set_error (error, HONE_ERROR, HONE_ERROR_INVALID_ARGUMENT,
                     _("token id %d is outside the vocabulary (0..%d)"), ids[i], vocab - 1);
        return NULL;
      }
  return hone_tokenizer_decode (m->tokenizer, ids, n, skip_special, NULL);
}

char *
hone_engine_render_chat (HoneEngine *self, JsonNode *messages, gboolean add_generation_prompt, GError **error)
{
  g_autoptr (HoneModel) m = ref_shared_model (self, error);
  g_autoptr (HoneChatTemplate) tmpl = NULL;

  if (m == NULL)
    return NULL;
  if (m->chat_template == NULL)
    {
      g_set_error_literal (error, HONE_ERROR, HONE_ERROR_TEMPLATE_RUNTIME, _("the model has no chat template"));
      return NULL;
    }
  /* A private compiled copy: the engine thread's may be rendering now. */
  tmpl = hone_chat_template_new (m->chat_template, -1, error);
  if (tmpl == NULL)
    return NULL;
  return render_with (m, tmpl, messages, add_generation_prompt, error);
}

/* ---- perplexity API ------------------------------------------------------------------ */

void
hone_engine_perplexity_async (HoneEngine *self, const gint32 *tokens, gsize n_tokens,
                              int context, int stride,
                              HoneEngineProgressFunc progress, gpointer progress_data,
                              GDestroyNotify progress_destroy,
                              GCancellable *cancellable,
                              GAsyncReadyCallback callback, gpointer user_data)
{
  Job *job;

  g_return_if_fail (HONE_IS_ENGINE (self));
  job = job_new (self, JOB_PERPLEXITY, self, cancellable, callback, user_data, hone_engine_perplexity_async);
  job->tokens = g_array_new (FALSE, FALSE, sizeof (gint32));
  g_array_append_vals (job->tokens, tokens, n_tokens);
  job->ppl_context = context;
  job->ppl_stride = stride;
  job->progress = progress;
  job->progress_data = progress_data;
  job->progress_destroy = progress_destroy;
  push_job (self, job);
}

gboolean
hone_engine_perplexity_finish (HoneEngine *self, GAsyncResult *result, HonePerplexityResult *out, GError **error)
{
  HonePerplexityResult *r;

  g_return_val_if_fail (g_task_is_valid (result, self), FALSE);
  r = g_task_propagate_pointer (G_TASK (result), error);
  if (r == NULL)
    return FALSE;
  if (out != NULL)
    *out = *r;
  g_free (r);
  return TRUE;
}

/* ---- sessions ------------------------------------------------------------------------ */

static void
hone_session_init (HoneSession *self)
{
  g_mutex_init (&self->lock);
  self->tokens = g_array_new (FALSE, FALSE, sizeof (gint32));
  self->seq = -1;
}

static void
hone_session_dispose (GObject *object)
{
  HoneSession *self = HONE_SESSION (object);

  /* No job of ours is in flight (jobs hold a ref), so seq/gen are stable. */
  if (self->engine != NULL)
    {
      if (self->seq >= 0)
        {
          Job *job = job_new (self->engine, JOB_SESSION_FREE, NULL, NULL, NULL, NULL, NULL);
          job->free_seq = self->seq;
          job->free_gen = self->gen;
          push_job (self->engine, job);
          self->seq = -1;
        }
      g_clear_object (&self->engine);
    }
  G_OBJECT_CLASS (hone_session_parent_class)->dispose (object);
}

static void
hone_session_finalize (GObject *object)
{
  HoneSession *self = HONE_SESSION (object);
  g_array_unref (self->tokens);
  g_mutex_clear (&self->lock);
  G_OBJECT_CLASS (hone_session_parent_class)->finalize (object);
}

static void
hone_session_class_init (HoneSessionClass *klass)
{
  GObjectClass *oc = G_OBJECT_CLASS (klass);
  oc->dispose = hone_session_dispose;
  oc->finalize = hone_session_finalize;
}

HoneSession *
hone_session_new (HoneEngine *engine)
{
  HoneSession *s;

  g_return_val_if_fail (HONE_IS_ENGINE (engine), NULL);
  s = g_object_new (HONE_TYPE_SESSION, NULL);
  s->engine = g_object_ref (engine);
  return s;
}

HoneEngine *
hone_session_get_engine (HoneSession *self)
{
  return self->engine;
}

void
hone_session_reset (HoneSession *self)
{
  g_return_if_fail (HONE_IS_SESSION (self));
  /* Only a flag: the engine thread may be appending to this session right
   * now; it clears tokens and KV together before the next request. */
  g_atomic_int_set (&self->reset_pending, 1);
}

GArray *
hone_session_get_tokens (HoneSession *self)
{
  GArray *copy;

  g_mutex_lock (&self->lock);
  copy = g_array_copy (self->tokens);
  g_mutex_unlock (&self->lock);
  return copy;
}

static Job *
generate_job_new (HoneSession *self, const HoneSamplerParams *params,
                  HoneTokenFunc token_func, gpointer token_data, GDestroyNotify token_destroy,
                  GCancellable *cancellable, GAsyncReadyCallback callback, gpointer user_data)
{
  Job *job = job_new (self->engine, JOB_GENERATE, self, cancellable, callback, user_data,
                      hone_session_generate_finish);

  job->session = g_object_ref (self);
  if (params != NULL)
    {
      job->params = *params;
      job->params.stop = g_strdupv (params->stop);
    }
  else
    hone_sampler_params_init (&job->params);
  job->token_func = token_func;
  job->token_data = token_data;
  job->token_destroy = token_destroy;
  return job;
}

void
hone_session_chat_async (HoneSession *self, JsonNode *messages, const HoneSamplerParams *params,
                         HoneTokenFunc token_func, gpointer token_data, GDestroyNotify token_destroy,
                         GCancellable *cancellable, GAsyncReadyCallback callback, gpointer user_data)
{
  Job *job;

  g_return_if_fail (HONE_IS_SESSION (self));
  job = generate_job_new (self, params, token_func, token_data, token_destroy, cancellable, callback, user_data);
  job->input = INPUT_MESSAGES;
  /* A deep copy: the caller may keep editing its conversation. */
  job->messages = messages != NULL ? json_node_copy (messages) : NULL;
  push_job (self->engine, job);
}

void
hone_session_complete_async (HoneSession *self, const char *prompt, const HoneSamplerParams *params,
                             HoneTokenFunc token_func, gpointer token_data, GDestroyNotify token_destroy,
                             GCancellable *cancellable, GAsyncReadyCallback callback, gpointer user_data)
{
  Job *job;

  g_return_if_fail (HONE_IS_SESSION (self));
  job = generate_job_new (self, params, token_func, token_data, token_destroy, cancellable, callback, user_data);
  job->input = INPUT_TEXT;
  job->text = g_strdup (prompt);
  push_job (self->engine, job);
}

void
hone_session_complete_tokens_async (HoneSession *self, const gint32 *tokens, gsize n_tokens,
                                    const HoneSamplerParams *params,
                                    HoneTokenFunc token_func, gpointer token_data, GDestroyNotify token_destroy,
                                    GCancellable *cancellable, GAsyncReadyCallback callback, gpointer user_data)
{
  Job *job;

  g_return_if_fail (HONE_IS_SESSION (self));
  job = generate_job_new (self, params, token_func, token_data, token_destroy, cancellable, callback, user_data);
  job->input = INPUT_TOKENS;
  job->tokens = g_array_new (FALSE, FALSE, sizeof (gint32));
  if (n_tokens > 0)
    g_array_append_vals (job->tokens, tokens, n_tokens);
  push_job (self->engine, job);
}

HoneGenerateResult *
hone_session_generate_finish (HoneSession *self, GAsyncResult *result, GError **error)
{
  g_return_val_if_fail (g_task_is_valid (result, self), NULL);
  return g_task_propagate_pointer (G_TASK (result), error);
}

HoneGenerateResult *
hone_session_chat_sync (HoneSession *self, JsonNode *messages, const HoneSamplerParams *params,
                        HoneTokenFunc token_func, gpointer token_data,
                        GCancellable *cancellable, GError **error)
{
  SyncData sd;
  HoneGenerateResult *r;

  sync_begin (&sd);
  hone_session_chat_async (self, messages, params, token_func, token_data, NULL, cancellable, sync_cb, &sd);
  sync_wait_end (&sd);
  r = hone_session_generate_finish (self, sd.result, error);
  g_object_unref (sd.result);
  return r;
}

HoneGenerateResult *
hone_session_complete_sync (HoneSession *self, const char *prompt, const HoneSamplerParams *params,
                            HoneTokenFunc token_func, gpointer token_data,
                            GCancellable *cancellable, GError **error)
{
  SyncData sd;
  HoneGenerateResult *r;

  sync_begin (&sd);
  hone_session_complete_async (self, prompt, params, token_func, token_data, NULL, cancellable, sync_cb, &sd);
  sync_wait_end (&sd);
  r = hone_session_generate_finish (self, sd.result, error);
  g_object_unref (sd.result);
  return r;
}
