// Vectorisable scalar math of the cpu kernels: expf without a libm call, and
// fixed-order lane reductions, so that hot loops compile to SIMD code (no
// -ffast-math needed) and give the same bytes for any thread count.
#ifndef SHARDRT_CPU_VMATH_H
#define SHARDRT_CPU_VMATH_H

#include <math.h>
#include <stdint.h>
#include <string.h>

#include "shardrt/bf16_inline.h" // srt_bf16_load / srt_bf16_store

/// The loops a kernel spends its time in, compiled for x86-64-v4 (AVX-512),
/// v3 (AVX2 + FMA) and the baseline, the clone picked at load time from the
/// CPU's feature bits (GCC's target_clones, an ifunc). Elsewhere (clang's
/// fuzzing and sanitizer builds, other ISAs) the baseline only. -std=c11
/// keeps floating-point contraction off, so every clone rounds alike.
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define SRT_CPU_CLONES __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define SRT_CPU_CLONES
#endif

/// Lanes of the fixed-order reductions: 16 fp32, one AVX-512 register.
enum { kLanes = 16 };

/// Elements per task of the elementwise kernels' parallel loops (64 KiB of
/// fp32): tensors of one chunk or less run on the calling thread.
enum { kChunk = 1 << 14 };

/// Columns per task of the kernels that sum rows into a [features] vector
/// (a bias or norm weight gradient): each column's rows are summed in row
/// order whatever thread runs it.
enum { kColumnBlock = 64 };

/// The end of the chunk starting at i0 of [0, n).
static inline int64_t srt_chunk_end(int64_t i0, int64_t n) {
  return i0 + kChunk < n ? i0 + kChunk : n;
}

/// e^r for |r| <= ln2 / 2 (Cephes expf's degree-7 polynomial), times 2^n
/// for an integer-valued n in [-126, 127], from the exponent bits.
static inline float srt_exp_reduced(float r, float n) {
  float p = 1.9875691500e-4f;
  p = fmaf(p, r, 1.3981999507e-3f);
  p = fmaf(p, r, 8.3334519073e-3f);
  p = fmaf(p, r, 4.1665795894e-2f);
  p = fmaf(p, r, 1.6666665459e-1f);
  p = fmaf(p, r, 5.0000001201e-1f);
  p = fmaf(p, r * r, r) + 1.0f;
  int32_t bits = ((int32_t)n + 127) << 23;
  float scale;
  memcpy(&scale, &bits, sizeof scale);
  return p * scale;
}

/// e^x in fp32 for x <= 88.02 (what a softmax needs: x = s - max <= 0),
/// max relative error about 1 ulp (Cephes expf: round x log2(e) to n,
/// reduce by n ln2 in two parts (Cody-Waite), degree-7 polynomial, scale by
/// 2^n). 0 for x < -87.33 (no denormals), NaN for NaN; larger x are not
/// handled (srt_expf does). Branch-free, so loops calling it vectorise;
/// fmaf (one rounding, exactly specified) makes every ISA clone give the
/// same bytes, and is one instruction on x86-64-v3/v4.
static inline float srt_expf_below_88(float x) {
  float xc = x > -87.33654f ? x : -87.33654f; // NaN takes the clamp too
  xc = xc < 88.72283f ? xc : 88.72283f; // out of the domain, but no UB
  // Round to nearest by the 1.5 * 2^23 trick (exact for |x log2e| < 2^22).
  float n = fmaf(xc, 1.44269504088896341f, 12582912.0f) - 12582912.0f;
  float r = fmaf(n, -0.693359375f, xc);
  r = fmaf(n, 2.12194440e-4f, r);
  float y = srt_exp_reduced(r, n);
  y = x > -87.33654f ? y : 0.0f;
  return x == x ? y : x;
}

/// e^x in fp32 for every x: srt_expf_below_88, plus the top of the range
/// (x up to 88.72 finite, as glibc's expf; +inf above).
static inline float srt_expf(float x) {
  // Every arm is computed before its select: GCC does not speculate a
  // floating-point operation out of a conditional arm (it might trap), so
  // an arithmetic arm, like a short-circuit condition, would leave control
  // flow in the loop, which only AVX-512's masks vectorise: the AVX2 clones
  // would run scalar.
  float halved = 0.5f * x;
  float half = x > 88.0f ? halved : x; // e^x = (e^(x/2))^2 up there
  float y = srt_expf_below_88(half > 88.0f ? 88.0f : half); // NaN stays
  float squared = y * y;
  y = x > 88.0f ? squared : y;
  return x > 88.72283f ? INFINITY : y; // a NaN fails the test and stays
}

/// Sum of x[0, n) in fp32: kLanes running sums (element i into lane
/// i % kLanes), then the lanes added in order. The same bytes wherever it
/// runs; vectorises.
static inline float srt_sum(const float *x, int64_t n) {
  float lane[kLanes] = {0};
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes)
    for (int u = 0; u < kLanes; u++)
      lane[u] += x[i + u];
  for (int u = 0; i < n; i++, u++)
    lane[u] += x[i];
  float s = 0.0f;
  for (int u = 0; u < kLanes; u++)
    s += lane[u];
  return s;
}

/// Dot product of x and y [0, n) in fp32, lanes as srt_sum.
static inline float srt_dot(const float *x, const float *y, int64_t n) {
  float lane[kLanes] = {0};
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes)
    for (int u = 0; u < kLanes; u++)
      lane[u] += x[i + u] * y[i + u];
  for (int u = 0; i < n; i++, u++)
    lane[u] += x[i] * y[i];
  float s = 0.0f;
  for (int u = 0; u < kLanes; u++)
    s += lane[u];
  return s;
}

/// sum_i e^(x_i - m) over [0, n) in float64: a softmax denominator over a
/// long row (a vocabulary) without float rounding growing with n. The SIMD
/// partial sums make the order depend on the vector width (the ISA clone),
/// never on the thread count.
static inline double srt_sum_exp_f64(const float *x, int64_t n, float m) {
  double s = 0.0;
#pragma omp simd reduction(+ : s)
  for (int64_t i = 0; i < n; i++)
    s += (double)srt_expf_below_88(x[i] - m);
  return s;
}

/// sum_i x_i y_i over [0, n) in float64, SIMD partial sums as srt_sum_exp_f64.
static inline double srt_dot_f64(const float *x, const float *y, int64_t n) {
  double s = 0.0;
#pragma omp simd reduction(+ : s)
  for (int64_t i = 0; i < n; i++)
    s += (double)x[i] * (double)y[i];
  return s;
}

/// max of x[0, n) (-inf for n = 0); NaN-propagation is not promised.
static inline float srt_max(const float *x, int64_t n) {
  float lane[kLanes];
  for (int u = 0; u < kLanes; u++)
    lane[u] = -INFINITY;
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes)
    for (int u = 0; u < kLanes; u++)
      lane[u] = x[i + u] > lane[u] ? x[i + u] : lane[u];
  for (int u = 0; i < n; i++, u++)
    lane[u] = x[i] > lane[u] ? x[i] : lane[u];
  float m = -INFINITY;
  for (int u = 0; u < kLanes; u++)
    m = lane[u] > m ? lane[u] : m;
  return m;
}

#endif // SHARDRT_CPU_VMATH_H
