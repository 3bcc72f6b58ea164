/* hone-k-gemv-claim.cu — one-token decode GEMV whose warps claim their rows as they go.
 *
 * Why: a GEMV that runs as one wave (down: 512 blocks of 8 rows on 132 SMs)
 * ends when its slowest SM does. Session 16's trace (tests/bench/RESULTS-cuda.md)
 * put the SMs' last main-loop ends 5.4–8.7 µs after the PDL wait, the same SMs
 * slow from layer to layer (correlation 0.85), the launch's last at 9.4 µs —
 * where 33 MB take 7.3 µs at the read ceiling. Here a warp owns one row at a
 * time: the first rows (one a warp) are static, their first loads issued
 * before the PDL wait as in hone-k-gemv.cu; the rest are handed out by a
 * counter, each claim issued a row ahead so that its round trip hides behind
 * the row's loads, and the next row's first loads issued before the finished
 * row's epilogue. SMs that stream faster take more rows.
 *
 * The counter (one of the state's HONE_K_CLAIM_SLOTS, a slot a GEMV role):
 * every warp draws one ticket more than the rows it claims, so a launch
 * draws exactly `rows` tickets, and the warp that draws the last one sets
 * the counter back to 0. Launches of one slot are ordered on the stream
 * (each waits, through the PDL chain, for the kernels before it), so the
 * next one finds 0. A row's sum is computed by one warp in a fixed order:
 * deterministic, whichever warp claims it.
 */
#include "hone-k-gemv.cuh"
#include <stdlib.h>
#include <string.h>

template <int WT, int U>
__global__ void __launch_bounds__ (256)
gemv_claim_kernel (GemvArgs a, unsigned *ctr)
{
  TRACE_ENTRY (a.trace);
  const int lane = threadIdx.x & 31;
  const int nwarps = (int) gridDim.x * 8;   /* the launcher keeps nwarps <= rows */
  int row = (int) blockIdx.x * 8 + (int) (threadIdx.x >> 5);
  const int nchunk = a.nchunk;
  int4 w[U];
  uint32_t sc[U];   /* raw scale bits (f16 d, or d|m<<16 for Q4_1) */

  if (a.late_trigger == TRIG_ENTRY)
    pdl_trigger ();
  auto load = [&] (int r, int c0) {
#pragma unroll
    for (int u = 0; u < U; u++)
      {
        const int c = c0 + u * 32;
        if (c < nchunk)
          {
            w[u] = ld_stream (a.q + (size_t) r * nchunk + c);
            if (WT == HONE_K_Q8_0)
              sc[u] = ((const uint16_t *) a.s)[(size_t) r * (nchunk >> 1) + (c >> 1)];
            else if (WT == HONE_K_Q4_0)
              sc[u] = ((const uint16_t *) a.s)[(size_t) r * nchunk + c];
            else
              sc[u] = ((const uint32_t *) a.s)[(size_t) r * nchunk + c];
          }
        else
          {
            w[u] = make_int4 (0, 0, 0, 0);
            sc[u] = 0;
          }
      }
  };

  int c0 = lane;
  if (a.early)
    load (row, c0);
  pdl_wait ();
  TRACE_WAITED ();
  if (a.late_trigger == TRIG_WAIT)
    pdl_trigger ();
  if (!a.early)
    load (row, c0);
  unsigned ticket = 0;   /* lane 0: the claim for the row after this one, in flight */
  if (lane == 0)
    {
      ticket = atomicAdd (ctr, 1u);
    }
  float acc = 0.f;
  for (;;)
    {
#pragma unroll
      for (int u = 0; u < U; u++)
        {
          const int c = c0 + u * 32;
          if (c >= nchunk)
            break;
          if (WT == HONE_K_Q8_0)
            {
              const int4 xv = *(const int4 *) (a.xq + (size_t) c * 16);
              const float2 xd = a.xds[c >> 1];
              acc = dot_chunk_q8 (w[u], sc[u], xv, xd.x, acc);
            }
          else
            {
              const int4 *xp = (const int4 *) (a.xq + (size_t) c * 32);
              acc = dot_chunk_q4<WT> (w[u], sc[u], xp[0], xp[1], a.xds[c], acc);
            }
        }
      c0 += 32 * U;
      if (c0 < nchunk)
        {
          load (row, c0);
          continue;
        }
      /* the row is through: start the next one's loads, then finish this one */
      const int t = (int) __shfl_sync (0xffffffffu, ticket, 0);
      const int next = nwarps + t;
      const bool more = next < a.rows;
      if (more)
        {
          c0 = lane;
          load (next, c0);
          if (lane == 0)
            {
              ticket = atomicAdd (ctr, 1u);
            }
        }
      else
        {
          if (lane == 0 && t == a.rows - 1)   /* the launch's last ticket: every claim is in */
            atomicExch (ctr, 0u);
          TRACE_MAIN ();
          if (a.late_trigger == TRIG_LATE)
            pdl_trigger ();
        }
      const float v = warp_sum (acc);
      if (lane == 0)
        epi_store (a, row, 0, v);
      if (!more)
        break;
      row = next;
      acc = 0.f;
    }
}

/* Roles that claim rows (a mask of ROLE_*), blocks an SM and chunk loads a
 * lane: HONE_GEMV_CLAIM = 0 (none), 1 (down) or a comma list of roles (qkv,
 * o, gu, down, head; only STORE/ADD epilogues claim), then
 * HONE_GEMV_CLAIM_BPS (2) and HONE_GEMV_CLAIM_U (8: 4 KB a warp in flight);
 * HONE_GEMV_CLAIM_GRID=n (checks) runs n blocks whatever the SMs, so that
 * tiny models' GEMVs claim most of their rows too. */
static int claim_roles = -1, claim_bps = 2, claim_u = 8, claim_blocks = 0;

static void
claim_read_env (void)
{
  const char *env = getenv ("HONE_GEMV_CLAIM");
  claim_roles = 0;
  if (env && !strcmp (env, "1"))
    claim_roles = ROLE_DOWN;
  else if (env && *env && strcmp (env, "0"))
    claim_roles = hone_k_gemv_roles_of_list (env);
  const char *b = getenv ("HONE_GEMV_CLAIM_BPS");
  if (b && atoi (b) >= 1 && atoi (b) <= 8)
    claim_bps = atoi (b);
  const char *u = getenv ("HONE_GEMV_CLAIM_U");
  if (u && (atoi (u) == 4 || atoi (u) == 8))
    claim_u = atoi (u);
  const char *g = getenv ("HONE_GEMV_CLAIM_GRID");
  claim_blocks = g && atoi (g) > 0 ? atoi (g) : 0;
}

extern "C" void
hone_k_gemv_set_claim (int roles, int bps, int u)
{
  claim_roles = roles < 0 ? -1 : roles & ROLE_ALL;
  if (bps >= 1 && bps <= 8)
    claim_bps = bps;
  if (u == 4 || u == 8)
    claim_u = u;
}

static int
claim_grid (const GemvArgs &a)
{
  int grid = claim_blocks > 0 ? claim_blocks : hone_k_sm_count () * claim_bps;
  if (grid * 8 > a.rows)
    grid = a.rows / 8;
  return grid;
}

bool
hone_k_gemv_claim_takes (const GemvArgs &a, int wtype)
{
  if (claim_roles < 0)
    claim_read_env ();
  return (claim_roles & a.role) && a.n_tok == 1 && !a.norm_g && !a.x && a.xq
         && (a.epi == HONE_K_EPI_STORE || a.epi == HONE_K_EPI_ADD)
         && (wtype == HONE_K_Q4_0 || wtype == HONE_K_Q4_1 || wtype == HONE_K_Q8_0) && claim_grid (a) >= 1;
}

template <int WT>
static void (*claim_kernel (void)) (GemvArgs, unsigned *)
{
  return claim_u == 4 ? gemv_claim_kernel<WT, 4> : gemv_claim_kernel<WT, 8>;
}

int
hone_k_gemv_claim (GemvArgs a, int wtype, unsigned *slots, cudaStream_t stream)
{
  int slot = 0;
  while (slot < HONE_K_CLAIM_SLOTS - 1 && !(a.role & (1 << slot)))
    slot++;
  void (*k) (GemvArgs, unsigned *) = wtype == HONE_K_Q4_0   ? claim_kernel<HONE_K_Q4_0> ()
                                     : wtype == HONE_K_Q4_1 ? claim_kernel<HONE_K_Q4_1> ()
                                                            : claim_kernel<HONE_K_Q8_0> ();
  const dim3 grid ((unsigned) claim_grid (a)), block (256);
  HONE_K_TRACE_SET (a, HONE_K_TR_GEMV, grid, a.rows, a.cols);
  return hone_k_launch (k, grid, block, 0, stream, a, slots + slot);
}
