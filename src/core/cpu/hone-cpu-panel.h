/* hone-cpu-panel.h — weight rows repacked for matmuls over many tokens.
 *
 * A tile kernel (hone-cpu-dot.h) reads weight blocks as stored: each 32-block
 * × activation block is one integer dot product whose 8 lanes must then be
 * converted, scaled and summed, per row and token. For a prefill chunk of 8+
 * tokens it pays to rearrange the weights first. A panel holds 16 rows of a
 * matrix (8 without AVX-512) with their quants unpacked to one byte each and
 * transposed: one 64-byte line (32) carries 4 consecutive elements of each of
 * the rows. One vpdpbusd (vpmaddubsw + vpmaddwd on plain AVX2) of that line
 * against a token's 4 activation bytes (broadcast) adds 64 products into the
 * rows' lanes, with no horizontal sums; a block's 8 lines give the rows'
 * integer dot products, scaled once a block and token.
 *
 * For weight block s of row r (32 elements), with activation block d·q:
 *   Σ w·x ≈ a[s][r] · d · Σ u·q  +  b[s][r] · (d · Σ q)
 * where u are the stored unsigned bytes: Q4_0 u = q (a = d, b = −8d),
 * Q4_1 u = q (a = d, b = m), Q8_0 u = q + 128 (a = d, b = −128d), Q4Z u = q
 * (a = s, b = −z·s), Q4_K u = q (a = d·sc, b = −dmin·m).
 *
 * Q6_K has a scale per 16 elements and an offset of −32: its lines hold the
 * signed q − 32 and are multiplied by the activations + 128 (unsigned; made
 * once per matmul by hone_cpu_panel_bias_act), in two integer sums per block,
 * S₀ and S₁ over its two 16s; then, with C the 16s' Σ (q − 32) (packing time),
 *   Σ w·x ≈ d · (a·S₀ + a2·S₁ + b),  a = d₆·sc₀, a2 = d₆·sc₁, b = −128·(a·C₀ + a2·C₁).
 *
 * The integer sums are exact; the result equals the tile's up to float
 * rounding order. On the portable path, and for float weights, matmuls keep
 * the tiles.
 */
#pragma once

#include <glib.h>
#include "hone-cpu-dot.h"
#include "hone-dtype.h"

G_BEGIN_DECLS

/* Matmuls of fewer tokens stay on the tiles: the repacking costs about as
 * much as 4–5 tokens' worth of tile work (tests/bench/RESULTS.md, session 29). */
#define HONE_CPU_PANEL_MIN_T 8

/* Whether matmuls use panels where they can: on, unless the environment has
 * HONE_CPU_PANELS=0 (A/B measurements) or a test switched them off. The
 * setter returns the previous state. */
gboolean hone_cpu_panels_enabled (void);
gboolean hone_cpu_panels_set_enabled (gboolean on);

/* Rows a panel holds on @isa: 16 with AVX-512 (64-byte lines), else 8. */
int      hone_cpu_panel_rows (HoneCpuIsa isa);

/* Whether panels exist for @type rows of @K elements on @isa (K a multiple of
 * 64, of 256 for the K-quants; not on the portable path, nor Q8_0 on plain
 * AVX2, whose vpmaddubsw would saturate). */
gboolean hone_cpu_panel_supported (HoneDType type, int K, HoneCpuIsa isa);

/* Bytes a panel of rows of @K elements takes at most (64-byte aligned buffer). */
gsize    hone_cpu_panel_bytes (int K);

/* Repack rows 0 … @R − 1 (@R ≤ hone_cpu_panel_rows, @w_stride bytes apart) of
 * a @type matrix into @panel (hone_cpu_panel_bytes (K), 64-byte aligned) for
 * @isa's kernel; rows past @R are zeros. Only where hone_cpu_panel_supported
 * and the CPU has @isa. */
void     hone_cpu_panel_pack (HoneCpuIsa isa, HoneDType type, const void *w, size_t w_stride, int R, int K,
                              void *panel);

/* Whether @type's panels take the activations + 128 (Q6_K). */
gboolean hone_cpu_panel_needs_bias (HoneDType type);

/* @xb[t·K + k] = activation byte k of token t + 128, for t < @T (rows of @x as
 * in hone_cpu_panel_run). */
void     hone_cpu_panel_bias_act (const HoneQ8Act *x, size_t x_stride, int K, int T, uint8_t *xb);

/* out[t·out_stride + r] = row r · token t for r < @R, t < @T, of a @type panel
 * packed for @isa: @x is token 0's activation row (hone_cpu_quantize_act),
 * @x_stride bytes between tokens; @xb their bytes + 128 where
 * hone_cpu_panel_needs_bias, else NULL. */
void     hone_cpu_panel_run (HoneCpuIsa isa, HoneDType type, const void *panel, int K, int R,
                             const HoneQ8Act *x, size_t x_stride, const uint8_t *xb, int T, float *out,
                             size_t out_stride);

G_END_DECLS
