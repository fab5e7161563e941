// Scaled dot-product attention, our own FlashAttention-2-style kernels: the
// fallback for what cuDNN's fused SDPA refuses. Causal, sliding window,
// logit softcap, grouped and replicated KV heads, head_dim <= 256; fp32
// online softmax; a deterministic backward (runtime/cpu/attention.c,
// runtime/src/ops/attention.c). Correctness before speed: scores are fp32
// dot products from shared memory, no tensor cores.
//
// Context parallelism (cp_size > 1, as srt_cpu_attention_forward): the
// queries are a rank's two chunks of S / (2 cp) (head-tail), the keys all S.
// Query tiles are cut per chunk, so a tile's queries are consecutive global
// positions: masks, key ranges and document spans use global indices, and
// only q/out/lse/delta/dq rows are local; the dk/dv kernel walks the query
// range of its keys inside each chunk in turn.
#include <math.h>

#include "../kernels.h"
#include "common.cuh"

using namespace srt_cuda;

namespace {

// Four warps; each warp owns four rows of the block's tile (queries in the
// forward and dq kernels, keys in the dk/dv kernel) and a lane owns one
// column of the score tile (a key, resp. a query). For the products with V,
// K, dO and Q a lane owns the head dims lane, lane + 32, ... (DPL of them).
constexpr int kAttnThreads = 128;
constexpr int kRowsPerWarp = 4;
constexpr int kRowTile = kRowsPerWarp * kAttnThreads / 32; // 16 rows per block
constexpr int kColTile = 32;                                // one column per lane
constexpr int kMaxHeadDim = 256;

struct Geo {
  int64_t S, H, KV, hd, ldq, ldkv; // row strides of q/out and k/v
  int64_t Sq, C, chunks;           // local query rows: `chunks` runs of C
  int64_t start[2];                // each run's first global position
  int64_t off, group;              // global head of local h: off + h; KV head: / group
  int64_t window;
  int causal;
  float scale, cap;
  const int64_t *seg; // segment ids [batch, S] (packed documents), or NULL
};

// Whether key j is visible from query i of batch row b: causal, window,
// and (packed documents) the same segment, padding (-1) seeing nothing.
__device__ __forceinline__ bool visible(const Geo &g, int64_t b, int64_t i, int64_t j) {
  if (i >= g.S || j >= g.S)
    return false;
  if (g.causal && j > i)
    return false;
  if (g.seg && (g.seg[b * g.S + i] < 0 || g.seg[b * g.S + i] != g.seg[b * g.S + j]))
    return false;
  return g.window <= 0 || (i > j ? i - j : j - i) < g.window;
}

// Keys visible to some query of [i0, i1): [*lo, *hi).
__device__ __forceinline__ void key_range(const Geo &g, int64_t i0, int64_t i1, int64_t *lo,
                                          int64_t *hi) {
  int64_t a = g.window > 0 ? i0 - g.window + 1 : 0;
  int64_t b = g.causal ? i1 : g.window > 0 ? i1 - 1 + g.window : g.S;
  *lo = a > 0 ? a : 0;
  *hi = b < g.S ? b : g.S;
}

// Queries that see some key of [j0, j1): [*lo, *hi).
__device__ __forceinline__ void query_range(const Geo &g, int64_t j0, int64_t j1, int64_t *lo,
                                            int64_t *hi) {
  int64_t a = g.causal ? j0 : g.window > 0 ? j0 - g.window + 1 : 0;
  int64_t b = g.window > 0 ? j1 - 1 + g.window : g.S;
  *lo = a > 0 ? a : 0;
  *hi = b < g.S ? b : g.S;
}

// Packed documents: narrows [*lo, *hi) to the documents of positions
// [a, b) of batch row `seg` (segment ids [S]): from the start of a's run of
// equal ids to the end of (b - 1)'s, since no position outside shares a
// document with [a, b) (a document is a run; ids do not repeat in
// non-adjacent runs of a row). The whole block walks out from a and b,
// blockDim.x positions per round, so the cost is the documents' length over
// blockDim.x; every thread must call it (it synchronises the block).
__device__ void doc_span(const int64_t *seg, int64_t S, int64_t a, int64_t b, int64_t *lo,
                         int64_t *hi) {
  __shared__ unsigned long long start, end;
  if (threadIdx.x == 0) {
    start = 0;
    end = (unsigned long long)S;
  }
  __syncthreads();
  const int64_t first = seg[a], last = seg[b - 1];
  for (int64_t base = a - 1; base >= 0; base -= blockDim.x) {
    int64_t t = base - (int64_t)threadIdx.x;
    bool differ = t >= 0 && seg[t] != first;
    if (differ)
      atomicMax(&start, (unsigned long long)(t + 1));
    if (__syncthreads_or(differ))
      break;
  }
  for (int64_t base = b; base < S; base += blockDim.x) {
    int64_t t = base + (int64_t)threadIdx.x;
    bool differ = t < S && seg[t] != last;
    if (differ)
      atomicMin(&end, (unsigned long long)t);
    if (__syncthreads_or(differ))
      break;
  }
  int64_t s = (int64_t)start, e = (int64_t)end;
  __syncthreads(); // every thread read start/end before a later call resets them
  *lo = *lo > s ? *lo : s;
  *hi = *hi < e ? *hi : e;
}

// The logit of a visible pair from its raw q.k; *t gets tanh(scale q.k / c)
// for the softcap's derivative.
__device__ __forceinline__ float logit(const Geo &g, float dot, float *t) {
  float s = g.scale * dot;
  *t = 0.0f;
  if (g.cap > 0.0f) {
    *t = tanhf(s / g.cap);
    s = g.cap * *t;
  }
  return s;
}

// dscore = p (dp - delta) (1 - t^2 with softcap) scale, p = exp(logit - lse),
// in the CPU backward's order; *p gets p.
__device__ __forceinline__ float dscore(const Geo &g, float dot, float dp, float lse, float delta,
                                        float *p) {
  float t, s = logit(g, dot, &t);
  *p = expf(s - lse);
  float ds = *p * (dp - delta);
  if (g.cap > 0.0f)
    ds *= 1.0f - t * t;
  return ds * g.scale;
}

// dst[r, d] (row stride ld) = float(src[row0 + r, d]) for r < rows, zero
// for rows at or past S (so masked products never meet garbage).
__device__ void load_tile(float *dst, int ld, const bf16 *src, int64_t src_ld, int64_t row0,
                          int rows, int64_t S, int hd) {
  for (int e = threadIdx.x; e < rows * hd; e += blockDim.x) {
    int r = e / hd, d = e - r * hd;
    int64_t row = row0 + r;
    dst[r * ld + d] = row < S ? to_f32(src[row * src_ld + d]) : 0.0f;
  }
}

// Rows read by one lane each get an odd stride (in floats), so the 32 lanes
// hit 32 different banks; rows read by a whole warp at once are broadcasts.
__host__ __device__ __forceinline__ int lane_ld(int hd) { return hd | 1; }

__device__ __forceinline__ int64_t kv_head(const Geo &g, int64_t h) {
  return (g.off + h) / g.group;
}

// Query tile x (blockIdx.x) of the forward and dq kernels: kRowTile queries
// from global position gi0 (local row li0), inside a chunk whose global
// positions end at gend (a tile never straddles two chunks).
struct QTile {
  int64_t gi0, li0, gend;
};

__host__ __device__ __forceinline__ int64_t chunk_tiles(const Geo &g) {
  return (g.C + kRowTile - 1) / kRowTile;
}

__device__ __forceinline__ QTile q_tile(const Geo &g, int64_t x) {
  int64_t k = x / chunk_tiles(g), off = x % chunk_tiles(g) * kRowTile;
  return QTile{g.start[k] + off, k * g.C + off, g.start[k] + g.C};
}

//===----------------------------------------------------------------------===//
// Forward: a block per (batch, head, 16 queries), key tiles of 32
//===----------------------------------------------------------------------===//

template <int DPL>
__global__ void __launch_bounds__(kAttnThreads)
    forward_kernel(bf16 *out, float *lse, const bf16 *q, const bf16 *k, const bf16 *v, Geo g) {
  extern __shared__ float smem[];
  const int hd = (int)g.hd, ld = lane_ld(hd);
  float *Qs = smem, *Ks = Qs + kRowTile * hd, *Vs = Ks + kColTile * ld;
  const int lane = threadIdx.x & 31, row0 = (threadIdx.x >> 5) * kRowsPerWarp;
  const QTile qt = q_tile(g, blockIdx.x);
  const int64_t b = blockIdx.z, h = blockIdx.y, i0 = qt.gi0, lend = qt.li0 + qt.gend - i0;
  const int64_t kvh = kv_head(g, h);
  const bf16 *kh = k + b * g.S * g.ldkv + kvh * hd, *vh = v + b * g.S * g.ldkv + kvh * hd;
  load_tile(Qs, hd, q + b * g.Sq * g.ldq + h * hd, g.ldq, qt.li0, kRowTile, lend, hd);

  float m[kRowsPerWarp], l[kRowsPerWarp], acc[kRowsPerWarp][DPL];
#pragma unroll
  for (int r = 0; r < kRowsPerWarp; ++r) {
    m[r] = -INFINITY;
    l[r] = 0.0f;
#pragma unroll
    for (int c = 0; c < DPL; ++c)
      acc[r][c] = 0.0f;
  }
  int64_t lo, hi, i1 = i0 + kRowTile < qt.gend ? i0 + kRowTile : qt.gend;
  key_range(g, i0, i1, &lo, &hi);
  if (g.seg) // the key tiles of other documents are never visited
    doc_span(g.seg + b * g.S, g.S, i0, i1, &lo, &hi);
  for (int64_t j0 = lo; j0 < hi; j0 += kColTile) {
    __syncthreads(); // Q is loaded; the previous K/V tile is consumed
    load_tile(Ks, ld, kh, g.ldkv, j0, kColTile, g.S, hd);
    load_tile(Vs, ld, vh, g.ldkv, j0, kColTile, g.S, hd);
    __syncthreads();
    float dot[kRowsPerWarp] = {};
    for (int d = 0; d < hd; ++d) {
      float kd = Ks[lane * ld + d];
#pragma unroll
      for (int r = 0; r < kRowsPerWarp; ++r)
        dot[r] += Qs[(row0 + r) * hd + d] * kd;
    }
    // Online softmax: rescale the running sum and output to the new max.
    float p[kRowsPerWarp];
#pragma unroll
    for (int r = 0; r < kRowsPerWarp; ++r) {
      float t, s = visible(g, b, i0 + row0 + r, j0 + lane) ? logit(g, dot[r], &t) : -INFINITY;
      float mnew = fmaxf(m[r], warp_reduce(s, MaxOp()));
      float alpha = mnew == -INFINITY ? 1.0f : expf(m[r] - mnew);
      p[r] = mnew == -INFINITY ? 0.0f : expf(s - mnew);
      l[r] = l[r] * alpha + warp_reduce(p[r], SumOp());
      m[r] = mnew;
#pragma unroll
      for (int c = 0; c < DPL; ++c)
        acc[r][c] *= alpha;
    }
    for (int jj = 0; jj < kColTile; ++jj) {
      float vv[DPL];
#pragma unroll
      for (int c = 0; c < DPL; ++c)
        vv[c] = lane + 32 * c < hd ? Vs[jj * ld + lane + 32 * c] : 0.0f;
#pragma unroll
      for (int r = 0; r < kRowsPerWarp; ++r) {
        float pj = __shfl_sync(0xffffffffu, p[r], jj);
#pragma unroll
        for (int c = 0; c < DPL; ++c)
          acc[r][c] += pj * vv[c];
      }
    }
  }
#pragma unroll
  for (int r = 0; r < kRowsPerWarp; ++r) {
    int64_t i = qt.li0 + row0 + r; // local row
    if (i >= lend)
      continue;
    float inv = l[r] > 0.0f ? 1.0f / l[r] : 0.0f;
    bf16 *o = out + (b * g.Sq + i) * g.ldq + h * hd;
#pragma unroll
    for (int c = 0; c < DPL; ++c)
      if (lane + 32 * c < hd)
        put(o + lane + 32 * c, acc[r][c] * inv);
    if (lane == 0)
      lse[(b * g.H + h) * g.Sq + i] = l[r] > 0.0f ? m[r] + logf(l[r]) : -INFINITY;
  }
}

//===----------------------------------------------------------------------===//
// Backward: delta, then dq (a block per 16 queries, looping over keys), then
// dk/dv (a block per 16 keys, looping over the local query heads of that KV
// head and over their queries). Each output element is summed by one thread
// in a fixed order: deterministic without atomics.
//===----------------------------------------------------------------------===//

// delta[b, h, i] = dout_i . out_i over the head dims, a warp per (b, i, h).
__global__ void __launch_bounds__(kThreads)
    delta_kernel(float *delta, const bf16 *dout, const bf16 *out, Geo g, int64_t batch) {
  int lane = threadIdx.x & 31;
  int64_t rows = batch * g.Sq * g.H, warps = (int64_t)gridDim.x * (blockDim.x / 32);
  for (int64_t w = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) / 32; w < rows; w += warps) {
    const bf16 *a = dout + w * g.hd, *o = out + w * g.hd;
    float s = 0.0f;
    for (int64_t d = lane; d < g.hd; d += 32)
      s += to_f32(a[d]) * to_f32(o[d]);
    s = warp_reduce(s, SumOp());
    int64_t h = w % g.H, bs = w / g.H;
    if (lane == 0)
      delta[(bs / g.Sq * g.H + h) * g.Sq + bs % g.Sq] = s;
  }
}

template <int DPL>
__global__ void __launch_bounds__(kAttnThreads)
    dq_kernel(bf16 *dq, const bf16 *dout, const bf16 *q, const bf16 *k, const bf16 *v,
              const float *lse, const float *delta, Geo g) {
  extern __shared__ float smem[];
  const int hd = (int)g.hd, ld = lane_ld(hd);
  float *Qs = smem, *dOs = Qs + kRowTile * hd, *Ks = dOs + kRowTile * hd, *Vs = Ks + kColTile * ld;
  const int lane = threadIdx.x & 31, row0 = (threadIdx.x >> 5) * kRowsPerWarp;
  const QTile qt = q_tile(g, blockIdx.x);
  const int64_t b = blockIdx.z, h = blockIdx.y, i0 = qt.gi0, lend = qt.li0 + qt.gend - i0;
  const int64_t kvh = kv_head(g, h);
  const bf16 *kh = k + b * g.S * g.ldkv + kvh * hd, *vh = v + b * g.S * g.ldkv + kvh * hd;
  load_tile(Qs, hd, q + b * g.Sq * g.ldq + h * hd, g.ldq, qt.li0, kRowTile, lend, hd);
  load_tile(dOs, hd, dout + b * g.Sq * g.ldq + h * hd, g.ldq, qt.li0, kRowTile, lend, hd);

  float L[kRowsPerWarp], D[kRowsPerWarp], acc[kRowsPerWarp][DPL];
#pragma unroll
  for (int r = 0; r < kRowsPerWarp; ++r) {
    int64_t i = qt.li0 + row0 + r, at = (b * g.H + h) * g.Sq + i; // local row
    L[r] = i < lend ? lse[at] : 0.0f;
    D[r] = i < lend ? delta[at] : 0.0f;
#pragma unroll
    for (int c = 0; c < DPL; ++c)
      acc[r][c] = 0.0f;
  }
  int64_t lo, hi, i1 = i0 + kRowTile < qt.gend ? i0 + kRowTile : qt.gend;
  key_range(g, i0, i1, &lo, &hi);
  if (g.seg) // the key tiles of other documents are never visited
    doc_span(g.seg + b * g.S, g.S, i0, i1, &lo, &hi);
  for (int64_t j0 = lo; j0 < hi; j0 += kColTile) {
    __syncthreads();
    load_tile(Ks, ld, kh, g.ldkv, j0, kColTile, g.S, hd);
    load_tile(Vs, ld, vh, g.ldkv, j0, kColTile, g.S, hd);
    __syncthreads();
    float qk[kRowsPerWarp] = {}, dp[kRowsPerWarp] = {};
    for (int d = 0; d < hd; ++d) {
      float kd = Ks[lane * ld + d], vd = Vs[lane * ld + d];
#pragma unroll
      for (int r = 0; r < kRowsPerWarp; ++r) {
        qk[r] += Qs[(row0 + r) * hd + d] * kd;
        dp[r] += dOs[(row0 + r) * hd + d] * vd;
      }
    }
    float ds[kRowsPerWarp];
#pragma unroll
    for (int r = 0; r < kRowsPerWarp; ++r) {
      float p;
      ds[r] = visible(g, b, i0 + row0 + r, j0 + lane) ? dscore(g, qk[r], dp[r], L[r], D[r], &p)
                                                    : 0.0f;
    }
    for (int jj = 0; jj < kColTile; ++jj) {
      float kv[DPL];
#pragma unroll
      for (int c = 0; c < DPL; ++c)
        kv[c] = lane + 32 * c < hd ? Ks[jj * ld + lane + 32 * c] : 0.0f;
#pragma unroll
      for (int r = 0; r < kRowsPerWarp; ++r) {
        float dsj = __shfl_sync(0xffffffffu, ds[r], jj);
#pragma unroll
        for (int c = 0; c < DPL; ++c)
          acc[r][c] += dsj * kv[c];
      }
    }
  }
#pragma unroll
  for (int r = 0; r < kRowsPerWarp; ++r) {
    int64_t i = qt.li0 + row0 + r; // local row
    if (i >= lend)
      continue;
    bf16 *o = dq + (b * g.Sq + i) * g.ldq + h * hd;
#pragma unroll
    for (int c = 0; c < DPL; ++c)
      if (lane + 32 * c < hd)
        put(o + lane + 32 * c, acc[r][c]);
  }
}

template <int DPL>
__global__ void __launch_bounds__(kAttnThreads)
    dkdv_kernel(bf16 *dk, bf16 *dv, const bf16 *dout, const bf16 *q, const bf16 *k,
                const bf16 *v, const float *lse, const float *delta, Geo g) {
  extern __shared__ float smem[];
  const int hd = (int)g.hd, ld = lane_ld(hd);
  float *Ks = smem, *Vs = Ks + kRowTile * hd, *Qs = Vs + kRowTile * hd, *dOs = Qs + kColTile * ld;
  float *Ls = dOs + kColTile * ld, *Ds = Ls + kColTile;
  const int lane = threadIdx.x & 31, row0 = (threadIdx.x >> 5) * kRowsPerWarp;
  const int64_t b = blockIdx.z, kvh = blockIdx.y, j0 = (int64_t)blockIdx.x * kRowTile;
  load_tile(Ks, hd, k + b * g.S * g.ldkv + kvh * hd, g.ldkv, j0, kRowTile, g.S, hd);
  load_tile(Vs, hd, v + b * g.S * g.ldkv + kvh * hd, g.ldkv, j0, kRowTile, g.S, hd);

  float dK[kRowsPerWarp][DPL] = {}, dV[kRowsPerWarp][DPL] = {};
  // The local query heads reading this KV head: global heads
  // [kvh * group, (kvh + 1) * group) shifted by the offset, clipped to [0, H).
  int64_t h_lo = kvh * g.group - g.off, h_hi = h_lo + g.group;
  h_lo = h_lo > 0 ? h_lo : 0;
  h_hi = h_hi < g.H ? h_hi : g.H;
  int64_t lo, hi, j1 = j0 + kRowTile < g.S ? j0 + kRowTile : g.S;
  query_range(g, j0, j1, &lo, &hi);
  if (g.seg) // the query tiles of other documents are never visited
    doc_span(g.seg + b * g.S, g.S, j0, j1, &lo, &hi);
  for (int64_t h = h_lo; h < h_hi; ++h)
    for (int64_t ch = 0; ch < g.chunks; ++ch) { // the queries of [lo, hi) in chunk ch
      const int64_t qlo = lo > g.start[ch] ? lo : g.start[ch];
      const int64_t qend = g.start[ch] + g.C, qhi = hi < qend ? hi : qend;
      const int64_t shift = ch * g.C - g.start[ch]; // local row = global + shift
      const bf16 *qh = q + b * g.Sq * g.ldq + h * hd, *doh = dout + b * g.Sq * g.ldq + h * hd;
      const float *lh = lse + (b * g.H + h) * g.Sq, *dh = delta + (b * g.H + h) * g.Sq;
      for (int64_t i0 = qlo; i0 < qhi; i0 += kColTile) {
        __syncthreads(); // K/V are loaded; the previous Q/dO tile is consumed
        // Rows past the chunk are zeros (past qhi: real rows no key here sees).
        load_tile(Qs, ld, qh, g.ldq, i0 + shift, kColTile, qend + shift, hd);
        load_tile(dOs, ld, doh, g.ldq, i0 + shift, kColTile, qend + shift, hd);
        if (threadIdx.x < kColTile) {
          int64_t i = i0 + threadIdx.x;
          Ls[threadIdx.x] = i < qend ? lh[i + shift] : 0.0f;
          Ds[threadIdx.x] = i < qend ? dh[i + shift] : 0.0f;
        }
        __syncthreads();
        float qk[kRowsPerWarp] = {}, dp[kRowsPerWarp] = {};
        for (int d = 0; d < hd; ++d) {
          float qd = Qs[lane * ld + d], od = dOs[lane * ld + d];
#pragma unroll
          for (int r = 0; r < kRowsPerWarp; ++r) {
            qk[r] += qd * Ks[(row0 + r) * hd + d];
            dp[r] += od * Vs[(row0 + r) * hd + d];
          }
        }
        float p[kRowsPerWarp], ds[kRowsPerWarp];
#pragma unroll
        for (int r = 0; r < kRowsPerWarp; ++r) {
          p[r] = ds[r] = 0.0f;
          if (i0 + lane < qend && visible(g, b, i0 + lane, j0 + row0 + r))
            ds[r] = dscore(g, qk[r], dp[r], Ls[lane], Ds[lane], &p[r]);
        }
        for (int ii = 0; ii < kColTile; ++ii) {
          float qv[DPL], ov[DPL];
#pragma unroll
          for (int c = 0; c < DPL; ++c) {
            bool in = lane + 32 * c < hd;
            qv[c] = in ? Qs[ii * ld + lane + 32 * c] : 0.0f;
            ov[c] = in ? dOs[ii * ld + lane + 32 * c] : 0.0f;
          }
#pragma unroll
          for (int r = 0; r < kRowsPerWarp; ++r) {
            float pi = __shfl_sync(0xffffffffu, p[r], ii);
            float dsi = __shfl_sync(0xffffffffu, ds[r], ii);
#pragma unroll
            for (int c = 0; c < DPL; ++c) {
              dV[r][c] += pi * ov[c];
              dK[r][c] += dsi * qv[c];
            }
          }
        }
      }
    }
#pragma unroll
  for (int r = 0; r < kRowsPerWarp; ++r) {
    int64_t j = j0 + row0 + r;
    if (j >= g.S)
      continue;
    int64_t at = (b * g.S + j) * g.ldkv + kvh * hd;
#pragma unroll
    for (int c = 0; c < DPL; ++c)
      if (lane + 32 * c < hd) {
        put(dk + at + lane + 32 * c, dK[r][c]);
        put(dv + at + lane + 32 * c, dV[r][c]);
      }
  }
}

//===----------------------------------------------------------------------===//
// Launchers
//===----------------------------------------------------------------------===//

// Validates `s` into a Geo: every size the grid and the head mapping need.
cudaError_t geometry(const srt_cuda_attention_shape *s, Geo *g) {
  if (s->batch < 0 || s->seq < 0 || s->heads <= 0 || s->kv_heads <= 0 || s->head_dim <= 0 ||
      s->head_dim > kMaxHeadDim || s->global_heads <= 0 || s->global_heads % s->kv_heads != 0 ||
      s->q_head_offset < 0 || s->q_head_offset + s->heads > s->global_heads ||
      s->sliding_window < 0 || !(s->softcap >= 0.0f) || isinf(s->softcap) ||
      s->cp_size < 0 || s->cp_rank < 0 || s->cp_rank >= (s->cp_size > 1 ? s->cp_size : 1) ||
      (s->cp_size > 1 && s->seq % (2 * s->cp_size) != 0) ||
      s->heads > 65535 || s->kv_heads > 65535 || s->batch > 65535 ||
      (s->seq + kRowTile - 1) / kRowTile > 0x7fffffff)
    return cudaErrorInvalidValue;
  g->S = s->seq;
  g->H = s->heads;
  g->KV = s->kv_heads;
  g->hd = s->head_dim;
  g->ldq = s->heads * s->head_dim;
  g->ldkv = s->kv_heads * s->head_dim;
  g->off = s->q_head_offset;
  g->group = s->global_heads / s->kv_heads;
  g->window = s->sliding_window;
  g->causal = s->causal != 0;
  g->scale = s->scale;
  g->cap = s->softcap;
  bool cp = s->cp_size > 1;
  g->Sq = cp ? s->seq / s->cp_size : s->seq;
  g->C = cp ? s->seq / (2 * s->cp_size) : s->seq;
  g->chunks = cp ? 2 : 1;
  g->start[0] = cp ? s->cp_rank * g->C : 0;
  g->start[1] = cp ? (2 * s->cp_size - 1 - s->cp_rank) * g->C : 0;
  return cudaSuccess;
}

// Shared-memory floats of each kernel (see their tile layouts).
size_t forward_smem(int hd) { return sizeof(float) * (kRowTile * hd + 2 * kColTile * lane_ld(hd)); }
size_t dq_smem(int hd) { return sizeof(float) * (2 * kRowTile * hd + 2 * kColTile * lane_ld(hd)); }
size_t dkdv_smem(int hd) {
  return sizeof(float) * (2 * kRowTile * hd + 2 * kColTile * lane_ld(hd) + 2 * kColTile);
}

template <int DPL>
cudaError_t forward(bf16 *out, float *lse, const bf16 *q, const bf16 *k, const bf16 *v,
                    const Geo &g, int64_t batch, cudaStream_t stream) {
  size_t bytes = forward_smem((int)g.hd);
  cudaError_t err = allow_smem(forward_kernel<DPL>, bytes);
  if (err != cudaSuccess)
    return err;
  dim3 grid((unsigned)(g.chunks * chunk_tiles(g)), (unsigned)g.H, (unsigned)batch);
  forward_kernel<DPL><<<grid, kAttnThreads, bytes, stream>>>(out, lse, q, k, v, g);
  return cudaGetLastError();
}

template <int DPL>
cudaError_t backward(bf16 *dq, bf16 *dk, bf16 *dv, const bf16 *dout, const bf16 *q,
                     const bf16 *k, const bf16 *v, const bf16 *out, const float *lse,
                     float *delta, const Geo &g, int64_t batch, cudaStream_t stream) {
  size_t dq_bytes = dq_smem((int)g.hd), kv_bytes = dkdv_smem((int)g.hd);
  cudaError_t err = allow_smem(dq_kernel<DPL>, dq_bytes);
  if (err == cudaSuccess)
    err = allow_smem(dkdv_kernel<DPL>, kv_bytes);
  if (err != cudaSuccess)
    return err;
  delta_kernel<<<grid_for(batch * g.Sq * g.H, kThreads / 32), kThreads, 0, stream>>>(delta, dout,
                                                                                    out, g, batch);
  unsigned q_tiles = (unsigned)(g.chunks * chunk_tiles(g));
  unsigned tiles = (unsigned)((g.S + kRowTile - 1) / kRowTile);
  dq_kernel<DPL><<<dim3(q_tiles, (unsigned)g.H, (unsigned)batch), kAttnThreads, dq_bytes, stream>>>(
      dq, dout, q, k, v, lse, delta, g);
  dkdv_kernel<DPL>
      <<<dim3(tiles, (unsigned)g.KV, (unsigned)batch), kAttnThreads, kv_bytes, stream>>>(
          dk, dv, dout, q, k, v, lse, delta, g);
  return cudaGetLastError();
}

} // namespace

/// Shapes the kernels cannot run give cudaErrorInvalidValue before any
/// launch: head_dim outside [1, 256], global_heads not a positive multiple
/// of kv_heads (it must be set, = heads when KV is sharded like q), local
/// heads past global_heads, a negative window or softcap, cp_rank outside
/// [0, cp_size) or 2 cp_size not dividing seq, and heads, kv_heads or
/// batch past 65535 (grid dimensions).
cudaError_t srt_cuda_attention_forward(srt_bf16 *out, float *lse, const srt_bf16 *q,
                                       const srt_bf16 *k, const srt_bf16 *v,
                                       const int64_t *segment_ids,
                                       const srt_cuda_attention_shape *shape,
                                       cudaStream_t stream) {
  Geo g;
  cudaError_t err = geometry(shape, &g);
  g.seg = segment_ids;
  if (err != cudaSuccess || shape->batch == 0 || g.S == 0)
    return err;
  bf16 *o = as_bf16(out);
  const bf16 *qq = as_bf16(q), *kk = as_bf16(k), *vv = as_bf16(v);
  int64_t B = shape->batch;
  if (g.hd <= 32)
    return forward<1>(o, lse, qq, kk, vv, g, B, stream);
  if (g.hd <= 64)
    return forward<2>(o, lse, qq, kk, vv, g, B, stream);
  if (g.hd <= 128)
    return forward<4>(o, lse, qq, kk, vv, g, B, stream);
  return forward<8>(o, lse, qq, kk, vv, g, B, stream);
}

/// Shapes as the forward. Three kernels: delta, dq, then dk/dv; dk/dv rows
/// of KV heads that no local query head reads are written as zeros.
cudaError_t srt_cuda_attention_backward(srt_bf16 *dq, srt_bf16 *dk, srt_bf16 *dv,
                                        const srt_bf16 *dout, const srt_bf16 *q,
                                        const srt_bf16 *k, const srt_bf16 *v,
                                        const srt_bf16 *out, const float *lse, float *delta,
                                        const int64_t *segment_ids,
                                        const srt_cuda_attention_shape *shape,
                                        cudaStream_t stream) {
  Geo g;
  cudaError_t err = geometry(shape, &g);
  g.seg = segment_ids;
  if (err != cudaSuccess || shape->batch == 0 || g.S == 0)
    return err;
  bf16 *gq = as_bf16(dq), *gk = as_bf16(dk), *gv = as_bf16(dv);
  const bf16 *go = as_bf16(dout), *qq = as_bf16(q), *kk = as_bf16(k), *vv = as_bf16(v),
             *oo = as_bf16(out);
  int64_t B = shape->batch;
  if (g.hd <= 32)
    return backward<1>(gq, gk, gv, go, qq, kk, vv, oo, lse, delta, g, B, stream);
  if (g.hd <= 64)
    return backward<2>(gq, gk, gv, go, qq, kk, vv, oo, lse, delta, g, B, stream);
  if (g.hd <= 128)
    return backward<4>(gq, gk, gv, go, qq, kk, vv, oo, lse, delta, g, B, stream);
  return backward<8>(gq, gk, gv, go, qq, kk, vv, oo, lse, delta, g, B, stream);
}
