// The Mamba2 mixer on the CPU (fp32): in_proj, the causal depthwise conv1d
// with SiLU, dt's softplus and clamp, the SSD chunked scan (Dao & Gu 2024,
// "Transformers are SSMs", section 6: per chunk a quadratic, attention-like
// form; between chunks the state h [head_dim, state] passed on, decayed),
// the gated group RMSNorm and out_proj; and the gradients of all of it.
//
// Per head, with a_t = dt_t A (A = -exp(A_log)) and, inside a chunk,
// S_i = a_0 + ... + a_i (so exp(S_i - S_j) <= 1 for j <= i: nothing
// overflows), u_j = dt_j x_j and H the state entering the chunk:
//   y_i = sum_{j<=i} exp(S_i - S_j) (C_i . B_j) u_j + exp(S_i) H C_i + D x_i
//   H' = exp(S_last) H + sum_j exp(S_last - S_j) u_j B_j^T
// The backward runs the chunks in reverse with R = dL/dH' (zero after the
// last chunk), R_prev = exp(S_last) R + sum_i exp(S_i) dy_i C_i^T, and
// collects dL/dS_i from every exp(.) it differentiates; dL/da_t is the sum
// of dL/dS_i over i >= t in the chunk.
//
// Packed documents (segment_ids; mamba_ssm's seq_idx): a token whose id
// differs from its predecessor's starts a document. The conv reads no input
// before the start of its token's document; in the scan the pairs (i, j) of
// different documents drop out of the quadratic form (E_ij = 0), the
// entering state H reaches only the tokens before the chunk's first start,
// and the leaving state H' keeps H only when the chunk has no start and
// sums only the chunk's last document. S stays the plain cumulative sum, so
// dL/da_t keeps its form; every masked term is a constant zero.
#include "shardrt/kernels.h"

#include <math.h>
#include <omp.h>
#include <string.h>

typedef struct sizes {
  int64_t n, inner, conv_dim, proj, chunks, per_group, thread_floats;
} sizes;

// The chunk length the scan uses: chunk, or the whole sequence when it is
// shorter (one chunk either way; tiles are sized by it, not by a chunk
// longer than anything they hold).
static int64_t tile(const srt_mamba2_config *c) { return c->chunk < c->seq ? c->chunk : c->seq; }

// One thread's scratch (srt_mamba2_workspace_parts' last part, per thread):
// the backward's (larger than the forward's), the state gradient R [P, N]
// last.
static int64_t thread_floats(const srt_mamba2_config *c) {
  int64_t L = tile(c), P = c->head_dim, N = c->state;
  return 2 * L + 3 * L * L + 4 * L * P + 3 * L * N + P * N;
}

static srt_status check(const srt_mamba2_config *c, sizes *z) {
  const int64_t v[] = {c->batch, c->seq,         c->hidden, c->heads, c->head_dim,
                       c->groups, c->state, c->conv_kernel, c->chunk};
  for (size_t i = 0; i < sizeof v / sizeof v[0]; ++i)
    if (v[i] <= 0 || v[i] > ((int64_t)1 << 24))
      return SRT_ERROR(SRT_INVALID_ARGUMENT,
                       "srt_cpu_mamba2: sizes batch %lld seq %lld hidden %lld heads %lld "
                       "head_dim %lld groups %lld state %lld conv_kernel %lld chunk %lld must "
                       "lie in [1, 2^24]",
                       (long long)c->batch, (long long)c->seq, (long long)c->hidden,
                       (long long)c->heads, (long long)c->head_dim, (long long)c->groups,
                       (long long)c->state, (long long)c->conv_kernel, (long long)c->chunk);
  if (c->heads % c->groups != 0)
    return SRT_ERROR(SRT_INVALID_ARGUMENT,
                     "srt_cpu_mamba2: heads %lld is not a multiple of groups %lld",
                     (long long)c->heads, (long long)c->groups);
  if (!(c->eps > 0) || !(c->dt_min <= c->dt_max))
    return SRT_ERROR(SRT_INVALID_ARGUMENT,
                     "srt_cpu_mamba2: eps %g must be > 0 and dt_min %g <= dt_max %g",
                     (double)c->eps, (double)c->dt_min, (double)c->dt_max);
  z->n = c->batch * c->seq;
  z->inner = c->heads * c->head_dim;
  z->conv_dim = z->inner + 2 * c->groups * c->state;
  z->proj = z->inner + z->conv_dim + c->heads;
  z->chunks = (c->seq + tile(c) - 1) / tile(c);
  z->per_group = c->heads / c->groups;
  z->thread_floats = thread_floats(c);
  return NULL;
}

// The workspace's parts, in order; `states` and after only for backward.
// `seg` (the caller's segment_ids or NULL) rides along, no part of it.
typedef struct parts {
  float *proj, *xbc, *dt, *y, *normed;
  float *states, *dproj, *dxbc, *ddt, *dy, *dnormed, *rstd, *dA, *dD, *threads;
  const int64_t *seg;
} parts;

// Floats of each part (srt_mamba2_workspace_parts: a NULL `ws` only
// counts); -1 on overflow.
static int64_t layout(const srt_mamba2_config *c, const sizes *z, bool backward, float *ws,
                      parts *p) {
  double count[SRT_MAMBA2_WORKSPACE_PARTS];
  double total = srt_mamba2_workspace_parts(c, backward, srt_cpu_threads(), count);
  float **slot[SRT_MAMBA2_WORKSPACE_PARTS] = {
      &p->proj, &p->xbc,  &p->dt,      &p->y,    &p->normed, &p->states, &p->dproj, &p->dxbc,
      &p->ddt,  &p->dy,   &p->dnormed, &p->rstd, &p->dA,     &p->dD,     &p->threads};
  double at = 0;
  for (int i = 0; ws && i < SRT_MAMBA2_WORKSPACE_PARTS; ++i) {
    *slot[i] = count[i] > 0 ? ws + (int64_t)at : NULL;
    at += count[i];
  }
  return total >= 0 && total < 9.0e18 / sizeof(float) ? (int64_t)total : -1;
}

int64_t srt_cpu_mamba2_workspace_floats(const srt_mamba2_config *c, bool backward) {
  sizes z;
  srt_status s = check(c, &z);
  if (s) {
    srt_status_free(s);
    return -1;
  }
  parts p;
  return layout(c, &z, backward, NULL, &p);
}

static inline float sigmoid(float x) { return 1.0f / (1.0f + expf(-x)); }
static inline float silu(float x) { return x * sigmoid(x); }
static inline float silu_grad(float x) {
  float s = sigmoid(x);
  return s * (1.0f + x * (1.0f - s));
}

// torch.nn.functional.softplus (beta 1, threshold 20).
static inline float softplus(float x) { return x > 20.0f ? x : log1pf(expf(x)); }

static inline float dot(const float *a, const float *b, int64_t n) {
  float s = 0;
  for (int64_t i = 0; i < n; ++i)
    s += a[i] * b[i];
  return s;
}

//===----------------------------------------------------------------------===//
// Document starts
//===----------------------------------------------------------------------===//

// Whether token t of a row (`seg` that row's ids, NULL for one document)
// starts a document other than the row's first.
static inline bool starts(const int64_t *seg, int64_t t) {
  return seg && t > 0 && seg[t] != seg[t - 1];
}

// The earliest token the conv at token t reads: t - (K - 1), 0 or its
// document's start, whichever is latest.
static int64_t conv_lo(const int64_t *seg, int64_t t, int64_t K) {
  if (!seg) // the weight gradient asks per channel and token: no walk
    return t - (K - 1) > 0 ? t - (K - 1) : 0;
  int64_t lo = t;
  while (lo > 0 && t - lo < K - 1 && !starts(seg, lo))
    --lo;
  return lo;
}

// The latest conv output token t feeds: t + K - 1, seq - 1 or the end of
// its document, whichever is earliest.
static int64_t conv_hi(const int64_t *seg, int64_t t, int64_t K, int64_t seq) {
  if (!seg)
    return t + K - 1 < seq ? t + K - 1 : seq - 1;
  int64_t hi = t;
  while (hi + 1 < seq && hi - t < K - 1 && !starts(seg, hi + 1))
    ++hi;
  return hi;
}

// The row of `segment_ids` of row r of the activations, or NULL.
static inline const int64_t *seg_row(const int64_t *segment_ids, const srt_mamba2_config *c,
                                     int64_t r) {
  return segment_ids ? segment_ids + (r / c->seq) * c->seq : NULL;
}

//===----------------------------------------------------------------------===//
// conv1d + SiLU, dt
//===----------------------------------------------------------------------===//

// The conv's pre-activation at row r (token t of its batch) for every
// channel: bias + sum_k w[c, k] raw[t + k - (K - 1), c] (torch's conv1d with
// padding K - 1, the first `seq` outputs), the inputs before t's document
// read as zeros (causal_conv1d with seq_idx).
static void conv_row(float *pre, const float *proj, const int64_t *seg,
                     const srt_mamba2_weights *w, const srt_mamba2_config *c, const sizes *z,
                     int64_t r) {
  int64_t t = r % c->seq, K = c->conv_kernel, C = z->conv_dim;
  int64_t lo = conv_lo(seg_row(seg, c, r), t, K);
  memcpy(pre, w->conv_b, (size_t)C * sizeof(float));
  for (int64_t k = 0; k < K; ++k) {
    int64_t src = t + k - (K - 1);
    if (src < lo)
      continue;
    const float *raw = proj + (r - t + src) * z->proj + z->inner;
    for (int64_t ch = 0; ch < C; ++ch)
      pre[ch] += w->conv_w[ch * K + k] * raw[ch];
  }
}

static void conv_forward(float *xbc, const float *proj, const int64_t *seg,
                         const srt_mamba2_weights *w, const srt_mamba2_config *c,
                         const sizes *z) {
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < z->n; ++r) {
    float *row = xbc + r * z->conv_dim;
    conv_row(row, proj, seg, w, c, z, r);
    for (int64_t ch = 0; ch < z->conv_dim; ++ch)
      row[ch] = silu(row[ch]);
  }
}

// dxbc (the gradient of the conv's output) becomes the pre-activation's in
// place; then the raw input's gradient goes to dproj's xBC columns and the
// weight's and bias's are accumulated (in double, tokens in order).
static void conv_backward(float *dproj, const srt_mamba2_grads *g, float *dxbc, float *pre,
                          const float *proj, const int64_t *seg, const srt_mamba2_weights *w,
                          const srt_mamba2_config *c, const sizes *z) {
  int64_t K = c->conv_kernel, C = z->conv_dim, S = c->seq;
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < z->n; ++r) {
    float *d = dxbc + r * C, *tmp = pre + r * C;
    conv_row(tmp, proj, seg, w, c, z, r);
    for (int64_t ch = 0; ch < C; ++ch)
      d[ch] *= silu_grad(tmp[ch]);
  }
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < z->n; ++r) { // raw[t] feeds outputs t .. t + K - 1
    int64_t t = r % S, hi = conv_hi(seg_row(seg, c, r), t, K, S);
    float *draw = dproj + r * z->proj + z->inner;
    memset(draw, 0, (size_t)C * sizeof(float));
    for (int64_t k = 0; k < K; ++k) {
      int64_t out = t - k + (K - 1);
      if (out > hi)
        continue;
      const float *d = dxbc + (r - t + out) * C;
      for (int64_t ch = 0; ch < C; ++ch)
        draw[ch] += d[ch] * w->conv_w[ch * K + k];
    }
  }
#pragma omp parallel for schedule(static)
  for (int64_t ch = 0; ch < C; ++ch) {
    double db = 0, dw[64] = {0};
    for (int64_t k0 = 0; k0 < K; k0 += 64) {
      int64_t kn = K - k0 < 64 ? K - k0 : 64;
      memset(dw, 0, sizeof dw);
      for (int64_t r = 0; r < z->n; ++r) {
        int64_t t = r % S, lo = conv_lo(seg_row(seg, c, r), t, K);
        float d = dxbc[r * C + ch];
        if (k0 == 0)
          db += d;
        for (int64_t k = k0; k < k0 + kn; ++k) {
          int64_t src = t + k - (K - 1);
          if (src >= lo)
            dw[k - k0] += (double)d * proj[(r - t + src) * z->proj + z->inner + ch];
        }
      }
      for (int64_t k = 0; k < kn; ++k)
        g->conv_w[ch * K + k0 + k] += (float)dw[k];
    }
    g->conv_b[ch] += (float)db;
  }
}

static void dt_forward(float *dt, const float *proj, const srt_mamba2_weights *w,
                       const srt_mamba2_config *c, const sizes *z) {
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < z->n; ++r) {
    const float *raw = proj + r * z->proj + z->inner + z->conv_dim;
    for (int64_t h = 0; h < c->heads; ++h)
      dt[r * c->heads + h] = fminf(fmaxf(softplus(raw[h] + w->dt_bias[h]), c->dt_min), c->dt_max);
  }
}

// ddt (dL/d dt after the clamp) -> dproj's dt columns and dt_bias.
static void dt_backward(float *dproj, const srt_mamba2_grads *g, const float *ddt,
                        const float *proj, const srt_mamba2_weights *w,
                        const srt_mamba2_config *c, const sizes *z) {
#pragma omp parallel for schedule(static)
  for (int64_t h = 0; h < c->heads; ++h) {
    double sum = 0;
    for (int64_t r = 0; r < z->n; ++r) {
      float x = proj[r * z->proj + z->inner + z->conv_dim + h] + w->dt_bias[h];
      float sp = softplus(x);
      bool passes = sp >= c->dt_min && sp <= c->dt_max; // torch.clamp's gradient
      float d = passes ? ddt[r * c->heads + h] * (x > 20.0f ? 1.0f : sigmoid(x)) : 0.0f;
      dproj[r * z->proj + z->inner + z->conv_dim + h] = d;
      sum += d;
    }
    g->dt_bias[h] += (float)sum;
  }
}

//===----------------------------------------------------------------------===//
// The SSD scan
//===----------------------------------------------------------------------===//

// One head's view of the activations.
typedef struct head {
  const srt_mamba2_config *c;
  const sizes *z;
  const float *xbc, *dt;
  const int64_t *seg; // this batch row's segment ids, NULL for one document
  int64_t b, h, g;    // batch, head, its group
  float A, D;
} head;

// Where the documents of the chunk at c0 (len steps) lie, as chunk steps:
// `first` the first step that starts a document (len: none; the steps
// before it continue the previous chunk and see its state), `last` the
// start of the document the chunk ends in (0 when that began earlier).
typedef struct docs {
  int64_t first, last;
} docs;

static docs docs_of(const head *e, int64_t c0, int64_t len) {
  docs d = {len, 0};
  for (int64_t i = 0; i < len && e->seg; ++i)
    if (starts(e->seg, c0 + i)) {
      d.first = d.first < i ? d.first : i;
      d.last = i;
    }
  return d;
}

static inline const float *hx(const head *e, int64_t t) {
  return e->xbc + (e->b * e->c->seq + t) * e->z->conv_dim + e->h * e->c->head_dim;
}
static inline const float *hB(const head *e, int64_t t) {
  return e->xbc + (e->b * e->c->seq + t) * e->z->conv_dim + e->z->inner + e->g * e->c->state;
}
static inline const float *hC(const head *e, int64_t t) {
  return hB(e, t) + e->c->groups * e->c->state;
}
static inline float hdt(const head *e, int64_t t) {
  return e->dt[(e->b * e->c->seq + t) * e->c->heads + e->h];
}

// The GEMMs of one chunk run on the calling thread (srt_cpu_gemm inside a
// parallel region); operands are strided views of the activations: x, B and
// C rows of a head are conv_dim apart, y and dy rows inner apart.
static void gemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha,
                 const float *a, int64_t lda, const float *b, int64_t ldb, float beta, float *c,
                 int64_t ldc) {
  // The sizes are valid by construction (check() bounded them): no error.
  srt_status_free(srt_cpu_gemm(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc));
}

// S_i of the chunk at c0 (len steps), and cb = C B^T [len, len] (row
// stride chunk).
static void chunk_setup(const head *e, int64_t c0, int64_t len, float *S, float *cb) {
  int64_t L = tile(e->c), N = e->c->state, ld = e->z->conv_dim;
  float acc = 0;
  for (int64_t i = 0; i < len; ++i) {
    acc += hdt(e, c0 + i) * e->A;
    S[i] = acc;
  }
  gemm(false, true, len, len, N, 1.0f, hC(e, c0), ld, hB(e, c0), ld, 0.0f, cb, L);
}

// y [n, inner] of one head; the state entering each chunk into `states`
// ([chunks, head_dim, state]) when not NULL. Per chunk four GEMMs: C B^T,
// the masked and decayed (C B^T) times dt x, C times the entering state, and
// the state update (dt x decayed)^T B.
static void scan_forward_head(const head *e, float *y, float *states, float *tmp) {
  const srt_mamba2_config *c = e->c;
  int64_t L = tile(c), P = c->head_dim, N = c->state, ld = e->z->conv_dim, ly = e->z->inner;
  float *S = tmp, *m = S + L, *off = m + L * L, *xw = off + L * P, *st = xw + L * P;
  memset(st, 0, (size_t)(P * N) * sizeof(float));
  for (int64_t c0 = 0, ci = 0; c0 < c->seq; c0 += L, ++ci) {
    int64_t len = c->seq - c0 < L ? c->seq - c0 : L;
    if (states)
      memcpy(states + ci * P * N, st, (size_t)(P * N) * sizeof(float));
    chunk_setup(e, c0, len, S, m);
    docs dc = docs_of(e, c0, len);
    // The causal part of i's document and the zeros apart: a select would
    // evaluate expf outside it too once the compiler may speculate it.
    for (int64_t i = 0, lo = 0; i < len; ++i) {
      lo = starts(e->seg, c0 + i) ? i : lo;
      for (int64_t j = 0; j < lo; ++j)
        m[i * L + j] = 0.0f;
      for (int64_t j = lo; j <= i; ++j)
        m[i * L + j] = expf(S[i] - S[j]) * m[i * L + j] * hdt(e, c0 + j);
      for (int64_t j = i + 1; j < len; ++j)
        m[i * L + j] = 0.0f;
    }
    float *y0 = y + (e->b * c->seq + c0) * ly + e->h * P;
    gemm(false, false, len, P, len, 1.0f, m, L, hx(e, c0), ld, 0.0f, y0, ly);
    gemm(false, true, len, P, N, 1.0f, hC(e, c0), ld, st, N, 0.0f, off, P);
    float last = S[len - 1];
    for (int64_t i = 0; i < len; ++i) {
      const float *xi = hx(e, c0 + i);
      float ea = i < dc.first ? expf(S[i]) : 0.0f;
      float w = i >= dc.last ? expf(last - S[i]) * hdt(e, c0 + i) : 0.0f;
      for (int64_t p = 0; p < P; ++p) {
        y0[i * ly + p] += ea * off[i * P + p] + e->D * xi[p];
        xw[i * P + p] = w * xi[p];
      }
    }
    float keep = dc.first == len ? expf(last) : 0.0f; // H survives no start
    gemm(true, false, P, N, len, 1.0f, xw, P, hB(e, c0), ld, keep, st, N);
  }
}

// The quadratic form's decays E (E_ij = exp(S_i - S_j) for j <= i in i's
// document, else 0) applied to one chunk's a1 = CB (row stride chunk) and
// a2 = dyu, and dS (written) from differentiating them.
static void decay_quadratic(const head *e, int64_t c0, int64_t len, const float *S,
                            const float *cb, float *a1, float *a2, float *dS) {
  int64_t L = tile(e->c);
  memset(dS, 0, (size_t)len * sizeof(float));
  for (int64_t i = 0, lo = 0; i < len; ++i) {
    lo = starts(e->seg, c0 + i) ? i : lo;
    for (int64_t j = 0; j < lo; ++j) { // another document: E = 0
      a1[i * L + j] = 0.0f * cb[i * L + j];
      a2[i * L + j] *= 0.0f;
    }
    for (int64_t j = lo; j <= i; ++j) { // causal: E = e^(S_i - S_j)
      float E = expf(S[i] - S[j]);
      a1[i * L + j] = E * cb[i * L + j];
      a2[i * L + j] *= E;
      if (j < i) {
        float m = a2[i * L + j] * cb[i * L + j];
        dS[i] += m;
        dS[j] -= m;
      }
    }
    for (int64_t j = i + 1; j < len; ++j) { // E = 0 (the products keep their signs)
      a1[i * L + j] = 0.0f * cb[i * L + j];
      a2[i * L + j] *= 0.0f;
    }
  }
}

// The gradients of one chunk's inputs given dy and R (dL/d the state leaving
// the chunk); R becomes dL/d the state entering it. dx of the head and dB,
// dC of its group go to dxbc (accumulated), dL/d dt to ddt (accumulated);
// dL/dA is added to *dA. With E_ij = exp(S_i - S_j) (j <= i; 0 across a
// document start), u_j = dt_j x_j (exp(S) 0 from the chunk's first start on,
// exp(S_last - S) before its last document, as in the forward):
//   du = (E . CB)^T dy + exp(S_last - S) (B R^T),
//   dB += (E . dyu)^T C + exp(S_last - S) (u R),  dyu_ij = dy_i . u_j,
//   dC += (E . dyu) B + exp(S) (dy H),
//   R_prev = exp(S_last) R + (exp(S) dy)^T C.
static void scan_backward_chunk(const head *e, const float *dy, const float *H, float *R,
                                int64_t c0, int64_t len, float *dxbc, float *ddt, double *dA,
                                float *tmp) {
  const srt_mamba2_config *c = e->c;
  const sizes *z = e->z;
  int64_t L = tile(c), P = c->head_dim, N = c->state, ld = z->conv_dim, ly = z->inner;
  float *S = tmp, *dS = S + L, *cb = dS + L, *a1 = cb + L * L, *a2 = a1 + L * L,
        *du = a2 + L * L, *u = du + L * P, *ey = u + L * P, *rb = ey + L * P, *rtu = rb + L * P,
        *htdy = rtu + L * N;
  chunk_setup(e, c0, len, S, cb);
  docs dc = docs_of(e, c0, len);
  const float *dy0 = dy + (e->b * c->seq + c0) * ly + e->h * P;
  float last = S[len - 1], el = dc.first == len ? expf(last) : 0.0f;
  for (int64_t j = 0; j < len; ++j) {
    const float *xj = hx(e, c0 + j);
    float dtj = hdt(e, c0 + j), ea = j < dc.first ? expf(S[j]) : 0.0f;
    for (int64_t p = 0; p < P; ++p) {
      u[j * P + p] = dtj * xj[p];
      ey[j * P + p] = ea * dy0[j * ly + p];
    }
  }
  gemm(false, true, len, len, P, 1.0f, dy0, ly, u, P, 0.0f, a2, L); // dyu
  decay_quadratic(e, c0, len, S, cb, a1, a2, dS);
  gemm(true, false, len, P, len, 1.0f, a1, L, dy0, ly, 0.0f, du, P);
  gemm(false, true, len, P, N, 1.0f, hB(e, c0), ld, R, N, 0.0f, rb, P);   // B R^T
  gemm(false, false, len, N, P, 1.0f, u, P, R, N, 0.0f, rtu, N);         // u R
  gemm(false, false, len, N, P, 1.0f, dy0, ly, H, N, 0.0f, htdy, N);      // dy H
  float *dxbc0 = dxbc + (e->b * c->seq + c0) * ld;
  float *dB0 = dxbc0 + z->inner + e->g * N, *dC0 = dB0 + c->groups * N;
  gemm(true, false, len, N, len, 1.0f, a2, L, hC(e, c0), ld, 1.0f, dB0, ld);
  gemm(false, false, len, N, len, 1.0f, a2, L, hB(e, c0), ld, 1.0f, dC0, ld);
  for (int64_t j = 0; j < len; ++j) {
    const float *xj = hx(e, c0 + j), *Bj = hB(e, c0 + j), *Cj = hC(e, c0 + j);
    float dtj = hdt(e, c0 + j), dd = 0;
    float eL = j >= dc.last ? expf(last - S[j]) : 0.0f, ea = j < dc.first ? expf(S[j]) : 0.0f;
    float *dxj = dxbc0 + j * ld + e->h * P;
    for (int64_t p = 0; p < P; ++p) {
      float d = du[j * P + p] + eL * rb[j * P + p];
      dxj[p] += dtj * d;
      dd += xj[p] * d;
    }
    ddt[(e->b * c->seq + c0 + j) * c->heads + e->h] += dd;
    for (int64_t n = 0; n < N; ++n) {
      dB0[j * ld + n] += eL * rtu[j * N + n];
      dC0[j * ld + n] += ea * htdy[j * N + n];
    }
    float q = eL * dot(Bj, rtu + j * N, N);
    dS[len - 1] += q;
    dS[j] -= q;
    dS[j] += ea * dot(Cj, htdy + j * N, N);
  }
  dS[len - 1] += el * dot(R, H, P * N);
  gemm(true, false, P, N, len, 1.0f, ey, P, hC(e, c0), ld, el, R, N);
  double run = 0; // dL/da_t = sum of dS_i over i >= t
  for (int64_t t = len - 1; t >= 0; --t) {
    run += dS[t];
    ddt[(e->b * c->seq + c0 + t) * c->heads + e->h] += e->A * (float)run;
    *dA += (double)hdt(e, c0 + t) * run;
  }
}

static void scan_backward_head(const head *e, const float *dy, const float *states,
                               float *dxbc, float *ddt, float *dA, float *dD, float *tmp) {
  const srt_mamba2_config *c = e->c;
  int64_t L = tile(c), P = c->head_dim, N = c->state;
  float *R = tmp + e->z->thread_floats - P * N; // the last P N floats of the thread's
  memset(R, 0, (size_t)(P * N) * sizeof(float));
  double da = 0, dd = 0;
  for (int64_t ci = e->z->chunks - 1; ci >= 0; --ci) {
    int64_t c0 = ci * L, len = c->seq - c0 < L ? c->seq - c0 : L;
    scan_backward_chunk(e, dy, states + ci * P * N, R, c0, len, dxbc, ddt, &da, tmp);
  }
  for (int64_t t = 0; t < c->seq; ++t) { // y += D x
    const float *dyt = dy + (e->b * c->seq + t) * e->z->inner + e->h * P, *xt = hx(e, t);
    float *dxt = dxbc + (e->b * c->seq + t) * e->z->conv_dim + e->h * P;
    dd += dot(dyt, xt, P);
    for (int64_t p = 0; p < P; ++p)
      dxt[p] += e->D * dyt[p];
  }
  *dA = (float)da;
  *dD = (float)dd;
}

static head head_of(const srt_mamba2_config *c, const sizes *z, const parts *p,
                    const srt_mamba2_weights *w, int64_t b, int64_t h) {
  return (head){.c = c, .z = z, .xbc = p->xbc, .dt = p->dt,
                .seg = p->seg ? p->seg + b * c->seq : NULL, .b = b, .h = h,
                .g = h / z->per_group, .A = -expf(w->A_log[h]), .D = w->D[h]};
}

// Every head's scan, forward (keeping each chunk's entering state when
// `keep_states`, for the backward) or backward. Tasks are (batch, group): a
// group's heads share B and C, whose gradients they accumulate, so one task
// runs them in order.
static void scan(const parts *p, const srt_mamba2_weights *w, const srt_mamba2_config *c,
                 const sizes *z, bool backward, bool keep_states) {
  int64_t tasks = c->batch * c->groups;
#pragma omp parallel for schedule(dynamic, 1)
  for (int64_t task = 0; task < tasks; ++task) {
    float *tmp = p->threads + (int64_t)omp_get_thread_num() * z->thread_floats;
    int64_t b = task / c->groups, g = task % c->groups;
    for (int64_t h = g * z->per_group; h < (g + 1) * z->per_group; ++h) {
      head e = head_of(c, z, p, w, b, h);
      float *states = p->states ? p->states + (b * c->heads + h) * z->chunks * c->head_dim *
                                                  c->state
                                : NULL;
      if (backward)
        scan_backward_head(&e, p->dy, states, p->dxbc, p->ddt, p->dA + b * c->heads + h,
                           p->dD + b * c->heads + h, tmp);
      else
        scan_forward_head(&e, p->y, keep_states ? states : NULL, tmp);
    }
  }
}

//===----------------------------------------------------------------------===//
// The gated RMSNorm: y * silu(z), normalised per group, times the weight
//===----------------------------------------------------------------------===//

static void norm_forward(float *out, float *rstd, const float *y, const float *proj,
                         const float *weight, const srt_mamba2_config *c, const sizes *z) {
  int64_t gs = z->inner / c->groups;
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < z->n; ++r)
    for (int64_t q = 0; q < c->groups; ++q) {
      const float *yr = y + r * z->inner + q * gs, *zr = proj + r * z->proj + q * gs;
      float *o = out + r * z->inner + q * gs;
      double ss = 0;
      for (int64_t k = 0; k < gs; ++k) {
        float h = yr[k] * silu(zr[k]);
        o[k] = h;
        ss += (double)h * h;
      }
      float rs = 1.0f / sqrtf((float)(ss / (double)gs) + c->eps);
      if (rstd)
        rstd[r * c->groups + q] = rs;
      for (int64_t k = 0; k < gs; ++k)
        o[k] = weight[q * gs + k] * (o[k] * rs);
    }
}

// dnormed -> dy (the scan output's gradient), dproj's z columns, dnorm_w.
static void norm_backward(float *dy, float *dproj, float *dweight, const float *dnormed,
                          const float *rstd, const float *y, const float *proj,
                          const float *weight, const srt_mamba2_config *c, const sizes *z) {
  int64_t gs = z->inner / c->groups;
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < z->n; ++r)
    for (int64_t q = 0; q < c->groups; ++q) {
      const float *yr = y + r * z->inner + q * gs, *zr = proj + r * z->proj + q * gs,
                  *d = dnormed + r * z->inner + q * gs, *wq = weight + q * gs;
      float rs = rstd[r * c->groups + q], s = 0;
      for (int64_t k = 0; k < gs; ++k)
        s += wq[k] * d[k] * yr[k] * silu(zr[k]);
      float k3 = rs * rs * rs * s / (float)gs;
      for (int64_t k = 0; k < gs; ++k) {
        float act = silu(zr[k]), h = yr[k] * act;
        float dh = rs * wq[k] * d[k] - h * k3;
        dy[r * z->inner + q * gs + k] = dh * act;
        dproj[r * z->proj + q * gs + k] = dh * yr[k] * silu_grad(zr[k]);
      }
    }
#pragma omp parallel for schedule(static)
  for (int64_t k = 0; k < z->inner; ++k) {
    double sum = 0;
    int64_t q = k / gs;
    for (int64_t r = 0; r < z->n; ++r) {
      float h = y[r * z->inner + k] * silu(proj[r * z->proj + k]);
      sum += (double)dnormed[r * z->inner + k] * (h * rstd[r * c->groups + q]);
    }
    dweight[k] += (float)sum;
  }
}

//===----------------------------------------------------------------------===//
// The mixer
//===----------------------------------------------------------------------===//

// in_proj, conv, dt, the scan and the norm: p->normed holds the norm's
// output (out_proj's input).
static srt_status forward_to_norm(const float *x, const srt_mamba2_weights *w, const parts *p,
                                  const srt_mamba2_config *c, const sizes *z, bool backward) {
  SRT_RETURN_IF_ERROR(srt_cpu_linear_forward(p->proj, x, w->in_proj, NULL, z->n, c->hidden,
                                             z->proj));
  conv_forward(p->xbc, p->proj, p->seg, w, c, z);
  dt_forward(p->dt, p->proj, w, c, z);
  scan(p, w, c, z, false, backward);
  norm_forward(p->normed, backward ? p->rstd : NULL, p->y, p->proj, w->norm_w, c, z);
  return NULL;
}

srt_status srt_cpu_mamba2_forward(float *out, const float *x, const int64_t *segment_ids,
                                  const srt_mamba2_weights *w, float *workspace,
                                  const srt_mamba2_config *c) {
  sizes z;
  parts p;
  SRT_RETURN_IF_ERROR(check(c, &z));
  if (layout(c, &z, false, workspace, &p) < 0)
    return SRT_ERROR(SRT_INVALID_ARGUMENT, "srt_cpu_mamba2_forward: the workspace overflows");
  p.seg = segment_ids;
  SRT_RETURN_IF_ERROR(forward_to_norm(x, w, &p, c, &z, false));
  return srt_cpu_linear_forward(out, p.normed, w->out_proj, NULL, z.n, z.inner, c->hidden);
}

srt_status srt_cpu_mamba2_backward(float *dx, const srt_mamba2_grads *g, const float *dout,
                                   const float *x, const int64_t *segment_ids,
                                   const srt_mamba2_weights *w, float *workspace,
                                   const srt_mamba2_config *c) {
  sizes z;
  parts p;
  SRT_RETURN_IF_ERROR(check(c, &z));
  if (layout(c, &z, true, workspace, &p) < 0)
    return SRT_ERROR(SRT_INVALID_ARGUMENT, "srt_cpu_mamba2_backward: the workspace overflows");
  p.seg = segment_ids;
  SRT_RETURN_IF_ERROR(forward_to_norm(x, w, &p, c, &z, true));
  SRT_RETURN_IF_ERROR(srt_cpu_linear_backward(p.dnormed, g->out_proj, NULL, dout, p.normed,
                                              w->out_proj, z.n, z.inner, c->hidden));
  norm_backward(p.dy, p.dproj, g->norm_w, p.dnormed, p.rstd, p.y, p.proj, w->norm_w, c, &z);
  memset(p.dxbc, 0, (size_t)(z.n * z.conv_dim) * sizeof(float));
  memset(p.ddt, 0, (size_t)(z.n * c->heads) * sizeof(float));
  scan(&p, w, c, &z, true, true);
  for (int64_t h = 0; h < c->heads; ++h) { // per batch, then summed in batch order
    double da = 0, dd = 0;
    for (int64_t b = 0; b < c->batch; ++b) {
      da += p.dA[b * c->heads + h];
      dd += p.dD[b * c->heads + h];
    }
    g->A_log[h] += (float)(da * -exp((double)w->A_log[h])); // dA/dA_log = A
    g->D[h] += (float)dd;
  }
  dt_backward(p.dproj, g, p.ddt, p.proj, w, c, &z);
  // xbc is read by nothing after the scan: the conv's recomputed
  // pre-activation takes its place.
  conv_backward(p.dproj, g, p.dxbc, p.xbc, p.proj, p.seg, w, c, &z);
  return srt_cpu_linear_backward(dx, g->in_proj, NULL, p.dproj, x, w->in_proj, z.n, c->hidden,
                                 z.proj);
}
