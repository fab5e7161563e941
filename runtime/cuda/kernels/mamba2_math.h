// The math of the cuda backend's Mamba2 mixer kernels (kernels/mamba2.cu),
// shared by nvcc (device code) and the host C compiler: every function is
// __host__ __device__ under nvcc and plain static inline in C, so that a
// host test (test/unit/kernels/cuda_mamba2_math_test.c) runs the very code
// the kernels run, with the kernels' work decomposition, against the cpu
// backend (runtime/cpu/mamba2.c) on a machine without a GPU.
//
// All values are fp32 (the kernels cast the bf16 activations and weight
// copies once); layouts are those of runtime/cpu/mamba2.c: proj [n, proj]
// = z | xBC | dt columns, xbc [n, conv_dim] = x | B | C, dt [n, heads],
// y and its gradient [n, inner], n = batch x seq rows.
//
// The scan runs the SSD recurrence of Dao & Gu 2024 ("Transformers are
// SSMs", section 3) token by token, per (batch row, head), the state
// h [state, head_dim] held by one thread block:
//   h_t = exp(dt_t A) h_{t-1} + B_t (dt_t x_t)^T,   y_t = h_t^T C_t + D x_t,
// h_{t-1} read as zero at a document's first token (packed documents:
// mamba_ssm's seq_idx). It is the chunked form of the cpu backend with the
// chunk's pairwise sums done in order, so the two differ by fp32 rounding
// only. Its gradient runs two sweeps and stores no state:
// - forward again, dC_t = h_t dy_t and dS1_t = C_t . dC_t (= dy_t . (y_t -
//   D x_t), the part of dL/dS_t, S the cumulative sum of dt A, from the
//   state's decays up to t);
// - backward, with R_t = dL/dh_t = exp(dt_{t+1} A) R_{t+1} + C_t dy_t^T (R
//   restarts at a document's last token): (R_t^T B_t) gives dx_t (times
//   dt_t, plus D dy_t) and dL/d dt_t through u_t = dt_t x_t; dB_t = R_t u_t;
//   dS_t = dS1_t - u_t . (R_t^T B_t), and dL/da_t = sum over i >= t of dS_i
//   (a_t = dt_t A enters every S_i, i >= t), which gives dt's rest and dA.
#ifndef SHARDRT_CUDA_KERNELS_MAMBA2_MATH_H
#define SHARDRT_CUDA_KERNELS_MAMBA2_MATH_H

#include <math.h>
#include <stdbool.h>
#include <stdint.h>

#ifdef __CUDACC__
#define M2_FN __host__ __device__ static inline
#else
#define M2_FN static inline
#endif
// A block-wide barrier in device code; the host runs one "thread" (tid 0
// of 1) that does every element of each phase before the next.
#ifdef __CUDA_ARCH__
#define M2_SYNC() __syncthreads()
#else
#define M2_SYNC() ((void)0)
#endif

/// The mixer's sizes (srt_mamba2_config's, and what follows from them).
typedef struct m2_dims {
  int64_t batch, seq, heads, head_dim, groups, state, conv_kernel;
  int64_t inner;    // heads x head_dim
  int64_t conv_dim; // inner + 2 groups x state: the conv's channels x | B | C
  int64_t proj;     // inner + conv_dim + heads: in_proj's rows z | xBC | dt
  float eps, dt_min, dt_max;
} m2_dims;

M2_FN m2_dims m2_dims_make(int64_t batch, int64_t seq, int64_t heads, int64_t head_dim,
                           int64_t groups, int64_t state, int64_t conv_kernel, float eps,
                           float dt_min, float dt_max) {
  m2_dims d = {batch, seq, heads, head_dim, groups, state, conv_kernel, heads * head_dim, 0, 0,
               eps, dt_min, dt_max};
  d.conv_dim = d.inner + 2 * groups * state;
  d.proj = d.inner + d.conv_dim + heads;
  return d;
}

M2_FN float m2_sigmoid(float x) { return 1.0f / (1.0f + expf(-x)); }
M2_FN float m2_silu(float x) { return x * m2_sigmoid(x); }
M2_FN float m2_silu_grad(float x) {
  float s = m2_sigmoid(x);
  return s * (1.0f + x * (1.0f - s));
}
// torch.nn.functional.softplus (beta 1, threshold 20).
M2_FN float m2_softplus(float x) { return x > 20.0f ? x : log1pf(expf(x)); }

//===----------------------------------------------------------------------===//
// Documents, conv1d + SiLU, dt (one element per call)
//===----------------------------------------------------------------------===//

/// Whether token t of a row (`seg` its segment ids, NULL: one document)
/// starts a document other than the row's first.
M2_FN bool m2_starts(const int64_t *seg, int64_t t) {
  return seg && t > 0 && seg[t] != seg[t - 1];
}

/// Row r's batch row of `seg` ([batch, seq] or NULL).
M2_FN const int64_t *m2_seg_row(const int64_t *seg, const m2_dims *d, int64_t r) {
  return seg ? seg + (r / d->seq) * d->seq : 0;
}

/// The earliest token the conv at token t reads: t - (K - 1), 0 or its
/// document's start, whichever is latest.
M2_FN int64_t m2_conv_lo(const int64_t *seg, int64_t t, int64_t K) {
  int64_t lo = t;
  while (lo > 0 && t - lo < K - 1 && !m2_starts(seg, lo))
    --lo;
  return lo;
}

/// The latest conv output that token t feeds: t + K - 1, seq - 1 or its
/// document's end, whichever is earliest.
M2_FN int64_t m2_conv_hi(const int64_t *seg, int64_t t, int64_t K, int64_t seq) {
  int64_t hi = t;
  while (hi + 1 < seq && hi - t < K - 1 && !m2_starts(seg, hi + 1))
    ++hi;
  return hi;
}

/// The conv's pre-activation at row r, channel ch: bias + sum_k w[ch, k]
/// xBC[t + k - (K - 1), ch] over the tokens of t's document (torch's conv1d
/// with padding K - 1, its first seq outputs).
M2_FN float m2_conv_pre(const float *proj, const int64_t *seg, const float *conv_w,
                        const float *conv_b, const m2_dims *d, int64_t r, int64_t ch) {
  int64_t t = r % d->seq, K = d->conv_kernel;
  int64_t lo = m2_conv_lo(m2_seg_row(seg, d, r), t, K);
  float pre = conv_b[ch];
  for (int64_t k = 0; k < K; ++k) {
    int64_t src = t + k - (K - 1);
    if (src >= lo)
      pre += conv_w[ch * K + k] * proj[(r - t + src) * d->proj + d->inner + ch];
  }
  return pre;
}

/// xbc element i ([n, conv_dim]) = SiLU(the conv's pre-activation).
M2_FN void m2_conv_forward_at(float *xbc, const float *proj, const int64_t *seg,
                              const float *conv_w, const float *conv_b, const m2_dims *d,
                              int64_t i) {
  xbc[i] = m2_silu(m2_conv_pre(proj, seg, conv_w, conv_b, d, i / d->conv_dim, i % d->conv_dim));
}

/// dt element i ([n, heads]) = clamp(softplus(raw + dt_bias), dt_min, dt_max).
M2_FN void m2_dt_forward_at(float *dt, const float *proj, const float *dt_bias,
                            const m2_dims *d, int64_t i) {
  int64_t r = i / d->heads, h = i % d->heads;
  float x = proj[r * d->proj + d->inner + d->conv_dim + h] + dt_bias[h];
  dt[i] = fminf(fmaxf(m2_softplus(x), d->dt_min), d->dt_max);
}

/// dproj's dt column of element i ([n, heads]) from ddt (dL/d dt after the
/// clamp; torch.clamp passes the gradient inside the bounds only).
M2_FN void m2_dt_backward_at(float *dproj, const float *ddt, const float *proj,
                             const float *dt_bias, const m2_dims *d, int64_t i) {
  int64_t r = i / d->heads, h = i % d->heads, col = d->inner + d->conv_dim + h;
  float x = proj[r * d->proj + col] + dt_bias[h], sp = m2_softplus(x);
  bool passes = sp >= d->dt_min && sp <= d->dt_max;
  dproj[r * d->proj + col] = passes ? ddt[i] * (x > 20.0f ? 1.0f : m2_sigmoid(x)) : 0.0f;
}

/// dxbc element i becomes the pre-activation's gradient (times SiLU').
M2_FN void m2_conv_dpre_at(float *dxbc, const float *proj, const int64_t *seg,
                           const float *conv_w, const float *conv_b, const m2_dims *d,
                           int64_t i) {
  dxbc[i] *= m2_silu_grad(
      m2_conv_pre(proj, seg, conv_w, conv_b, d, i / d->conv_dim, i % d->conv_dim));
}

/// dproj's xBC column of element i ([n, conv_dim]): the outputs t .. t + K
/// - 1 of t's document that token t feeds, from dpre (m2_conv_dpre_at's).
M2_FN void m2_conv_dinput_at(float *dproj, const float *dpre, const int64_t *seg,
                             const float *conv_w, const m2_dims *d, int64_t i) {
  int64_t r = i / d->conv_dim, ch = i % d->conv_dim, t = r % d->seq, K = d->conv_kernel;
  int64_t hi = m2_conv_hi(m2_seg_row(seg, d, r), t, K, d->seq);
  float sum = 0.0f;
  for (int64_t k = 0; k < K; ++k) {
    int64_t out = t - k + (K - 1);
    if (out <= hi)
      sum += dpre[(r - t + out) * d->conv_dim + ch] * conv_w[ch * K + k];
  }
  dproj[r * d->proj + d->inner + ch] = sum;
}

/// The conv weight's gradient, element i = (ch, k) of [conv_dim, K]: the
/// sum over rows in order, in double, WRITTEN.
M2_FN void m2_conv_dweight_at(float *dw, const float *dpre, const float *proj,
                              const int64_t *seg, const m2_dims *d, int64_t i) {
  int64_t K = d->conv_kernel, ch = i / K, k = i % K, n = d->batch * d->seq;
  double sum = 0;
  for (int64_t r = 0; r < n; ++r) {
    int64_t t = r % d->seq, src = t + k - (K - 1);
    if (src >= m2_conv_lo(m2_seg_row(seg, d, r), t, K))
      sum += (double)dpre[r * d->conv_dim + ch] * proj[(r - t + src) * d->proj + d->inner + ch];
  }
  dw[i] = (float)sum;
}

/// out[col] = sum over `rows` rows of a[row * ld + col], in order, in
/// double (the conv bias's and dt_bias's gradients), WRITTEN.
M2_FN void m2_column_sum_at(float *out, const float *a, int64_t ld, int64_t rows, int64_t col) {
  double sum = 0;
  for (int64_t r = 0; r < rows; ++r)
    sum += a[r * ld + col];
  out[col] = (float)sum;
}

//===----------------------------------------------------------------------===//
// The gated RMSNorm: y * silu(z), normalised per group, times the weight
//===----------------------------------------------------------------------===//

/// 1 / rms of group q of row r of y * silu(z) (sum of squares in double).
M2_FN float m2_norm_rstd(const float *y, const float *proj, const m2_dims *d, int64_t r,
                         int64_t q) {
  int64_t gs = d->inner / d->groups;
  double ss = 0;
  for (int64_t k = q * gs; k < (q + 1) * gs; ++k) {
    float h = y[r * d->inner + k] * m2_silu(proj[r * d->proj + k]);
    ss += (double)h * h;
  }
  return 1.0f / sqrtf((float)(ss / (double)gs) + d->eps);
}

/// The norm's output at row r, feature k, given its group's rstd.
M2_FN float m2_norm_out(const float *y, const float *proj, const float *norm_w, float rstd,
                        const m2_dims *d, int64_t r, int64_t k) {
  float h = y[r * d->inner + k] * m2_silu(proj[r * d->proj + k]);
  return norm_w[k] * (h * rstd);
}

/// Element i = (r, q) of [n, groups]: dy (the scan output's gradient) and
/// dproj's z columns of that group from dnormed, WRITTEN.
M2_FN void m2_norm_backward_at(float *dy, float *dproj, const float *dnormed,
                               const float *rstd, const float *y, const float *proj,
                               const float *norm_w, const m2_dims *d, int64_t i) {
  int64_t gs = d->inner / d->groups, r = i / d->groups, q = i % d->groups;
  float rs = rstd[i], s = 0;
  for (int64_t k = q * gs; k < (q + 1) * gs; ++k)
    s += norm_w[k] * dnormed[r * d->inner + k] * y[r * d->inner + k] *
         m2_silu(proj[r * d->proj + k]);
  float k3 = rs * rs * rs * s / (float)gs;
  for (int64_t k = q * gs; k < (q + 1) * gs; ++k) {
    float z = proj[r * d->proj + k], yk = y[r * d->inner + k], act = m2_silu(z);
    float dh = rs * norm_w[k] * dnormed[r * d->inner + k] - yk * act * k3;
    dy[r * d->inner + k] = dh * act;
    dproj[r * d->proj + k] = dh * yk * m2_silu_grad(z);
  }
}

/// The norm weight's gradient at feature k: sum over rows (double), WRITTEN.
M2_FN void m2_norm_dweight_at(float *dw, const float *dnormed, const float *rstd,
                              const float *y, const float *proj, const m2_dims *d, int64_t k) {
  int64_t gs = d->inner / d->groups, n = d->batch * d->seq;
  double sum = 0;
  for (int64_t r = 0; r < n; ++r) {
    float h = y[r * d->inner + k] * m2_silu(proj[r * d->proj + k]);
    sum += (double)dnormed[r * d->inner + k] * (h * rstd[r * d->groups + k / gs]);
  }
  dw[k] = (float)sum;
}

//===----------------------------------------------------------------------===//
// The scan: one (batch row, head) per block, threads tid of nt
//===----------------------------------------------------------------------===//

/// Floats of the block's shared memory: the state [state][head_dim + 1]
/// (a padded row: threads that walk a column hit distinct banks), then x,
/// dy, (R^T B) [head_dim] and B, C, dC [state].
M2_FN int64_t m2_scan_smem_floats(const m2_dims *d) {
  return d->state * (d->head_dim + 1) + 3 * d->head_dim + 3 * d->state;
}

/// The block's view of its shared memory and of its head.
typedef struct m2_block {
  float *st, *x, *dy, *rb, *B, *C, *dc;
  int64_t ld, b, h, g;
  const int64_t *seg; // this batch row's ids, or NULL
  float A, D;
} m2_block;

M2_FN m2_block m2_block_of(float *sm, const int64_t *seg, const float *A_log, const float *D,
                           const m2_dims *d, int64_t b, int64_t h) {
  m2_block k;
  int64_t P = d->head_dim, N = d->state;
  k.ld = P + 1;
  k.st = sm;
  k.x = sm + N * k.ld;
  k.dy = k.x + P;
  k.rb = k.dy + P;
  k.B = k.rb + P;
  k.C = k.B + N;
  k.dc = k.C + N;
  k.b = b;
  k.h = h;
  k.g = h / (d->heads / d->groups);
  k.seg = seg ? seg + b * d->seq : 0;
  k.A = -expf(A_log[h]);
  k.D = D[h];
  return k;
}

/// Stages token t's x, B, C (and dy when `dy` is not NULL) of the head.
M2_FN void m2_stage(const m2_block *k, const float *xbc, const float *dy, const m2_dims *d,
                    int64_t t, int tid, int nt) {
  int64_t P = d->head_dim, N = d->state, r = k->b * d->seq + t;
  const float *row = xbc + r * d->conv_dim;
  for (int64_t e = tid; e < 2 * P + 2 * N; e += nt) {
    if (e < P)
      k->x[e] = row[k->h * P + e];
    else if (e < P + N)
      k->B[e - P] = row[d->inner + k->g * N + (e - P)];
    else if (e < P + 2 * N)
      k->C[e - P - N] = row[d->inner + (d->groups + k->g) * N + (e - P - N)];
    else if (dy)
      k->dy[e - P - 2 * N] = dy[r * d->inner + k->h * P + (e - P - 2 * N)];
  }
}

/// The state's step at token t: st = keep st + B (dt x)^T, or the input
/// alone at a document's first token.
M2_FN void m2_state_step(const m2_block *k, const m2_dims *d, float dtt, int64_t t, int tid,
                         int nt) {
  int64_t P = d->head_dim;
  bool reset = m2_starts(k->seg, t);
  float keep = expf(dtt * k->A);
  for (int64_t e = tid; e < P * d->state; e += nt) {
    int64_t n = e / P, p = e % P;
    float in = dtt * k->x[p] * k->B[n], *s = k->st + n * k->ld + p;
    *s = reset ? in : keep * *s + in;
  }
}

/// y [n, inner] of head h of batch row b (WRITTEN: its head_dim columns).
M2_FN void m2_scan_forward(float *y, const float *xbc, const float *dt, const int64_t *seg,
                           const float *A_log, const float *D, const m2_dims *d, int64_t b,
                           int64_t h, float *sm, int tid, int nt) {
  m2_block k = m2_block_of(sm, seg, A_log, D, d, b, h);
  int64_t P = d->head_dim, N = d->state;
  for (int64_t e = tid; e < N * k.ld; e += nt)
    k.st[e] = 0.0f;
  for (int64_t t = 0; t < d->seq; ++t) {
    int64_t r = b * d->seq + t;
    m2_stage(&k, xbc, 0, d, t, tid, nt);
    M2_SYNC();
    m2_state_step(&k, d, dt[r * d->heads + h], t, tid, nt);
    M2_SYNC();
    for (int64_t p = tid; p < P; p += nt) {
      float acc = 0.0f;
      for (int64_t n = 0; n < N; ++n)
        acc += k.C[n] * k.st[n * k.ld + p];
      y[r * d->inner + h * P + p] = acc + k.D * k.x[p];
    }
    M2_SYNC();
  }
}

/// The gradient's forward sweep for head h of batch row b: the head's dC
/// into part [seq, heads, 2 state] (its second half; m2_group_sum_at sums
/// the group's heads) and dS1 into ds [seq, heads].
M2_FN void m2_scan_backward_states(float *part, float *ds, const float *dy, const float *xbc,
                                   const float *dt, const int64_t *seg, const float *A_log,
                                   const float *D, const m2_dims *d, int64_t b, int64_t h,
                                   float *sm, int tid, int nt) {
  m2_block k = m2_block_of(sm, seg, A_log, D, d, b, h);
  int64_t P = d->head_dim, N = d->state;
  for (int64_t e = tid; e < N * k.ld; e += nt)
    k.st[e] = 0.0f;
  for (int64_t t = 0; t < d->seq; ++t) {
    m2_stage(&k, xbc, dy, d, t, tid, nt);
    M2_SYNC();
    m2_state_step(&k, d, dt[(b * d->seq + t) * d->heads + h], t, tid, nt);
    M2_SYNC();
    for (int64_t n = tid; n < N; n += nt) {
      float acc = 0.0f;
      for (int64_t p = 0; p < P; ++p)
        acc += k.dy[p] * k.st[n * k.ld + p];
      k.dc[n] = acc;
      part[(t * d->heads + h) * 2 * N + N + n] = acc;
    }
    M2_SYNC();
    if (tid == 0) {
      float s = 0.0f;
      for (int64_t n = 0; n < N; ++n)
        s += k.C[n] * k.dc[n];
      ds[t * d->heads + h] = s;
    }
    M2_SYNC();
  }
}

/// R's step at token t: R = keep R + C dy^T, R alone when token t + 1
/// starts a document or t is the last.
M2_FN void m2_adjoint_step(const m2_block *k, const m2_dims *d, float keep, bool cont, int tid,
                           int nt) {
  int64_t P = d->head_dim;
  for (int64_t e = tid; e < P * d->state; e += nt) {
    int64_t n = e / P, p = e % P;
    float in = k->dy[p] * k->C[n], *s = k->st + n * k->ld + p;
    *s = cont ? keep * *s + in : in;
  }
}

/// (R^T B) into rb and dx (the head's x columns of dxbc, WRITTEN); the
/// head's dB into part's first half.
M2_FN void m2_adjoint_outputs(const m2_block *k, float *dxbc, float *part, const m2_dims *d,
                              float dtt, int64_t t, int tid, int nt) {
  int64_t P = d->head_dim, N = d->state, r = k->b * d->seq + t;
  for (int64_t e = tid; e < P + N; e += nt) {
    float acc = 0.0f;
    if (e < P) {
      for (int64_t n = 0; n < N; ++n)
        acc += k->st[n * k->ld + e] * k->B[n];
      k->rb[e] = acc;
      dxbc[r * d->conv_dim + k->h * P + e] = dtt * acc + k->D * k->dy[e];
    } else {
      for (int64_t p = 0; p < P; ++p)
        acc += k->st[(e - P) * k->ld + p] * k->x[p];
      part[(t * d->heads + k->h) * 2 * N + (e - P)] = dtt * acc;
    }
  }
}

/// The gradient's backward sweep for head h of batch row b: dx (dxbc's x
/// columns), dB (part's first half), ddt [n, heads] (WRITTEN) and the
/// head's dL/dA and dL/dD of this row into dA_part, dD_part [batch, heads].
/// ds: m2_scan_backward_states' dS1.
M2_FN void m2_scan_backward_adjoint(float *dxbc, float *part, float *ddt, float *dA_part,
                                    float *dD_part, const float *ds, const float *dy,
                                    const float *xbc, const float *dt, const int64_t *seg,
                                    const float *A_log, const float *D, const m2_dims *d,
                                    int64_t b, int64_t h, float *sm, int tid, int nt) {
  m2_block k = m2_block_of(sm, seg, A_log, D, d, b, h);
  int64_t P = d->head_dim;
  double run = 0, da = 0, dd = 0; // tid 0's
  float dt_next = 0.0f;
  for (int64_t t = d->seq - 1; t >= 0; --t) {
    int64_t r = b * d->seq + t;
    float dtt = dt[r * d->heads + h];
    bool cont = t + 1 < d->seq && !m2_starts(k.seg, t + 1);
    m2_stage(&k, xbc, dy, d, t, tid, nt);
    M2_SYNC();
    m2_adjoint_step(&k, d, expf(dt_next * k.A), cont, tid, nt);
    M2_SYNC();
    m2_adjoint_outputs(&k, dxbc, part, d, dtt, t, tid, nt);
    M2_SYNC();
    if (tid == 0) {
      float xr = 0.0f, dyx = 0.0f;
      for (int64_t p = 0; p < P; ++p) {
        xr += k.x[p] * k.rb[p];
        dyx += k.dy[p] * k.x[p];
      }
      run += ds[t * d->heads + h] - dtt * xr;
      ddt[r * d->heads + h] = xr + k.A * (float)run;
      da += (double)dtt * run;
      dd += dyx;
    }
    M2_SYNC();
    dt_next = dtt;
  }
  if (tid == 0) {
    dA_part[b * d->heads + h] = (float)da;
    dD_part[b * d->heads + h] = (float)dd;
  }
}

/// Element i = (t, g, half, n) of [seq, groups, 2, state]: the B (half 0)
/// or C (half 1) gradient of group g at token t of batch row b, the sum of
/// its heads' parts in head order, into dxbc (WRITTEN).
M2_FN void m2_group_sum_at(float *dxbc, const float *part, const m2_dims *d, int64_t b,
                           int64_t i) {
  int64_t N = d->state, n = i % N, half = (i / N) % 2, g = (i / (2 * N)) % d->groups;
  int64_t t = i / (2 * N * d->groups), per = d->heads / d->groups;
  float sum = 0.0f;
  for (int64_t h = g * per; h < (g + 1) * per; ++h)
    sum += part[(t * d->heads + h) * 2 * N + half * N + n];
  dxbc[(b * d->seq + t) * d->conv_dim + d->inner + (half * d->groups + g) * N + n] = sum;
}

/// Head h's A_log and D gradients: the rows' parts summed in batch order
/// (double), dA/dA_log = A; WRITTEN.
M2_FN void m2_head_grads_at(float *dA_log, float *dD, const float *dA_part,
                            const float *dD_part, const float *A_log, const m2_dims *d,
                            int64_t h) {
  double da = 0, dd = 0;
  for (int64_t b = 0; b < d->batch; ++b) {
    da += dA_part[b * d->heads + h];
    dd += dD_part[b * d->heads + h];
  }
  dA_log[h] = (float)(da * -exp((double)A_log[h]));
  dD[h] = (float)dd;
}

#endif // SHARDRT_CUDA_KERNELS_MAMBA2_MATH_H
