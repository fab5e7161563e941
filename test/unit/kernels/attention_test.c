// Unit tests of attention (runtime/cpu/attention.c): causal, GQA ratios 2
// and 4, sliding window, softcap, non-causal and multi-tile sequences,
// packed documents (segment ids, padding); the forward against float64
// loops, the backward against finite differences; context-parallel ranks
// (cp_size > 1) against the rows of the unsharded attention.
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kernel_testing.h"
#include "shardrt/kernels.h"

// Straightforward float64 attention: out [B, S, H*hd], lse [B, H, S];
// seg [B, S] (NULL: one document per row): key j is visible from query i
// only when both carry the same id >= 0 (the tests give each document its
// own id); a query that sees nothing gets out 0 and lse -inf.
static void ref_attention(double *out, double *lse, const double *q,
                          const double *k, const double *v, const int64_t *seg,
                          const srt_attention_config *c) {
  int64_t B = c->batch, S = c->seq, H = c->heads, KV = c->kv_heads,
          hd = c->head_dim, W = c->sliding_window;
  double *logit = kt_calloc(S, sizeof *logit);
  for (int64_t b = 0; b < B; b++)
    for (int64_t h = 0; h < H; h++) {
      int64_t kvh = h / (H / KV);
      for (int64_t i = 0; i < S; i++) {
        double mx = -INFINITY;
        for (int64_t j = 0; j < S; j++) {
          bool visible = (!c->causal || j <= i) &&
                         (W == 0 || (i > j ? i - j : j - i) < W) &&
                         (!seg || (seg[b * S + i] >= 0 && seg[b * S + i] == seg[b * S + j]));
          if (!visible) {
            logit[j] = -INFINITY;
            continue;
          }
          double s = 0.0;
          for (int64_t d = 0; d < hd; d++)
            s += q[(b * S + i) * H * hd + h * hd + d] *
                 k[(b * S + j) * KV * hd + kvh * hd + d];
          s *= c->scale;
          if (c->softcap > 0)
            s = c->softcap * tanh(s / c->softcap);
          logit[j] = s;
          mx = s > mx ? s : mx;
        }
        double sum = 0.0;
        for (int64_t j = 0; j < S && mx > -INFINITY; j++)
          sum += exp(logit[j] - mx);
        if (lse)
          lse[(b * H + h) * S + i] = mx > -INFINITY ? mx + log(sum) : -INFINITY;
        for (int64_t d = 0; d < hd; d++) {
          double o = 0.0;
          for (int64_t j = 0; j < S && mx > -INFINITY; j++)
            o += exp(logit[j] - mx) / sum *
                 v[(b * S + j) * KV * hd + kvh * hd + d];
          out[(b * S + i) * H * hd + h * hd + d] = o;
        }
      }
    }
  free(logit);
}

// The global position of local query row r of a context-parallel rank
// (cp->cp_size > 1): its chunks cp_rank and 2 cp - 1 - cp_rank of S / (2 cp).
static int64_t global_row(const srt_attention_config *cp, int64_t r) {
  int64_t C = cp->seq / (2 * cp->cp_size);
  return r < C ? cp->cp_rank * C + r : (2 * cp->cp_size - 1 - cp->cp_rank) * C + r - C;
}

// local[o, r, :] = full[o, global_row(r), :] for o < outer, r < S / cp, rows
// of `width` floats (q-like tensors: outer B; lse: outer B * H, width 1).
static void gather_rows(float *local, const float *full, int64_t outer, int64_t width,
                        const srt_attention_config *cp) {
  int64_t S = cp->seq, Sq = S / cp->cp_size;
  for (int64_t o = 0; o < outer; o++)
    for (int64_t r = 0; r < Sq; r++)
      memcpy(local + (o * Sq + r) * width, full + (o * S + global_row(cp, r)) * width,
             (size_t)width * sizeof *local);
}

// The inverse in float64: full[o, global_row(r), :] = local[o, r, :].
static void scatter_rows(double *full, const double *local, int64_t outer, int64_t width,
                         const srt_attention_config *cp) {
  int64_t S = cp->seq, Sq = S / cp->cp_size;
  for (int64_t o = 0; o < outer; o++)
    for (int64_t r = 0; r < Sq; r++)
      memcpy(full + (o * S + global_row(cp, r)) * width, local + (o * Sq + r) * width,
             (size_t)width * sizeof *full);
}

// The float64 loss <attention(q, k, v), cot> of c (the unsharded shape;
// qn = B S H hd); with cp set, q holds that rank's local rows, scattered
// into q_full (whose other rows the cotangent's zeros make irrelevant).
typedef struct fd_ctx {
  const srt_attention_config *c;
  const int64_t *seg;
  double *q, *k, *v;
  const double *cot;
  int64_t qn;
  const srt_attention_config *cp;
  double *q_full;
} fd_ctx;

static double loss(const double *unused, void *p) {
  (void)unused;
  fd_ctx *f = p;
  double *out = kt_calloc(f->qn, sizeof *out), *q = f->q;
  if (f->cp) {
    scatter_rows(f->q_full, f->q, f->c->batch, f->c->heads * f->c->head_dim, f->cp);
    q = f->q_full;
  }
  ref_attention(out, NULL, q, f->k, f->v, f->seg, f->c);
  double l = test_dot(out, f->cot, f->qn);
  free(out);
  return l;
}

// Central differences at `samples` pseudo-random coordinates of x (all of
// them when samples >= n): grad is written only there, idx lists them.
static int64_t fd_sampled(fd_ctx *f, double *x, int64_t n, int64_t samples,
                          test_rng *rng, int64_t *idx, double *grad) {
  int64_t m = samples < n ? samples : n;
  for (int64_t s = 0; s < m; s++) {
    idx[s] = samples < n ? (int64_t)test_uniform(rng, 0, (float)n) % n : s;
    double keep = x[idx[s]];
    x[idx[s]] = keep + 1e-6;
    double up = loss(NULL, f);
    x[idx[s]] = keep - 1e-6;
    double down = loss(NULL, f);
    x[idx[s]] = keep;
    grad[s] = (up - down) / 2e-6;
  }
  return m;
}

static void check_grad(const char *what, const float *got, fd_ctx *f,
                       double *x, int64_t n, int64_t samples, test_rng *rng) {
  int64_t *idx = kt_calloc(n, sizeof *idx);
  double *want = kt_calloc(n, sizeof *want);
  float *picked = kt_calloc(n, sizeof *picked);
  int64_t m = fd_sampled(f, x, n, samples, rng, idx, want);
  for (int64_t s = 0; s < m; s++)
    picked[s] = got[idx[s]];
  // fp32 softmax and sgemm over <= S * hd terms of O(1) values (the test
  // keeps |logits| <= ~4): observed errors ~1e-7; 2e-6 absolute + 2e-5
  // relative leaves 10x margin and catches any missing term (O(0.01+)).
  test_assert_close(picked, want, m, 2e-6, 2e-5, what);
  free(idx), free(want), free(picked);
}

// lse against the reference: a query that sees no key (padding) has -inf
// in both, the others within 1e-5 absolute, 1e-6 relative.
static void check_lse(const float *lse, const double *wlse, int64_t n) {
  float *got = kt_calloc(n, sizeof *got);
  double *want = kt_calloc(n, sizeof *want);
  for (int64_t i = 0; i < n; i++) {
    bool empty = isinf(wlse[i]);
    if (empty)
      assert_true(isinf(lse[i]) && lse[i] < 0);
    got[i] = empty ? 0.0f : lse[i];
    want[i] = empty ? 0.0 : wlse[i];
  }
  test_assert_close(got, want, n, 1e-5, 1e-6, "attention lse");
  free(got), free(want);
}

static void check_documents(const srt_attention_config *c, const int64_t *seg,
                            int64_t fd_samples, uint64_t seed) {
  int64_t qn = c->batch * c->seq * c->heads * c->head_dim;
  int64_t kvn = c->batch * c->seq * c->kv_heads * c->head_dim;
  int64_t ln = c->batch * c->heads * c->seq;
  test_rng rng = {seed};
  float *q = kt_calloc(qn, 4), *k = kt_calloc(kvn, 4), *v = kt_calloc(kvn, 4);
  float *out = kt_calloc(qn, 4), *lse = kt_calloc(ln, 4);
  float *dout = kt_calloc(qn, 4), *dq = kt_calloc(qn, 4);
  float *dk = kt_calloc(kvn, 4), *dv = kt_calloc(kvn, 4);
  float *ws = kt_calloc(srt_cpu_attention_workspace_floats(c), 4);
  test_fill(q, qn, &rng, -1, 1);
  test_fill(k, kvn, &rng, -1, 1);
  test_fill(v, kvn, &rng, -1, 1);
  test_fill(dout, qn, &rng, -1, 1);
  test_fill(dk, kvn, &rng, 50, 60); // must be overwritten, not accumulated
  assert_null(srt_cpu_attention_forward(out, lse, q, k, v, seg, ws, c));

  fd_ctx f = {.c = c, .seg = seg, .q = test_to_double(q, qn), .k = test_to_double(k, kvn),
              .v = test_to_double(v, kvn), .cot = test_to_double(dout, qn), .qn = qn};
  double *want = kt_calloc(qn, sizeof *want), *wlse = kt_calloc(ln, sizeof *wlse);
  ref_attention(want, wlse, f.q, f.k, f.v, seg, c);
  // Outputs are convex combinations of values in [-1, 1]: fp32 softmax and
  // sgemm errors ~1e-7 per term; 1e-5 absolute bounds S <= 150 terms.
  test_assert_close(out, want, qn, 1e-5, 0.0, "attention forward");
  check_lse(lse, wlse, ln);

  assert_null(srt_cpu_attention_backward(dq, dk, dv, dout, q, k, v, out, lse,
                                         seg, ws, c));
  check_grad("attention dq", dq, &f, f.q, qn, fd_samples, &rng);
  check_grad("attention dk", dk, &f, f.k, kvn, fd_samples, &rng);
  check_grad("attention dv", dv, &f, f.v, kvn, fd_samples, &rng);
  free(q), free(k), free(v), free(out), free(lse), free(dout), free(dq);
  free(dk), free(dv), free(ws), free(want), free(wlse);
  free(f.q), free(f.k), free(f.v), free((void *)f.cot);
}

static void check_case(const srt_attention_config *c, int64_t fd_samples,
                       uint64_t seed) {
  check_documents(c, NULL, fd_samples, seed);
}

static const int64_t kAll = INT64_MAX; // finite differences on every input

static void test_causal_gqa2(void **state) {
  (void)state;
  srt_attention_config c = {.batch = 2, .seq = 7, .heads = 4, .kv_heads = 2,
                            .head_dim = 8, .causal = true,
                            .scale = 0.35355339f}; // 1/sqrt(8)
  check_case(&c, kAll, 1);
}

static void test_causal_gqa4_sliding_window(void **state) {
  (void)state;
  // Window 3 < seq 9: query i sees keys i-2..i.
  srt_attention_config c = {.batch = 1, .seq = 9, .heads = 4, .kv_heads = 1,
                            .head_dim = 6, .causal = true, .scale = 0.4f,
                            .sliding_window = 3};
  check_case(&c, kAll, 2);
}

static void test_softcap(void **state) {
  (void)state;
  // Scale 1.5 makes |scale q.k| reach ~4 with head_dim 6, so softcap 2 is
  // far into tanh's nonlinear range.
  srt_attention_config c = {.batch = 2, .seq = 6, .heads = 2, .kv_heads = 2,
                            .head_dim = 6, .causal = true, .scale = 1.5f,
                            .softcap = 2.0f};
  check_case(&c, kAll, 3);
}

static void test_non_causal_and_window(void **state) {
  (void)state;
  srt_attention_config c = {.batch = 1, .seq = 5, .heads = 2, .kv_heads = 1,
                            .head_dim = 4, .causal = false, .scale = 0.5f};
  check_case(&c, kAll, 4);
  c.sliding_window = 2; // |i - j| < 2
  check_case(&c, kAll, 5);
}

static void test_multi_tile(void **state) {
  (void)state;
  // 150 queries = query blocks of 64, 64 and 22 (a masked attention of at
  // most 512 positions; seq 700 below takes blocks of 128), with a window of
  // 40 crossing the block boundaries, GQA 2 and softcap: finite differences
  // at 60 sampled inputs per tensor (all of them would take minutes).
  srt_attention_config c = {.batch = 1, .seq = 150, .heads = 2, .kv_heads = 1,
                            .head_dim = 8, .causal = true, .scale = 0.35355339f,
                            .sliding_window = 40, .softcap = 3.0f};
  check_case(&c, 60, 6);
  c.sliding_window = 0;
  c.softcap = 0.0f;
  check_case(&c, 60, 7);
}

// Past one key tile (512): 700 queries walk up to two key tiles, so the
// online softmax rescales its running max and sum (FlashAttention-2's
// alpha); a window of 300 cuts tiles on both sides, and a non-causal run
// visits tiles after the diagonal. 12 finite-difference samples per tensor.
static void test_online_softmax_across_key_tiles(void **state) {
  (void)state;
  srt_attention_config c = {.batch = 1, .seq = 700, .heads = 2, .kv_heads = 1,
                            .head_dim = 8, .causal = true, .scale = 0.35355339f};
  check_case(&c, 12, 8);
  c.sliding_window = 300;
  c.softcap = 3.0f;
  check_case(&c, 12, 9);
  c.causal = false;
  c.sliding_window = 0;
  c.softcap = 0.0f;
  check_case(&c, 12, 10);
}

// Segment ids [B, S] of `rows` rows of seq tokens from run lengths: each row
// lists its documents' lengths, 0-terminated; the rest of a row is padding.
static int64_t *segments(int64_t rows, int64_t seq, const int64_t (*lengths)[8]) {
  int64_t *seg = kt_calloc(rows * seq, sizeof *seg);
  for (int64_t b = 0; b < rows; b++) {
    int64_t t = 0;
    for (int64_t d = 0; lengths[b][d] > 0; d++)
      for (int64_t n = 0; n < lengths[b][d]; n++)
        seg[b * seq + t++] = d;
    while (t < seq)
      seg[b * seq + t++] = -1;
  }
  return seg;
}

// Packed documents, causal with GQA 2: row 0 holds documents of 3, 4 and 2
// tokens and 2 of padding, row 1 documents of 4 and 7 (no padding).
static void test_documents_causal(void **state) {
  (void)state;
  srt_attention_config c = {.batch = 2, .seq = 11, .heads = 4, .kv_heads = 2,
                            .head_dim = 8, .causal = true, .scale = 0.35355339f};
  int64_t *seg = segments(2, 11, (const int64_t[][8]){{3, 4, 2, 0}, {4, 7, 0}});
  check_documents(&c, seg, kAll, 11);
  c.causal = false; // a document sees its later keys, never the next document's
  check_documents(&c, seg, kAll, 12);
  free(seg);
}

// Documents with a sliding window and softcap across query blocks of 64:
// lengths 50, 37, 60 then 3 of padding; window 20 inside the longer ones.
static void test_documents_window_softcap(void **state) {
  (void)state;
  srt_attention_config c = {.batch = 1, .seq = 150, .heads = 2, .kv_heads = 1,
                            .head_dim = 8, .causal = true, .scale = 0.35355339f,
                            .sliding_window = 20, .softcap = 3.0f};
  int64_t *seg = segments(1, 150, (const int64_t[][8]){{50, 37, 60, 0}});
  check_documents(&c, seg, 60, 13);
  free(seg);
}

// A document across a key tile boundary (512): lengths 100, 500, 100.
static void test_documents_across_key_tiles(void **state) {
  (void)state;
  srt_attention_config c = {.batch = 1, .seq = 700, .heads = 2, .kv_heads = 1,
                            .head_dim = 8, .causal = true, .scale = 0.35355339f};
  int64_t *seg = segments(1, 700, (const int64_t[][8]){{100, 500, 100, 0}});
  check_documents(&c, seg, 12, 14);
  free(seg);
}

// One document per row given as segment ids (all 0) is today's attention:
// the same bytes as without segment ids, forward and backward.
static void test_one_document_same_bytes(void **state) {
  (void)state;
  srt_attention_config c = {.batch = 2, .seq = 700, .heads = 2, .kv_heads = 1,
                            .head_dim = 8, .causal = true, .scale = 0.35355339f,
                            .sliding_window = 300, .softcap = 3.0f};
  int64_t qn = c.batch * c.seq * c.heads * c.head_dim, kvn = qn / 2, ln = c.batch * c.heads * c.seq;
  test_rng rng = {15};
  float *in = kt_calloc(3 * qn, 4), *ws = kt_calloc(srt_cpu_attention_workspace_floats(&c), 4);
  test_fill(in, 3 * qn, &rng, -1, 1);
  const float *q = in, *k = in + qn, *v = k + kvn, *dout = in + 2 * qn;
  int64_t *zeros = kt_calloc(c.batch * c.seq, sizeof *zeros);
  float *r[2][5]; // out, lse, dq, dk, dv without and with segment ids
  for (int w = 0; w < 2; w++) {
    const int64_t *seg = w ? zeros : NULL;
    r[w][0] = kt_calloc(qn, 4), r[w][1] = kt_calloc(ln, 4), r[w][2] = kt_calloc(qn, 4);
    r[w][3] = kt_calloc(kvn, 4), r[w][4] = kt_calloc(kvn, 4);
    assert_null(srt_cpu_attention_forward(r[w][0], r[w][1], q, k, v, seg, ws, &c));
    assert_null(srt_cpu_attention_backward(r[w][2], r[w][3], r[w][4], dout, q, k, v, r[w][0],
                                           r[w][1], seg, ws, &c));
  }
  const int64_t n[5] = {qn, ln, qn, kvn, kvn};
  for (int i = 0; i < 5; i++) {
    assert_memory_equal(r[0][i], r[1][i], (size_t)n[i] * 4);
    free(r[0][i]), free(r[1][i]);
  }
  free(in), free(ws), free(zeros);
}

// Context parallelism. The tensors of one check: the unsharded attention's
// inputs and results, and one rank's local rows and results.
typedef struct cp_case {
  const srt_attention_config *c; // unsharded
  const int64_t *seg;
  int64_t qn, kvn, ln;           // unsharded element counts
  float *q, *k, *v, *dout, *out, *lse, *dq, *dk, *dv, *ws;
  double *dk_sum, *dv_sum;       // the ranks' dk/dv, summed in float64
} cp_case;

// got == the rows `cp` selects of want (width floats per row, outer rows):
// the same bytes when `exact`, else within 1e-6 absolute (fp32 sums over
// key tiles cut elsewhere: ~1e-7 for the O(1) values here).
static void check_rows(const float *got, const float *want_full, int64_t outer,
                       int64_t width, const srt_attention_config *cp, bool exact,
                       const char *what) {
  int64_t n = outer * (cp->seq / cp->cp_size) * width;
  float *want = kt_calloc(n, sizeof *want);
  gather_rows(want, want_full, outer, width, cp);
  if (exact) {
    assert_memory_equal(got, want, (size_t)n * sizeof *got);
  } else {
    bool *pad = kt_calloc(n, sizeof *pad); // lse -inf (padding) on both sides
    double *w = test_to_double(want, n);
    float *g = kt_calloc(n, sizeof *g);
    for (int64_t i = 0; i < n; i++) {
      pad[i] = isinf(want[i]);
      if (pad[i])
        assert_true(isinf(got[i]) && got[i] < 0);
      g[i] = pad[i] ? 0.0f : got[i];
      w[i] = pad[i] ? 0.0 : w[i];
    }
    test_assert_close(g, w, n, 1e-6, 0.0, what);
    free(pad), free(w), free(g);
  }
  free(want);
}

// Finite differences of rank cr's local loss <out_local, dout_local> (the
// float64 unsharded attention, its other rows' cotangent 0): against dq of
// its local rows and its partial dk, dv over all S keys.
static void check_cp_fd(const cp_case *t, const srt_attention_config *cr, const float *q_l,
                        const float *dout_l, const float *dq_l, const float *dk_l,
                        const float *dv_l, int64_t samples, test_rng *rng) {
  int64_t ql = t->qn / cr->cp_size, width = t->c->heads * t->c->head_dim;
  double *cot = kt_calloc(t->qn, sizeof *cot), *dout_d = test_to_double(dout_l, ql);
  scatter_rows(cot, dout_d, t->c->batch, width, cr);
  fd_ctx f = {.c = t->c, .seg = t->seg, .q = test_to_double(q_l, ql),
              .k = test_to_double(t->k, t->kvn), .v = test_to_double(t->v, t->kvn),
              .cot = cot, .qn = t->qn, .cp = cr, .q_full = test_to_double(t->q, t->qn)};
  check_grad("cp attention dq", dq_l, &f, f.q, ql, samples, rng);
  check_grad("cp attention dk", dk_l, &f, f.k, t->kvn, samples, rng);
  check_grad("cp attention dv", dv_l, &f, f.v, t->kvn, samples, rng);
  free(cot), free(dout_d), free(f.q), free(f.k), free(f.v), free(f.q_full);
}

// Rank `rank` of cp: forward and backward on its local rows against the
// unsharded results; its dk/dv added to the sums.
static void check_cp_rank(cp_case *t, int64_t cp, int64_t rank, bool exact,
                          int64_t fd_samples, test_rng *rng) {
  srt_attention_config cr = *t->c;
  cr.cp_size = cp;
  cr.cp_rank = rank;
  int64_t ql = t->qn / cp, ll = t->ln / cp, width = t->c->heads * t->c->head_dim;
  float *q_l = kt_calloc(ql, 4), *dout_l = kt_calloc(ql, 4), *out_l = kt_calloc(ql, 4);
  float *lse_l = kt_calloc(ll, 4), *dq_l = kt_calloc(ql, 4);
  float *dk_l = kt_calloc(t->kvn, 4), *dv_l = kt_calloc(t->kvn, 4);
  gather_rows(q_l, t->q, t->c->batch, width, &cr);
  gather_rows(dout_l, t->dout, t->c->batch, width, &cr);
  assert_null(srt_cpu_attention_forward(out_l, lse_l, q_l, t->k, t->v, t->seg, t->ws, &cr));
  check_rows(out_l, t->out, t->c->batch, width, &cr, exact, "cp attention out");
  check_rows(lse_l, t->lse, t->c->batch * t->c->heads, 1, &cr, exact, "cp attention lse");
  assert_null(srt_cpu_attention_backward(dq_l, dk_l, dv_l, dout_l, q_l, t->k, t->v, out_l,
                                         lse_l, t->seg, t->ws, &cr));
  check_rows(dq_l, t->dq, t->c->batch, width, &cr, exact, "cp attention dq");
  for (int64_t i = 0; i < t->kvn; i++) {
    t->dk_sum[i] += dk_l[i];
    t->dv_sum[i] += dv_l[i];
  }
  if (fd_samples > 0)
    check_cp_fd(t, &cr, q_l, dout_l, dq_l, dk_l, dv_l, fd_samples, rng);
  free(q_l), free(dout_l), free(out_l), free(lse_l), free(dq_l), free(dk_l), free(dv_l);
}

// Every rank of cp against the unsharded attention c: out, lse and dq rows
// equal (bytes when `exact`: the chunk a multiple of the query block),
// dk/dv summed over the ranks within 1e-5 of the unsharded ones (fp32 sums
// in another order over <= S terms of O(1)); finite differences of each
// rank's gradients at fd_samples inputs per tensor (0: none).
static void check_cp(const srt_attention_config *c, const int64_t *seg, int64_t cp,
                     bool exact, int64_t fd_samples, uint64_t seed) {
  cp_case t = {.c = c, .seg = seg, .qn = c->batch * c->seq * c->heads * c->head_dim,
               .kvn = c->batch * c->seq * c->kv_heads * c->head_dim,
               .ln = c->batch * c->heads * c->seq};
  test_rng rng = {seed};
  t.q = kt_calloc(t.qn, 4), t.k = kt_calloc(t.kvn, 4), t.v = kt_calloc(t.kvn, 4);
  t.dout = kt_calloc(t.qn, 4), t.out = kt_calloc(t.qn, 4), t.lse = kt_calloc(t.ln, 4);
  t.dq = kt_calloc(t.qn, 4), t.dk = kt_calloc(t.kvn, 4), t.dv = kt_calloc(t.kvn, 4);
  t.ws = kt_calloc(srt_cpu_attention_workspace_floats(c), 4);
  t.dk_sum = kt_calloc(t.kvn, 8), t.dv_sum = kt_calloc(t.kvn, 8);
  test_fill(t.q, t.qn, &rng, -1, 1);
  test_fill(t.k, t.kvn, &rng, -1, 1);
  test_fill(t.v, t.kvn, &rng, -1, 1);
  test_fill(t.dout, t.qn, &rng, -1, 1);
  assert_null(srt_cpu_attention_forward(t.out, t.lse, t.q, t.k, t.v, seg, t.ws, c));
  assert_null(srt_cpu_attention_backward(t.dq, t.dk, t.dv, t.dout, t.q, t.k, t.v, t.out,
                                         t.lse, seg, t.ws, c));
  for (int64_t r = 0; r < cp; r++)
    check_cp_rank(&t, cp, r, exact, fd_samples, &rng);
  test_assert_close(t.dk, t.dk_sum, t.kvn, 1e-5, 0.0, "cp attention dk summed over ranks");
  test_assert_close(t.dv, t.dv_sum, t.kvn, 1e-5, 0.0, "cp attention dv summed over ranks");
  free(t.q), free(t.k), free(t.v), free(t.dout), free(t.out), free(t.lse), free(t.dq);
  free(t.dk), free(t.dv), free(t.ws), free(t.dk_sum), free(t.dv_sum);
}

// cp 2 and 3 on small causal GQA attentions (chunks of 6 and 4 tokens),
// plain and with a window of 5 and softcap crossing the chunks: every rank
// against the unsharded rows, finite differences at 48 inputs per tensor
// and rank.
static void test_cp_causal_window_softcap(void **state) {
  (void)state;
  srt_attention_config c = {.batch = 2, .seq = 24, .heads = 4, .kv_heads = 2,
                            .head_dim = 8, .causal = true, .scale = 0.35355339f};
  for (int64_t cp = 2; cp <= 3; cp++) {
    check_cp(&c, NULL, cp, false, 48, 20 + (uint64_t)cp);
    c.sliding_window = 5;
    c.softcap = 2.0f;
    c.scale = 1.0f; // |logits| up to ~3: softcap 2 is nonlinear
    check_cp(&c, NULL, cp, false, 48, 22 + (uint64_t)cp);
    c.sliding_window = 0, c.softcap = 0.0f, c.scale = 0.35355339f;
  }
}

// Packed documents under cp: lengths 5, 9, 7 then 3 of padding in row 0
// (boundaries inside chunks of 6 (cp 2) and 4 (cp 3), the 9 spanning
// chunk boundaries, padding in the last chunk) and 12, 12 in row 1
// (boundaries on a chunk boundary); causal, then non-causal (a query sees
// its document's later keys, held by other ranks' chunks).
static void test_cp_documents(void **state) {
  (void)state;
  srt_attention_config c = {.batch = 2, .seq = 24, .heads = 2, .kv_heads = 1,
                            .head_dim = 8, .causal = true, .scale = 0.35355339f};
  int64_t *seg = segments(2, 24, (const int64_t[][8]){{5, 9, 7, 0}, {12, 12, 0}});
  for (int64_t cp = 2; cp <= 3; cp++) {
    c.causal = true;
    check_cp(&c, seg, cp, false, 48, 30 + (uint64_t)cp);
    c.causal = false;
    check_cp(&c, seg, cp, false, 48, 32 + (uint64_t)cp);
  }
  free(seg);
}

// Multi-block and multi-tile: chunks that are a multiple of the query block
// give the unsharded bytes (seq 512, cp 2: chunks of 128, blocks of 64;
// seq 1536, cp 3 with window 300, softcap and documents across the 512-key
// tiles: chunks of 256, blocks of 128); chunks that are not (seq 600, cp 3:
// 100 against 128) agree within 1e-6. 4 finite-difference samples per
// tensor and rank at seq 512 and 600 (the float64 reference is S^2).
static void test_cp_multi_block(void **state) {
  (void)state;
  srt_attention_config c = {.batch = 1, .seq = 512, .heads = 2, .kv_heads = 1,
                            .head_dim = 8, .causal = true, .scale = 0.35355339f};
  check_cp(&c, NULL, 2, true, 4, 40);
  c.seq = 1536, c.sliding_window = 300, c.softcap = 3.0f;
  int64_t *seg = segments(1, 1536, (const int64_t[][8]){{200, 700, 400, 200, 0}});
  check_cp(&c, seg, 3, true, 0, 41);
  free(seg);
  c.seq = 600, c.sliding_window = 0, c.softcap = 0.0f;
  check_cp(&c, NULL, 3, false, 4, 42);
  // Chunks of 300: blocks of 128, 128 and 44 in each, the short one
  // followed by the other chunk's first; documents across both chunk ends.
  c.seq = 1200;
  seg = segments(1, 1200, (const int64_t[][8]){{250, 400, 500, 0}});
  check_cp(&c, seg, 2, false, 0, 43);
  free(seg);
}

// cp_size 1 (rank 0) is the unsharded attention (cp_size 0): out, lse and
// dq the same bytes, with documents, padding, window and softcap.
static void test_cp_one_same_bytes(void **state) {
  (void)state;
  srt_attention_config c = {.batch = 1, .seq = 700, .heads = 2, .kv_heads = 1,
                            .head_dim = 8, .causal = true, .scale = 0.35355339f,
                            .sliding_window = 300, .softcap = 3.0f};
  int64_t *seg = segments(1, 700, (const int64_t[][8]){{100, 500, 97, 0}});
  check_cp(&c, seg, 1, true, 0, 50);
  free(seg);
}

static void test_rejects_bad_config(void **state) {
  (void)state;
  float x = 0;
  srt_attention_config c = {.batch = 1, .seq = 4, .heads = 3, .kv_heads = 2,
                            .head_dim = 4, .causal = true, .scale = 1};
  srt_status s = srt_cpu_attention_forward(&x, &x, &x, &x, &x, NULL, &x, &c);
  assert_int_equal(srt_status_code(s), SRT_INVALID_ARGUMENT);
  srt_status_free(s);
  c.kv_heads = 3;
  c.softcap = -1;
  s = srt_cpu_attention_backward(&x, &x, &x, &x, &x, &x, &x, &x, &x, NULL, &x, &c);
  assert_int_equal(srt_status_code(s), SRT_INVALID_ARGUMENT);
  srt_status_free(s);
  // Context parallelism: 2 cp must divide seq (two chunks per rank), and
  // cp_rank lie in [0, cp_size); the message names the values.
  c.softcap = 0;
  c.cp_size = 3; // 6 does not divide 4
  s = srt_cpu_attention_forward(&x, &x, &x, &x, &x, NULL, &x, &c);
  assert_int_equal(srt_status_code(s), SRT_INVALID_ARGUMENT);
  assert_non_null(strstr(srt_status_message(s), "cp_size 3"));
  assert_non_null(strstr(srt_status_message(s), "seq 4"));
  srt_status_free(s);
  c.cp_size = 2;
  c.cp_rank = 2;
  s = srt_cpu_attention_backward(&x, &x, &x, &x, &x, &x, &x, &x, &x, NULL, &x, &c);
  assert_int_equal(srt_status_code(s), SRT_INVALID_ARGUMENT);
  assert_non_null(strstr(srt_status_message(s), "cp_rank 2"));
  srt_status_free(s);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_causal_gqa2),
      cmocka_unit_test(test_causal_gqa4_sliding_window),
      cmocka_unit_test(test_softcap),
      cmocka_unit_test(test_non_causal_and_window),
      cmocka_unit_test(test_multi_tile),
      cmocka_unit_test(test_online_softmax_across_key_tiles),
      cmocka_unit_test(test_documents_causal),
      cmocka_unit_test(test_documents_window_softcap),
      cmocka_unit_test(test_documents_across_key_tiles),
      cmocka_unit_test(test_one_document_same_bytes),
      cmocka_unit_test(test_cp_causal_window_softcap),
      cmocka_unit_test(test_cp_documents),
      cmocka_unit_test(test_cp_multi_block),
      cmocka_unit_test(test_cp_one_same_bytes),
      cmocka_unit_test(test_rejects_bad_config),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
