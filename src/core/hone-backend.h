/* hone-backend.h — the backend vtable: where a model's forward pass runs.
 *
 * A backend object lives on the engine thread and is used from that thread
 * only. Backends: "cpu" (src/core/cpu, always present) and "cuda"
 * (src/core/cuda, when built and a usable GPU is found).
 *
 * Sequences: each sequence owns a KV cache of up to max_tokens positions.
 * forward() appends tokens to a sequence at positions [len, len+n) and returns
 * logits; truncate() drops positions from the end (chat turns, regenerate).
 */
#pragma once

#include <glib.h>
#include <gio/gio.h>
#include "hone-model.h"

G_BEGIN_DECLS

typedef struct _HoneBackend HoneBackend;

typedef enum {
  HONE_BACKEND_CAP_INT8_KV       = 1 << 0,  /* int8 KV cache available */
  HONE_BACKEND_CAP_SPECULATIVE   = 1 << 1,  /* speculative decoding available */
  HONE_BACKEND_CAP_PD_SPLIT      = 1 << 2,  /* prefill/decode split available */
  HONE_BACKEND_CAP_GPU_SAMPLING  = 1 << 3,  /* sample() runs on the device */
} HoneBackendCaps;

typedef struct {
  int n_threads;          /* CPU: worker threads (0 = all cores) */
  int device;             /* CUDA: device index */
  int max_context;        /* tokens per sequence the KV cache is sized for (0 = model's) */
  gboolean int8_kv;       /* quantize the KV cache to int8 (if CAP_INT8_KV) */
  gint64 memory_budget;   /* bytes the backend may use (0 = no limit) */
  gboolean precise_activations; /* CPU: f32 activations in every matmul instead of 8-bit
                                 * (a slower checking mode; also HONE_CPU_PRECISE=1) */
} HoneBackendOptions;

typedef struct {
  gint64 weights;         /* bytes held for weights (mapped or uploaded) */
  gint64 kv_cache;        /* bytes of KV cache allocated */
  gint64 workspace;       /* scratch buffers */
  gint64 other;           /* graphs, handles, … */
  gint64 used;            /* process RSS (cpu) or device memory in use (cuda) */
  gint64 total;           /* RAM or VRAM total */
  gint64 peak;            /* peak of used since load */
} HoneMemoryReport;

/* Sampling of the last token's logits on the device (backends with
 * HONE_BACKEND_CAP_GPU_SAMPLING), the chain of hone-sampler.h: penalties over
 * @window → temperature 0 ? argmax : top-k → top-p → min-p → the candidate
 * (best first) where the cumulative probability passes @u. The host sampler
 * draws @u (hone_sampler_next_double) so a seed gives the same draws as host
 * sampling. Values as in HoneSamplerParams. */
typedef struct {
  float temperature;
  int top_k;
  float top_p;
  float min_p;
  float repeat_penalty;
  float presence_penalty;
  float frequency_penalty;
  const gint32 *window;     /* the penalty window's ids (host memory, any order) */
  int n_window;
  double u;                 /* uniform draw in [0, 1) for this step (unused when greedy) */
  /* The step after this one, as the caller expects it: with @next set it will
   * most likely ask next for one token — the id sampled here — at the
   * following position, with these parameters and the draw @u_next. A backend
   * may start that step before it returns this one's id (decode ahead); it
   * runs a step it started only when the call matches it, and drops it
   * otherwise. */
  gboolean next;
  double u_next;
} HoneBatchSampling;

/* One step of work on one sequence. */
typedef struct {
  int seq;                  /* sequence id from seq_new() */
  const gint32 *tokens;     /* tokens to append */
  int n_tokens;
  gboolean all_logits;      /* TRUE: logits of every token; FALSE: of the last only */
  float *logits;            /* out: (all_logits ? n_tokens : 1) × vocab floats */
  /* Optional (all_logits FALSE only; NULL = off): sample on the device. A
   * backend that did sets @sampled to the id and leaves @logits unwritten; one
   * that could not (no cap, or parameters it cannot do exactly) sets @sampled
   * to -1 or leaves it alone, and writes @logits as usual. The caller sets
   * @sampled = -1 before the call. */
  const HoneBatchSampling *sampling;
  gint32 sampled;           /* out, see above */
  gboolean ahead;           /* out: TRUE when the step had been started ahead by the previous call */
} HoneBatch;

typedef struct {
  const char *name;
  /* Make @model runnable (CPU: build views/thread pool; CUDA: upload). The
   * backend takes a ref on the model. Cancellable, reports progress 0..1. */
  gboolean (*load) (HoneBackend *self, HoneModel *model, const HoneBackendOptions *options,
                    HoneProgressFunc progress, gpointer progress_data,
                    GCancellable *cancellable, GError **error);
  void     (*unload) (HoneBackend *self);
  /* Bytes load() would need for @model at @options (weights + KV + workspace). */
  gint64   (*estimate) (HoneBackend *self, HoneModel *model, const HoneBackendOptions *options);
  HoneBackendCaps (*caps) (HoneBackend *self);
  /* Prompt tokens the engine hands to one forward() during prefill (0: the
   * engine's default, 256). A GPU wants whole large chunks: its prefill runs
   * at the GEMMs' rate only when they are wide, and each chunk re-reads the
   * weights; the engine checks cancellation and memory between chunks. */
  int      prefill_chunk;

  int      (*seq_new) (HoneBackend *self, GError **error);   /* -1 on error */
  void     (*seq_free) (HoneBackend *self, int seq);
  int      (*seq_length) (HoneBackend *self, int seq);
  void     (*seq_truncate) (HoneBackend *self, int seq, int n_tokens);

  gboolean (*forward) (HoneBackend *self, HoneBatch *batch, GCancellable *cancellable, GError **error);

  void     (*memory) (HoneBackend *self, HoneMemoryReport *report);
  void     (*free) (HoneBackend *self);
} HoneBackendClass;

struct _HoneBackend {
  const HoneBackendClass *klass;
};

/* Constructors; NULL + error when unavailable (e.g. no GPU: the message says why). */
HoneBackend *hone_cpu_backend_new (GError **error);
/* The instruction set the CPU backend's kernels use here ("avx512-vnni",
 * "avx-vnni", "avx2", "portable"), for device listings. */
const char  *hone_cpu_backend_isa (void);
/* The threads the CPU backend runs on when not told: the CPUs this process
 * may use (affinity mask, cgroup CPU quota). */
int          hone_cpu_backend_default_threads (void);
HoneBackend *hone_cuda_backend_new (int device, GError **error);
/* CUDA builds: whether hone_cuda_backend_new (@device) can work here — a
 * driver new enough, the device, compute capability ≥ 8.0, cuBLAS — without
 * creating anything; FALSE + the same one-line error otherwise. */
gboolean     hone_cuda_device_check (int device, GError **error);

/* Thin dispatch helpers. */
static inline gboolean
hone_backend_forward (HoneBackend *self, HoneBatch *batch, GCancellable *cancellable, GError **error)
{
  return self->klass->forward (self, batch, cancellable, error);
}

static inline void
hone_backend_free (HoneBackend *self)
{
  if (self != NULL)
    self->klass->free (self);
}

G_END_DECLS
