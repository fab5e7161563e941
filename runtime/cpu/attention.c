// Scaled dot-product attention on [B, S, heads * head_dim] activations:
// causal, grouped KV heads, sliding window, logit softcap; forward + backward.
#include "shardrt/kernels.h"

#include <cblas.h>
#include <limits.h>
#include <math.h>
#include <string.h>

// Queries per tile. 64 rows x S keys keeps a tile of scores in L2 for the
// sequence lengths a CPU trains on, is a multiple of every sgemm micro-kernel
// height, and lets causal/sliding masks skip whole key ranges per tile.
enum { kQueryBlock = 64 };

// tanh(x) = 2 sigmoid(2x) - 1 through one expf: glibc's tanhf is about 4x
// slower and dominated softcapped attention. Absolute error ~1e-7 (the
// softcapped logit's error is softcap times that); saturates to +-1 without
// NaN.
static float fast_tanh(float x) { return 2.0f / (1.0f + expf(-2.0f * x)) - 1.0f; }

static int64_t query_block(const srt_attention_config *c) {
  return c->seq < kQueryBlock ? c->seq : kQueryBlock;
}

static srt_status check_config(const char *what, const srt_attention_config *c) {
  if (c->batch <= 0 || c->seq <= 0 || c->heads <= 0 || c->kv_heads <= 0 ||
      c->head_dim <= 0)
    return SRT_ERROR(SRT_INVALID_ARGUMENT,
                     "%s: batch %lld, seq %lld, heads %lld, kv_heads %lld, "
                     "head_dim %lld must all be positive",
                     what, (long long)c->batch, (long long)c->seq,
                     (long long)c->heads, (long long)c->kv_heads,
                     (long long)c->head_dim);
  if (c->heads % c->kv_heads != 0)
    return SRT_ERROR(SRT_INVALID_ARGUMENT,
                     "%s: kv_heads %lld does not divide heads %lld", what,
                     (long long)c->kv_heads, (long long)c->heads);
  if (c->sliding_window < 0 || !(c->softcap >= 0.0f) || isinf(c->softcap) ||
      !isfinite(c->scale))
    return SRT_ERROR(SRT_INVALID_ARGUMENT,
                     "%s: sliding_window %lld must be >= 0, softcap %g finite "
                     "and >= 0, scale %g finite",
                     what, (long long)c->sliding_window, (double)c->softcap,
                     (double)c->scale);
  if (c->seq > INT_MAX || c->heads > INT_MAX / c->head_dim)
    return SRT_ERROR(SRT_INVALID_ARGUMENT,
                     "%s: seq %lld or heads*head_dim %lld past the BLAS int",
                     what, (long long)c->seq,
                     (long long)(c->heads * c->head_dim));
  return NULL;
}

int64_t srt_cpu_attention_workspace_floats(const srt_attention_config *config) {
  if (config->seq <= 0)
    return 0;
  return 2 * query_block(config) * config->seq;
}

// Visible keys of query i: [lo, hi).
static int64_t key_lo(const srt_attention_config *c, int64_t i) {
  int64_t w = c->sliding_window;
  return w > 0 && i - w + 1 > 0 ? i - w + 1 : 0;
}

static int64_t key_hi(const srt_attention_config *c, int64_t i) {
  if (c->causal)
    return i + 1;
  int64_t w = c->sliding_window;
  return w > 0 && i + w < c->seq ? i + w : c->seq;
}

// Views of one (batch, head) pair inside the folded-head activations.
typedef struct head_view {
  int64_t ldq, ldkv; // row strides of q/out and of k/v
  int64_t q_off, kv_off;
} head_view;

static head_view view_of(const srt_attention_config *c, int64_t b, int64_t h) {
  int64_t hd = c->head_dim, group = c->heads / c->kv_heads;
  head_view v;
  v.ldq = c->heads * hd;
  v.ldkv = c->kv_heads * hd;
  v.q_off = b * c->seq * v.ldq + h * hd;
  v.kv_off = b * c->seq * v.ldkv + (h / group) * hd;
  return v;
}

srt_status srt_cpu_attention_forward(float *out, float *lse, const float *q,
                                     const float *k, const float *v,
                                     float *workspace,
                                     const srt_attention_config *config) {
  SRT_RETURN_IF_ERROR(check_config("attention forward", config));
  const srt_attention_config *c = config;
  int64_t S = c->seq, hd = c->head_dim, bq = query_block(c);
  float cap = c->softcap;
  float *tile = workspace; // [bq, nk] scores, then probabilities
  for (int64_t b = 0; b < c->batch; b++) {
    for (int64_t h = 0; h < c->heads; h++) {
      head_view hv = view_of(c, b, h);
      const float *Q = q + hv.q_off, *K = k + hv.kv_off, *V = v + hv.kv_off;
      float *O = out + hv.q_off;
      float *L = lse + (b * c->heads + h) * S;
      for (int64_t i0 = 0; i0 < S; i0 += bq) {
        int64_t i1 = i0 + bq < S ? i0 + bq : S, m = i1 - i0;
        int64_t j0 = key_lo(c, i0), j1 = key_hi(c, i1 - 1), nk = j1 - j0;
        // tile[m, nk] = scale * Q[i0:i1] K[j0:j1]^T
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)m, (int)nk,
                    (int)hd, c->scale, Q + i0 * hv.ldq, (int)hv.ldq,
                    K + j0 * hv.ldkv, (int)hv.ldkv, 0.0f, tile, (int)nk);
        for (int64_t r = 0; r < m; r++) {
          int64_t i = i0 + r;
          float *row = tile + r * nk;
          int64_t lo = key_lo(c, i) - j0, hi = key_hi(c, i) - j0;
          if (cap > 0.0f)
            for (int64_t j = lo; j < hi; j++)
              row[j] = cap * fast_tanh(row[j] / cap);
          float mx = -INFINITY;
          for (int64_t j = lo; j < hi; j++)
            mx = row[j] > mx ? row[j] : mx;
          double sum = 0.0;
          for (int64_t j = lo; j < hi; j++) {
            row[j] = expf(row[j] - mx);
            sum += row[j];
          }
          float inv = (float)(1.0 / sum);
          for (int64_t j = 0; j < lo; j++)
            row[j] = 0.0f;
          for (int64_t j = lo; j < hi; j++)
            row[j] *= inv;
          for (int64_t j = hi; j < nk; j++)
            row[j] = 0.0f;
          L[i] = mx + (float)log(sum);
        }
        // O[i0:i1] = P V[j0:j1]
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)m, (int)hd,
                    (int)nk, 1.0f, tile, (int)nk, V + j0 * hv.ldkv,
                    (int)hv.ldkv, 0.0f, O + i0 * hv.ldq, (int)hv.ldq);
      }
    }
  }
  return NULL;
}

srt_status srt_cpu_attention_backward(float *dq, float *dk, float *dv,
                                      const float *dout, const float *q,
                                      const float *k, const float *v,
                                      const float *out, const float *lse,
                                      float *workspace,
                                      const srt_attention_config *config) {
  SRT_RETURN_IF_ERROR(check_config("attention backward", config));
  const srt_attention_config *c = config;
  int64_t S = c->seq, hd = c->head_dim, bq = query_block(c);
  float cap = c->softcap;
  float *ptile = workspace;              // [bq, nk]: scores, then p
  float *dtile = workspace + bq * S;     // [bq, nk]: dp, then dscore * scale
  // dk/dv sum over query tiles and over the heads sharing a KV head.
  size_t kv_floats = (size_t)(c->batch * S * c->kv_heads * hd);
  memset(dk, 0, kv_floats * sizeof *dk);
  memset(dv, 0, kv_floats * sizeof *dv);
  for (int64_t b = 0; b < c->batch; b++) {
    for (int64_t h = 0; h < c->heads; h++) {
      head_view hv = view_of(c, b, h);
      const float *Q = q + hv.q_off, *K = k + hv.kv_off, *V = v + hv.kv_off;
      const float *O = out + hv.q_off, *dO = dout + hv.q_off;
      float *dQ = dq + hv.q_off, *dK = dk + hv.kv_off, *dV = dv + hv.kv_off;
      const float *L = lse + (b * c->heads + h) * S;
      for (int64_t i0 = 0; i0 < S; i0 += bq) {
        int64_t i1 = i0 + bq < S ? i0 + bq : S, m = i1 - i0;
        int64_t j0 = key_lo(c, i0), j1 = key_hi(c, i1 - 1), nk = j1 - j0;
        const float *Qb = Q + i0 * hv.ldq, *dOb = dO + i0 * hv.ldq;
        const float *Kb = K + j0 * hv.ldkv, *Vb = V + j0 * hv.ldkv;
        // ptile = scale * Q K^T (recomputed), dtile = dO V^T
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)m, (int)nk,
                    (int)hd, c->scale, Qb, (int)hv.ldq, Kb, (int)hv.ldkv, 0.0f,
                    ptile, (int)nk);
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)m, (int)nk,
                    (int)hd, 1.0f, dOb, (int)hv.ldq, Vb, (int)hv.ldkv, 0.0f,
                    dtile, (int)nk);
        for (int64_t r = 0; r < m; r++) {
          int64_t i = i0 + r;
          float *prow = ptile + r * nk, *drow = dtile + r * nk;
          int64_t lo = key_lo(c, i) - j0, hi = key_hi(c, i) - j0;
          // D_i = sum_j p_ij dp_ij = dO_i . O_i (softmax's Jacobian term).
          double dsum = 0.0;
          for (int64_t d = 0; d < hd; d++)
            dsum += (double)dOb[r * hv.ldq + d] * O[i * hv.ldq + d];
          float D = (float)dsum, li = L[i];
          for (int64_t j = 0; j < lo; j++)
            prow[j] = drow[j] = 0.0f;
          if (cap > 0.0f) {
            for (int64_t j = lo; j < hi; j++) {
              float t = fast_tanh(prow[j] / cap);
              float p = expf(cap * t - li);
              prow[j] = p;
              drow[j] = p * (drow[j] - D) * (1.0f - t * t) * c->scale;
            }
          } else {
            for (int64_t j = lo; j < hi; j++) {
              float p = expf(prow[j] - li);
              prow[j] = p;
              drow[j] = p * (drow[j] - D) * c->scale;
            }
          }
          for (int64_t j = hi; j < nk; j++)
            prow[j] = drow[j] = 0.0f;
        }
        // dV[j0:j1] += P^T dO;  dQ[i0:i1] = dS K;  dK[j0:j1] += dS^T Q
        cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, (int)nk, (int)hd,
                    (int)m, 1.0f, ptile, (int)nk, dOb, (int)hv.ldq, 1.0f,
                    dV + j0 * hv.ldkv, (int)hv.ldkv);
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)m, (int)hd,
                    (int)nk, 1.0f, dtile, (int)nk, Kb, (int)hv.ldkv, 0.0f,
                    dQ + i0 * hv.ldq, (int)hv.ldq);
        cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, (int)nk, (int)hd,
                    (int)m, 1.0f, dtile, (int)nk, Qb, (int)hv.ldq, 1.0f,
                    dK + j0 * hv.ldkv, (int)hv.ldkv);
      }
    }
  }
  return NULL;
}
