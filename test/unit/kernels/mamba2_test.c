// Unit tests of the Mamba2 mixer (runtime/cpu/mamba2.c): the forward
// against a float64 reference that runs the plain recurrence step by step
// (not the chunked form the kernel uses), the backward against central
// finite differences of that reference for x and every weight; sequences of
// several chunks with a short last one, one chunk, chunk 1, one group, the
// dt clamp active; the same bytes for 1 and 2 threads; refusals. Packed
// documents (segment_ids): the reference restarts the conv and the state at
// each document, finite differences check the reset backward, a packed row
// equals its documents run alone, and no ids equal constant ids bit for bit.
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

// Sizes of one case and the offsets of each part in the flat vector of
// inputs [x | in_proj | conv_w | conv_b | dt_bias | A_log | D | norm_w | out_proj].
typedef struct layout {
  srt_mamba2_config c;
  int64_t inner, conv_dim, proj, n;
  int64_t off[10];    // part i at [off[i], off[i + 1])
  const int64_t *seg; // [batch, seq] segment ids, or NULL
} layout;

static layout layout_of(srt_mamba2_config c) {
  layout l = {.c = c};
  l.inner = c.heads * c.head_dim;
  l.conv_dim = l.inner + 2 * c.groups * c.state;
  l.proj = l.inner + l.conv_dim + c.heads;
  l.n = c.batch * c.seq;
  int64_t size[9] = {l.n * c.hidden, l.proj * c.hidden, l.conv_dim * c.conv_kernel,
                     l.conv_dim, c.heads, c.heads, c.heads, l.inner, c.hidden * l.inner};
  for (int i = 0; i < 9; ++i)
    l.off[i + 1] = l.off[i] + size[i];
  return l;
}

static double sigmoid(double x) { return 1 / (1 + exp(-x)); }
static double silu(double x) { return x * sigmoid(x); }
static double softplus(double x) { return x > 20 ? x : log1p(exp(x)); }

// Whether token t of batch row b starts a document (its id differs from the
// previous token's).
static bool doc_start(const layout *l, int64_t b, int64_t t) {
  const int64_t *row = l->seg ? l->seg + b * l->c.seq : NULL;
  return row && t > 0 && row[t] != row[t - 1];
}

// out [n, hidden] from the flat inputs v, in float64, step by step; the
// conv's window and the state restart at each document (l->seg).
static void reference(double *out, const double *v, const layout *l) {
  const srt_mamba2_config *c = &l->c;
  const double *x = v + l->off[0], *win = v + l->off[1], *cw = v + l->off[2],
               *cb = v + l->off[3], *dtb = v + l->off[4], *alog = v + l->off[5],
               *D = v + l->off[6], *nw = v + l->off[7], *wout = v + l->off[8];
  int64_t S = c->seq, K = c->conv_kernel, P = c->head_dim, N = c->state, H = c->heads;
  double *proj = kt_calloc(l->n * l->proj, sizeof(double));
  double *xbc = kt_calloc(l->n * l->conv_dim, sizeof(double));
  double *y = kt_calloc(l->n * l->inner, sizeof(double));
  double *st = kt_calloc(P * N, sizeof(double));
  for (int64_t r = 0; r < l->n; ++r)
    for (int64_t o = 0; o < l->proj; ++o)
      for (int64_t i = 0; i < c->hidden; ++i)
        proj[r * l->proj + o] += x[r * c->hidden + i] * win[o * c->hidden + i];
  for (int64_t b = 0; b < c->batch; ++b)
    for (int64_t t = 0, start = 0; t < S; ++t) {
      start = doc_start(l, b, t) ? t : start;
      for (int64_t ch = 0; ch < l->conv_dim; ++ch) {
        double s = cb[ch];
        for (int64_t k = 0; k < K; ++k) {
          int64_t src = t + k - (K - 1);
          if (src >= start)
            s += cw[ch * K + k] * proj[(b * S + src) * l->proj + l->inner + ch];
        }
        xbc[(b * S + t) * l->conv_dim + ch] = silu(s);
      }
    }
  for (int64_t b = 0; b < c->batch; ++b)
    for (int64_t h = 0; h < H; ++h) {
      int64_t g = h / (H / c->groups);
      double A = -exp(alog[h]);
      memset(st, 0, (size_t)(P * N) * sizeof(double));
      for (int64_t t = 0; t < S; ++t) {
        int64_t r = b * S + t;
        if (doc_start(l, b, t))
          memset(st, 0, (size_t)(P * N) * sizeof(double));
        double dt = softplus(proj[r * l->proj + l->inner + l->conv_dim + h] + dtb[h]);
        dt = fmin(fmax(dt, (double)c->dt_min), (double)c->dt_max);
        const double *xt = xbc + r * l->conv_dim + h * P,
                     *Bt = xbc + r * l->conv_dim + l->inner + g * N,
                     *Ct = Bt + c->groups * N;
        for (int64_t p = 0; p < P; ++p) {
          double yp = D[h] * xt[p];
          for (int64_t n = 0; n < N; ++n) {
            st[p * N + n] = exp(dt * A) * st[p * N + n] + dt * xt[p] * Bt[n];
            yp += st[p * N + n] * Ct[n];
          }
          y[r * l->inner + h * P + p] = yp;
        }
      }
    }
  int64_t gs = l->inner / c->groups;
  for (int64_t r = 0; r < l->n; ++r)
    for (int64_t q = 0; q < c->groups; ++q) {
      double ss = 0;
      for (int64_t k = q * gs; k < (q + 1) * gs; ++k) {
        y[r * l->inner + k] *= silu(proj[r * l->proj + k]);
        ss += y[r * l->inner + k] * y[r * l->inner + k];
      }
      double rs = 1 / sqrt(ss / (double)gs + (double)c->eps);
      for (int64_t k = q * gs; k < (q + 1) * gs; ++k)
        y[r * l->inner + k] *= rs * nw[k];
    }
  for (int64_t r = 0; r < l->n; ++r)
    for (int64_t o = 0; o < c->hidden; ++o) {
      double s = 0;
      for (int64_t i = 0; i < l->inner; ++i)
        s += y[r * l->inner + i] * wout[o * l->inner + i];
      out[r * c->hidden + o] = s;
    }
  free(proj);
  free(xbc);
  free(y);
  free(st);
}

typedef struct fd_ctx {
  const layout *l;
  const double *cot;
} fd_ctx;

static double loss(const double *v, void *p) {
  fd_ctx *f = p;
  int64_t len = f->l->n * f->l->c.hidden;
  double *out = kt_calloc(len, sizeof(double));
  reference(out, v, f->l);
  double s = test_dot(out, f->cot, len);
  free(out);
  return s;
}

static srt_mamba2_weights weights_of(const float *v, const layout *l) {
  return (srt_mamba2_weights){v + l->off[1], v + l->off[2], v + l->off[3], v + l->off[4],
                              v + l->off[5], v + l->off[6], v + l->off[7], v + l->off[8]};
}

static srt_mamba2_grads grads_of(float *v, const layout *l) {
  return (srt_mamba2_grads){v + l->off[1], v + l->off[2], v + l->off[3], v + l->off[4],
                            v + l->off[5], v + l->off[6], v + l->off[7], v + l->off[8]};
}

// Random inputs in the ranges a trained mixer sees: dt_bias so that
// softplus lands near 1, A_log in [-1, 1.5] (A in [-4.5, -0.4]).
static void fill(float *v, const layout *l, test_rng *rng) {
  test_fill(v, l->off[9], rng, -0.5f, 0.5f);
  test_fill(v + l->off[0], l->off[1] - l->off[0], rng, -1.5f, 1.5f);
  test_fill(v + l->off[4], l->c.heads, rng, -0.5f, 1.0f);
  test_fill(v + l->off[5], l->c.heads, rng, -1.0f, 1.5f);
  test_fill(v + l->off[6], l->c.heads, rng, 0.5f, 1.5f);
  test_fill(v + l->off[7], l->inner, rng, 0.5f, 1.5f);
}

static const char *kPart[9] = {"dx",      "d in_proj", "d conv_w", "d conv_b",  "d dt_bias",
                               "d A_log", "d D",       "d norm_w", "d out_proj"};

// The forward against the reference and the backward against its finite
// differences, for the documents `seg` ([batch, seq], NULL: one per row).
static void check_docs(srt_mamba2_config c, uint64_t seed, const int64_t *seg) {
  layout l = layout_of(c);
  l.seg = seg;
  test_rng rng = {seed};
  int64_t total = l.off[9], out_len = l.n * c.hidden;
  float *v = kt_calloc(total, sizeof(float)), *out = kt_calloc(out_len, sizeof(float));
  float *cot = kt_calloc(out_len, sizeof(float)), *grad = kt_calloc(total, sizeof(float));
  float *grad0 = kt_calloc(total, sizeof(float));
  fill(v, &l, &rng);
  test_fill(cot, out_len, &rng, -1, 1);
  test_fill(grad0, total, &rng, -1, 1);
  memcpy(grad, grad0, (size_t)total * sizeof(float));
  int64_t ws_n = srt_cpu_mamba2_workspace_floats(&c, true);
  assert_true(ws_n > 0);
  assert_true(srt_cpu_mamba2_workspace_floats(&c, false) <= ws_n);
  float *ws = kt_calloc(ws_n, sizeof(float));
  srt_mamba2_weights w = weights_of(v, &l);
  assert_null(srt_cpu_mamba2_forward(out, v, seg, &w, ws, &c));

  double *vd = test_to_double(v, total), *want = kt_calloc(out_len, sizeof(double));
  reference(want, vd, &l);
  // fp32 roundings of O(1) values through about ten stages, the scan's sums
  // in another order: 2e-5 absolute + 2e-5 relative.
  test_assert_close(out, want, out_len, 2e-5, 2e-5, "mamba2 forward");

  srt_mamba2_grads g = grads_of(grad, &l);
  assert_null(srt_cpu_mamba2_backward(grad + l.off[0], &g, cot, v, seg, &w, ws, &c));
  fd_ctx f = {&l, test_to_double(cot, out_len)};
  double *fd = kt_calloc(total, sizeof(double));
  test_fd_gradient(loss, &f, vd, total, 1e-6, fd);
  for (int64_t i = l.off[1]; i < total; ++i) // weights accumulate onto grad0
    fd[i] += grad0[i];
  // Gradients sum O(100) fp32 products: 1e-4 absolute + 1e-4 relative.
  for (int part = 0; part < 9; ++part)
    test_assert_close(grad + l.off[part], fd + l.off[part], l.off[part + 1] - l.off[part],
                      1e-4, 1e-4, kPart[part]);
  free(v);
  free(out);
  free(cot);
  free(grad);
  free(grad0);
  free(ws);
  free(vd);
  free(want);
  free((void *)f.cot);
  free(fd);
}

static void check_case(srt_mamba2_config c, uint64_t seed) { check_docs(c, seed, NULL); }

static srt_mamba2_config base(void) {
  return (srt_mamba2_config){.batch = 2, .seq = 11, .hidden = 6, .heads = 4, .head_dim = 3,
                             .groups = 2, .state = 5, .conv_kernel = 4, .chunk = 4,
                             .eps = 1e-5f, .dt_min = 0.0f, .dt_max = INFINITY};
}

static void test_several_chunks(void **state) {
  (void)state;
  check_case(base(), 1); // chunks of 4, 4, 3
}

static void test_one_chunk_and_chunk_one(void **state) {
  (void)state;
  srt_mamba2_config c = base();
  c.chunk = 16;
  check_case(c, 2);
  // A chunk far past the sequence costs no more scratch than one of its
  // length (the scan's tiles are sized by what they hold).
  srt_mamba2_config whole = c;
  whole.chunk = c.seq;
  c.chunk = 100000;
  assert_int_equal(srt_cpu_mamba2_workspace_floats(&c, true),
                   srt_cpu_mamba2_workspace_floats(&whole, true));
  check_case(c, 8);
  c.chunk = 1;
  check_case(c, 3);
}

static void test_one_group_short_kernel(void **state) {
  (void)state;
  srt_mamba2_config c = base();
  c.groups = 1;
  c.conv_kernel = 2;
  c.seq = 9;
  check_case(c, 4);
}

static void test_dt_clamped(void **state) {
  (void)state;
  // softplus of dt_bias + O(0.5) spans about [0.3, 1.6]: both bounds bind.
  srt_mamba2_config c = base();
  c.dt_min = 0.6f;
  c.dt_max = 1.2f;
  check_case(c, 5);
}

// The chunking changes the order of the sums, not the values; the thread
// count changes nothing.
static void test_chunk_and_thread_invariance(void **state) {
  (void)state;
  srt_mamba2_config c = base();
  c.seq = 23;
  layout l = layout_of(c);
  test_rng rng = {6};
  float *v = kt_calloc(l.off[9], sizeof(float));
  fill(v, &l, &rng);
  srt_mamba2_weights w = weights_of(v, &l);
  int64_t out_len = l.n * c.hidden;
  float *a = kt_calloc(out_len, sizeof(float)), *b = kt_calloc(out_len, sizeof(float));
  int threads = srt_cpu_threads();
  srt_mamba2_config whole = c;
  whole.chunk = 64;
  // The largest of the three runs' workspaces (2 threads, the long chunk).
  srt_cpu_set_threads(2);
  float *ws = kt_calloc(srt_cpu_mamba2_workspace_floats(&whole, true), sizeof(float));
  srt_cpu_set_threads(1);
  assert_null(srt_cpu_mamba2_forward(a, v, NULL, &w, ws, &c));
  srt_cpu_set_threads(2);
  assert_null(srt_cpu_mamba2_forward(b, v, NULL, &w, ws, &c));
  assert_memory_equal(a, b, (size_t)out_len * sizeof(float));
  srt_cpu_set_threads(threads);
  assert_null(srt_cpu_mamba2_forward(b, v, NULL, &w, ws, &whole));
  double *ad = test_to_double(a, out_len);
  test_assert_close(b, ad, out_len, 1e-5, 1e-5, "chunk 4 vs one chunk");
  free(v);
  free(a);
  free(b);
  free(ws);
  free(ad);
}

// Megatron's split: rank r of tp takes its slice of every part of in_proj's
// rows [z, x, B, C, dt] and conv1d's channels [x, B, C], its heads of
// dt_bias, A_log, D and the norm, its columns of out_proj; the local mixers
// (heads / tp, groups / tp) sum to the whole one's output.
static void slice_rows(float *dst, const float *src, const int64_t *parts, int n, int64_t cols,
                       int64_t tp, int64_t r) {
  int64_t full = 0;
  for (int b = 0; b < n; ++b) {
    int64_t rows = parts[b] / tp;
    memcpy(dst, src + (full + r * rows) * cols, (size_t)(rows * cols) * sizeof(float));
    dst += rows * cols;
    full += parts[b];
  }
}

static void test_tensor_parallel_split(void **state) {
  (void)state;
  srt_mamba2_config c = base();
  c.heads = 8;
  c.head_dim = 2;
  c.groups = 4;
  layout l = layout_of(c);
  test_rng rng = {7};
  float *v = kt_calloc(l.off[9], sizeof(float));
  fill(v, &l, &rng);
  srt_mamba2_weights w = weights_of(v, &l);
  int64_t out_len = l.n * c.hidden;
  float *want = kt_calloc(out_len, sizeof(float)), *part = kt_calloc(out_len, sizeof(float));
  double *sum = kt_calloc(out_len, sizeof(double));
  float *ws = kt_calloc(srt_cpu_mamba2_workspace_floats(&c, true), sizeof(float));
  assert_null(srt_cpu_mamba2_forward(want, v, NULL, &w, ws, &c));
  const int64_t tp = 2, gn = c.groups * c.state;
  srt_mamba2_config lc = c;
  lc.heads /= tp;
  lc.groups /= tp;
  layout ll = layout_of(lc);
  float *lv = kt_calloc(ll.off[9], sizeof(float));
  for (int64_t r = 0; r < tp; ++r) {
    const int64_t in_parts[5] = {l.inner, l.inner, gn, gn, c.heads};
    const int64_t conv_parts[3] = {l.inner, gn, gn};
    memcpy(lv, v, (size_t)l.off[1] * sizeof(float)); // x
    slice_rows(lv + ll.off[1], v + l.off[1], in_parts, 5, c.hidden, tp, r);
    slice_rows(lv + ll.off[2], v + l.off[2], conv_parts, 3, c.conv_kernel, tp, r);
    slice_rows(lv + ll.off[3], v + l.off[3], conv_parts, 3, 1, tp, r);
    for (int k = 4; k <= 6; ++k)
      slice_rows(lv + ll.off[k], v + l.off[k], &c.heads, 1, 1, tp, r);
    slice_rows(lv + ll.off[7], v + l.off[7], &l.inner, 1, 1, tp, r);
    for (int64_t o = 0; o < c.hidden; ++o) // out_proj's columns
      memcpy(lv + ll.off[8] + o * ll.inner, v + l.off[8] + o * l.inner + r * ll.inner,
             (size_t)ll.inner * sizeof(float));
    srt_mamba2_weights lw = weights_of(lv, &ll);
    assert_null(srt_cpu_mamba2_forward(part, lv, NULL, &lw, ws, &lc));
    for (int64_t i = 0; i < out_len; ++i)
      sum[i] += part[i];
  }
  test_assert_close(want, sum, out_len, 1e-6, 1e-5, "tp=2 parts summed vs the whole mixer");
  free(v);
  free(want);
  free(part);
  free(sum);
  free(ws);
  free(lv);
}

//===----------------------------------------------------------------------===//
// Packed documents
//===----------------------------------------------------------------------===//

// Row b of a [batch, seq] id array from document lengths (summing to seq),
// the ids given (any values: only a change starts a document).
static void ids_of(int64_t *row, const int64_t *lengths, const int64_t *ids, int docs) {
  for (int d = 0, t = 0; d < docs; ++d)
    for (int64_t k = 0; k < lengths[d]; ++k)
      row[t++] = ids[d];
}

// Documents starting inside a chunk of 4 (3, 9), at a chunk's edge (4, 8),
// two in one chunk (8 and 9), one of a single token, a trailing padding
// token (-1); ids that repeat a value two documents later (4 .. 4).
static void test_documents_finite_differences(void **state) {
  (void)state;
  srt_mamba2_config c = base(); // batch 2, seq 11
  int64_t seg[22];
  ids_of(seg, (const int64_t[]){3, 5, 1, 2}, (const int64_t[]){4, 9, 2, 4}, 4);
  ids_of(seg + 11, (const int64_t[]){4, 6, 1}, (const int64_t[]){0, 1, -1}, 3);
  check_docs(c, 11, seg);
  c.chunk = 16; // one chunk: every start inside it
  check_docs(c, 12, seg);
  c.chunk = 1; // every start at a chunk's edge
  check_docs(c, 13, seg);
  c = base();
  c.conv_kernel = 2;
  c.dt_min = 0.6f; // the clamp's zero gradient across starts too
  check_docs(c, 14, seg);
}

// One packed run and its documents run alone (batch 1, seq = the
// document's length, the same weights and chunk): outputs and dx per token,
// weight gradients summed over the documents.
typedef struct doc {
  int64_t b, start, len;
} doc;

static void run_alone(const doc *d, srt_mamba2_config c, const float *v, const layout *l,
                      const float *cot, float *out, float *grad) {
  c.batch = 1;
  c.seq = d->len;
  layout one = layout_of(c);
  int64_t rows = d->len * c.hidden, at = (d->b * l->c.seq + d->start) * c.hidden;
  float *lv = kt_calloc(one.off[9], sizeof(float));
  float *ws = kt_calloc(srt_cpu_mamba2_workspace_floats(&c, true), sizeof(float));
  memcpy(lv, v + at, (size_t)rows * sizeof(float));
  memcpy(lv + one.off[1], v + l->off[1], (size_t)(l->off[9] - l->off[1]) * sizeof(float));
  srt_mamba2_weights w = weights_of(lv, &one);
  assert_null(srt_cpu_mamba2_forward(out, lv, NULL, &w, ws, &c));
  memset(grad, 0, (size_t)one.off[9] * sizeof(float));
  srt_mamba2_grads g = grads_of(grad, &one);
  assert_null(srt_cpu_mamba2_backward(grad, &g, cot + at, lv, NULL, &w, ws, &c));
  free(lv);
  free(ws);
}

static void check_packed(srt_mamba2_config c, const int64_t *seg, const doc *docs, int ndocs,
                         uint64_t seed) {
  layout l = layout_of(c);
  l.seg = seg;
  test_rng rng = {seed};
  int64_t total = l.off[9], out_len = l.n * c.hidden, H = c.hidden;
  float *v = kt_calloc(total, sizeof(float)), *out = kt_calloc(out_len, sizeof(float));
  float *cot = kt_calloc(out_len, sizeof(float)), *grad = kt_calloc(total, sizeof(float));
  float *ws = kt_calloc(srt_cpu_mamba2_workspace_floats(&c, true), sizeof(float));
  fill(v, &l, &rng);
  test_fill(cot, out_len, &rng, -1, 1);
  srt_mamba2_weights w = weights_of(v, &l);
  assert_null(srt_cpu_mamba2_forward(out, v, seg, &w, ws, &c));
  srt_mamba2_grads g = grads_of(grad, &l);
  assert_null(srt_cpu_mamba2_backward(grad, &g, cot, v, seg, &w, ws, &c));
  double *want = kt_calloc(total, sizeof(double)); // [dx | weight gradients summed]
  double *want_out = kt_calloc(out_len, sizeof(double));
  float *one_out = kt_calloc(out_len, sizeof(float)), *one_grad = kt_calloc(total, sizeof(float));
  for (int k = 0; k < ndocs; ++k) {
    const doc *d = &docs[k];
    int64_t at = (d->b * c.seq + d->start) * H, rows = d->len * H;
    run_alone(d, c, v, &l, cot, one_out, one_grad);
    for (int64_t i = 0; i < rows; ++i) {
      want_out[at + i] = one_out[i];
      want[at + i] = one_grad[i];
    }
    for (int64_t i = l.off[1]; i < total; ++i)
      want[i] += one_grad[i - l.off[1] + rows];
  }
  // The same math; the packed run's decay sums S_i run on from earlier
  // documents of the chunk, and its chunks cut each document elsewhere:
  // fp32 roundings only (seen: 4e-7 on outputs of O(0.3), 6e-6 on weight
  // gradients of O(1) summed over 48 tokens): outputs 1e-5, gradients 5e-5
  // (absolute + relative each).
  test_assert_close(out, want_out, out_len, 1e-5, 1e-5, "packed forward vs documents alone");
  for (int part = 0; part < 9; ++part)
    test_assert_close(grad + l.off[part], want + l.off[part], l.off[part + 1] - l.off[part],
                      5e-5, 5e-5, kPart[part]);
  free(v);
  free(out);
  free(cot);
  free(grad);
  free(ws);
  free(want);
  free(want_out);
  free(one_out);
  free(one_grad);
}

// Two rows of 24 tokens in chunks of 4 (and of 8): documents of unequal
// lengths starting inside chunks and exactly at chunk edges (8, 16; 4 and
// 12 in the second row), one of a single token.
static void test_packed_row_equals_documents_alone(void **state) {
  (void)state;
  srt_mamba2_config c = base();
  c.seq = 24;
  const int64_t len0[5] = {5, 3, 8, 1, 7}, len1[4] = {4, 8, 5, 7};
  int64_t seg[48];
  ids_of(seg, len0, (const int64_t[]){0, 1, 2, 3, 4}, 5);
  ids_of(seg + 24, len1, (const int64_t[]){0, 1, 2, -1}, 4);
  doc docs[9];
  int n = 0;
  for (int b = 0; b < 2; ++b)
    for (int64_t k = 0, start = 0; k < (b ? 4 : 5); start += (b ? len1 : len0)[k++])
      docs[n++] = (doc){b, start, (b ? len1 : len0)[k]};
  check_packed(c, seg, docs, n, 21);
  c.chunk = 8;
  c.groups = 1;
  check_packed(c, seg, docs, n, 22);
}

// Ids that never change take the NULL path's every rounding: the same
// bytes forward and backward, for several chunks.
static void test_constant_ids_bitwise(void **state) {
  (void)state;
  srt_mamba2_config c = base();
  c.seq = 23;
  layout l = layout_of(c);
  test_rng rng = {31};
  int64_t total = l.off[9], out_len = l.n * c.hidden;
  float *v = kt_calloc(total, sizeof(float)), *cot = kt_calloc(out_len, sizeof(float));
  float *out[3], *grad[3];
  float *ws = kt_calloc(srt_cpu_mamba2_workspace_floats(&c, true), sizeof(float));
  fill(v, &l, &rng);
  test_fill(cot, out_len, &rng, -1, 1);
  int64_t zeros[46] = {0}, sevens[46];
  for (int i = 0; i < 46; ++i)
    sevens[i] = 7;
  const int64_t *seg[3] = {NULL, zeros, sevens};
  srt_mamba2_weights w = weights_of(v, &l);
  for (int k = 0; k < 3; ++k) {
    out[k] = kt_calloc(out_len, sizeof(float));
    grad[k] = kt_calloc(total, sizeof(float));
    srt_mamba2_grads g = grads_of(grad[k], &l);
    assert_null(srt_cpu_mamba2_forward(out[k], v, seg[k], &w, ws, &c));
    assert_null(srt_cpu_mamba2_backward(grad[k], &g, cot, v, seg[k], &w, ws, &c));
  }
  for (int k = 1; k < 3; ++k) {
    assert_memory_equal(out[0], out[k], (size_t)out_len * sizeof(float));
    assert_memory_equal(grad[0], grad[k], (size_t)total * sizeof(float));
  }
  for (int k = 0; k < 3; ++k) {
    free(out[k]);
    free(grad[k]);
  }
  free(v);
  free(cot);
  free(ws);
}

static void test_refusals(void **state) {
  (void)state;
  srt_mamba2_config c = base();
  c.groups = 3;
  assert_int_equal(srt_cpu_mamba2_workspace_floats(&c, false), -1);
  float dummy[4];
  srt_mamba2_weights w = {0};
  srt_status s = srt_cpu_mamba2_forward(dummy, dummy, NULL, &w, dummy, &c);
  assert_non_null(s);
  assert_non_null(strstr(srt_status_message(s), "heads 4 is not a multiple of groups 3"));
  srt_status_free(s);
  c = base();
  c.chunk = 0;
  s = srt_cpu_mamba2_forward(dummy, dummy, NULL, &w, dummy, &c);
  assert_non_null(s);
  assert_non_null(strstr(srt_status_message(s), "chunk 0"));
  srt_status_free(s);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_several_chunks),
      cmocka_unit_test(test_one_chunk_and_chunk_one),
      cmocka_unit_test(test_one_group_short_kernel),
      cmocka_unit_test(test_dt_clamped),
      cmocka_unit_test(test_chunk_and_thread_invariance),
      cmocka_unit_test(test_tensor_parallel_split),
      cmocka_unit_test(test_documents_finite_differences),
      cmocka_unit_test(test_packed_row_equals_documents_alone),
      cmocka_unit_test(test_constant_ids_bitwise),
      cmocka_unit_test(test_refusals),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
