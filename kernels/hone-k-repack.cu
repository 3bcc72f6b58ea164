/* hone-k-repack.cu — GGUF bytes (already on the device) → the GPU layouts of
 * hone-kernels.h, and small conversions used at upload. */
#include "hone-k-common.cuh"

extern "C" size_t
hone_k_gguf_row_bytes (int t, int cols)
{
  switch (t)
    {
    case HONE_K_F32: return (size_t) cols * 4;
    case HONE_K_F16:
    case HONE_K_BF16: return (size_t) cols * 2;
    case HONE_K_Q8_0: return cols % 32 ? 0 : (size_t) cols / 32 * 34;
    case HONE_K_Q4_0: return cols % 32 ? 0 : (size_t) cols / 32 * 18;
    case HONE_K_Q4_1: return cols % 32 ? 0 : (size_t) cols / 32 * 20;
    case HONE_K_Q4_K: return cols % 256 ? 0 : (size_t) cols / 256 * 144;
    case HONE_K_Q6_K: return cols % 256 ? 0 : (size_t) cols / 256 * 210;
    case HONE_K_Q4Z: return cols % 32 ? 0 : (size_t) cols / 32 * 20;
    default: return 0;
    }
}

extern "C" int
hone_k_upload_type (int t)
{
  switch (t)
    {
    case HONE_K_F16: case HONE_K_BF16: case HONE_K_Q8_0: case HONE_K_Q4_0: case HONE_K_Q4_1:
    case HONE_K_Q4_K: case HONE_K_Q6_K: case HONE_K_Q4Z:
      return t;
    case HONE_K_F32:
      return HONE_K_F16;
    default:
      return -1;
    }
}

extern "C" size_t
hone_k_matrix_bytes (int t, int rows, int cols, size_t *qb, size_t *sb)
{
  size_t q = 0, s = 0;
  const size_t n = (size_t) rows * cols;
  switch (t)
    {
    case HONE_K_F16: case HONE_K_BF16: q = n * 2; break;
    case HONE_K_Q8_0: q = n; s = n / 32 * 2; break;
    case HONE_K_Q4_0: q = n / 2; s = n / 32 * 2; break;
    case HONE_K_Q4_1: q = n / 2; s = n / 32 * 4; break;
    case HONE_K_Q4Z: q = n / 2; s = n / 32 * 3; break;   /* group 32: hone_k_matrix_bytes_g for others */
    /* K-quants (hone-k-gemv-kquant.cu): as many bytes as the GGUF blocks */
    case HONE_K_Q4_K: if (cols % 256) return 0; q = n / 2; s = n / 256 * 16; break;
    case HONE_K_Q6_K: if (cols % 256) return 0; q = n / 2 + n / 4; s = n / 16 + n / 256 * 2; break;
    default: return 0;
    }
  if (qb) *qb = q;
  if (sb) *sb = s;
  return q + s;
}

/* One thread per 32-element GGUF block of Q8_0/Q4_0/Q4_1. */
__global__ void
repack_q_kernel (int t, const uint8_t *src, int rows, int cols, uint8_t *dq, uint8_t *ds,
                 int row0, int step)
{
  const int nb = cols / 32;
  const size_t b = (size_t) blockIdx.x * blockDim.x + threadIdx.x;
  if (b >= (size_t) rows * nb)
    return;
  const size_t r = b / nb, j = b - r * nb, dr = (size_t) row0 + r * step;
  const size_t bsz = t == HONE_K_Q8_0 ? 34 : t == HONE_K_Q4_0 ? 18 : 20;
  const uint8_t *blk = src + r * nb * bsz + j * bsz;
  const size_t di = dr * nb + j;
  if (t == HONE_K_Q8_0)
    {
      ((uint16_t *) ds)[di] = (uint16_t) (blk[0] | (blk[1] << 8));
      for (int i = 0; i < 32; i++)
        dq[di * 32 + i] = blk[2 + i];
    }
  else if (t == HONE_K_Q4_0)
    {
      ((uint16_t *) ds)[di] = (uint16_t) (blk[0] | (blk[1] << 8));
      for (int i = 0; i < 16; i++)
        dq[di * 16 + i] = blk[2 + i];
    }
  else
    {
      ((uint32_t *) ds)[di] = (uint32_t) blk[0] | ((uint32_t) blk[1] << 8) | ((uint32_t) blk[2] << 16)
                              | ((uint32_t) blk[3] << 24);
      for (int i = 0; i < 16; i++)
        dq[di * 16 + i] = blk[4 + i];
    }
}

__global__ void
f32_rows_to_f16_kernel (const float *src, int rows, int cols, __half *dst, int row0, int step)
{
  const size_t i = (size_t) blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= (size_t) rows * cols)
    return;
  const size_t r = i / cols, k = i - r * cols;
  dst[((size_t) row0 + r * step) * cols + k] = __float2half_rn (src[i]);
}

extern "C" int
hone_k_repack (int t, const void *src, int rows, int cols, HoneKMatrix *dst, int row0, int step,
               cudaStream_t stream)
{
  if (rows < 1 || cols < 1 || step < 1 || hone_k_upload_type (t) != dst->type || dst->cols != cols
      || row0 + (size_t) (rows - 1) * step >= (size_t) dst->rows || hone_k_gguf_row_bytes (t, cols) == 0)
    return (int) cudaErrorInvalidValue;
  switch (t)
    {
    case HONE_K_F16:
    case HONE_K_BF16:
      return (int) cudaMemcpy2DAsync ((char *) dst->q + (size_t) row0 * cols * 2, (size_t) step * cols * 2,
                                      src, (size_t) cols * 2, (size_t) cols * 2, rows,
                                      cudaMemcpyDeviceToDevice, stream);
    case HONE_K_Q8_0:
    case HONE_K_Q4_0:
    case HONE_K_Q4_1:
      {
        const size_t n = (size_t) rows * (cols / 32);
        repack_q_kernel<<<(unsigned) ((n + 255) / 256), 256, 0, stream>>> (
            t, (const uint8_t *) src, rows, cols, (uint8_t *) dst->q, (uint8_t *) dst->s, row0, step);
        return (int) cudaGetLastError ();
      }
    case HONE_K_Q4_K:
    case HONE_K_Q6_K:
      return hone_k_kquant_repack (t, src, rows, cols, dst, row0, step, stream);
    case HONE_K_Q4Z:
      return hone_k_q4z_repack (src, rows, cols, dst, row0, step, stream);
    case HONE_K_F32:
      {
        const size_t n = (size_t) rows * cols;
        f32_rows_to_f16_kernel<<<(unsigned) ((n + 255) / 256), 256, 0, stream>>> (
            (const float *) src, rows, cols, (__half *) dst->q, row0, step);
        return (int) cudaGetLastError ();
      }
    default:
      return (int) cudaErrorInvalidValue;
    }
}

__global__ void
to_f32_kernel (int t, const void *src, float *dst, int n)
{
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n)
    return;
  if (t == HONE_K_F32)
    dst[i] = ((const float *) src)[i];
  else if (t == HONE_K_F16)
    dst[i] = __half2float (((const __half *) src)[i]);
  else
    dst[i] = __bfloat162float (((const __nv_bfloat16 *) src)[i]);
}

extern "C" int
hone_k_to_f32 (int t, const void *src, float *dst, int n, cudaStream_t stream)
{
  if (n < 1 || (t != HONE_K_F32 && t != HONE_K_F16 && t != HONE_K_BF16))
    return (int) cudaErrorInvalidValue;
  to_f32_kernel<<<(n + 255) / 256, 256, 0, stream>>> (t, src, dst, n);
  return (int) cudaGetLastError ();
}
