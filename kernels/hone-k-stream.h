/* hone-k-stream.h — the streamed decode step's launcher (internal: kernels/
 * only; hone-k-decode-stream.cu, used by decode_step in hone-k-forward.cu).
 * The switches for callers are in hone-kernels.h (hone_k_decode_set_stream). */
#pragma once

#include "hone-kernels.h"

#define HONE_K_STREAM_MAX_PHASES 4   /* GEMVs a launch: o, gate|up, down, next q|k|v or lm_head */
#define HONE_K_STREAM_MAX_SLOTS 32   /* shared-memory ring slots a block */

/* How the producer warp fills a slot: one bulk copy (TMA) per part, or
 * 16-byte cp.async copies by its 32 lanes (HONE_STREAM_LOADER=bulk|cpasync). */
enum { HONE_K_STREAM_LOAD_BULK = 0, HONE_K_STREAM_LOAD_CPASYNC = 1 };

/* Whether one launch can run these one-token GEMVs in order (sm_90; BF16,
 * F16, Q8_0, Q4_0, Q4_1; every op->x an f32 input, normalized by op->norm_g
 * when set; epilogues STORE, ADD, SWIGLU, ROPE_KV; shapes whose rows split
 * into 16-byte-aligned tasks). */
bool hone_k_stream_takes (const HoneKGemvOp *ops, int n_ops);
/* Enqueue the launch. op i's input may be op j < i's output (the kernel
 * waits for j to be finished everywhere first); op 0's input comes from the
 * kernels before (PDL wait). sync: HONE_K_STREAM_SYNC words of device memory,
 * zero before the first launch and left zero by each (one set a launch
 * site that can be in flight at once). trace: NULL, or gridDim × HONE_K_STREAM_TRACE_WORDS
 * words (measurement only: hone-k-decode-stream.cu says what they hold). */
int hone_k_stream_gemvs (const HoneKGemvOp *ops, int n_ops, unsigned *sync, unsigned long long *trace,
                         cudaStream_t stream);
/* Record why a step does not run streamed (hone_k_stream_why). */
void hone_k_stream_decline (const char *why);
/* hone_k_decode_set_stream / HONE_DECODE_STREAM, on a device that has the kernel. */
bool hone_k_decode_stream_on (void);
/* Where launch site @site records its trace: hone_k_stream_set_trace's buffer (its
 * site, or the second half for the site after it), or NULL. */
unsigned long long *hone_k_stream_trace_for (int site);
