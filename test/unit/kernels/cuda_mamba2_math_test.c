// Unit test of the cuda Mamba2 kernels' math without a GPU: the functions of
// runtime/cuda/kernels/mamba2_math.h, which kernels/mamba2.cu runs on the
// device, run here on the host with the kernels' decomposition (every
// element of each elementwise launch; each scan block as one thread, tid 0
// of 1, its phases in the block's order), the in_proj / out_proj GEMMs by
// the cpu's linear kernels, all in fp32; against the cpu backend's mixer
// (runtime/cpu/mamba2.c, the chunked SSD form), whose workspace keeps its
// intermediates. Inputs are bf16-rounded, as on the GPU. Cases: chunks of
// 4, 4, 3 with 2 groups, packed documents with a one-token document and the
// dt clamp active.
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kernel_testing.h"
#include "mamba2_math.h"
#include "shardrt/kernels.h"

// Sizes of one case and its inputs [x | in_proj | conv_w | conv_b | dt_bias
// | A_log | D | norm_w | out_proj] (part i at [off[i], off[i + 1])).
typedef struct mixer {
  srt_mamba2_config c;
  m2_dims d;
  int64_t n, off[10];
  float *v;
  const int64_t *seg;
} mixer;

static float bf16_round(float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  u += 0x7FFF + ((u >> 16) & 1); // nearest even (finite inputs)
  u &= 0xFFFF0000u;
  memcpy(&f, &u, 4);
  return f;
}

static mixer mixer_of(srt_mamba2_config c, const int64_t *seg, uint64_t seed) {
  mixer m = {.c = c, .seg = seg};
  m.d = m2_dims_make(c.batch, c.seq, c.heads, c.head_dim, c.groups, c.state, c.conv_kernel,
                     c.eps, c.dt_min, c.dt_max);
  m.n = c.batch * c.seq;
  int64_t size[9] = {m.n * c.hidden, m.d.proj * c.hidden, m.d.conv_dim * c.conv_kernel,
                     m.d.conv_dim, c.heads, c.heads, c.heads, m.d.inner, c.hidden * m.d.inner};
  for (int i = 0; i < 9; ++i)
    m.off[i + 1] = m.off[i] + size[i];
  m.v = kt_calloc(m.off[9], sizeof(float));
  test_rng rng = {seed};
  // The ranges of runtime/cpu's test: softplus(dt) near 1, A in [-4.5, -0.4].
  test_fill(m.v, m.off[9], &rng, -0.5f, 0.5f);
  test_fill(m.v, m.off[1], &rng, -1.5f, 1.5f);
  test_fill(m.v + m.off[4], c.heads, &rng, -0.5f, 1.0f);
  test_fill(m.v + m.off[5], c.heads, &rng, -1.0f, 1.5f);
  test_fill(m.v + m.off[6], c.heads, &rng, 0.5f, 1.5f);
  test_fill(m.v + m.off[7], m.d.inner, &rng, 0.5f, 1.5f);
  for (int64_t i = 0; i < m.off[9]; ++i)
    m.v[i] = bf16_round(m.v[i]);
  return m;
}

static const float *part_of(const mixer *m, int i) { return m->v + m->off[i]; }

// The cpu backend's workspace parts (srt_mamba2_workspace_parts' order).
enum { W_PROJ, W_XBC, W_DT, W_Y, W_NORMED, W_STATES, W_DPROJ, W_DXBC, W_DDT, W_DY };

static float *ws_part(float *ws, const srt_mamba2_config *c, bool backward, int part) {
  double count[SRT_MAMBA2_WORKSPACE_PARTS], at = 0;
  srt_mamba2_workspace_parts(c, backward, srt_cpu_threads(), count);
  for (int i = 0; i < part; ++i)
    at += count[i];
  return ws + (int64_t)at;
}

// Max |got - want| / max(max |want|, 1e-30): the kernels' tests' measure.
static double rel_err(const float *got, const float *want, int64_t n) {
  double err = 0, scale = 1e-30;
  for (int64_t i = 0; i < n; ++i) {
    double e = fabs((double)got[i] - want[i]);
    err = e > err || isnan(e) ? e : err;
    scale = fabs(want[i]) > scale ? fabs(want[i]) : scale;
  }
  return err / scale;
}

static void expect_close(const float *got, const float *want, int64_t n, double tol,
                         const char *what) {
  double e = rel_err(got, want, n);
  print_message("%-28s relative error %.3g (tolerance %.0e)\n", what, e, tol);
  assert_true(e <= tol);
}

// The host run of the forward kernels up to the norm (what the op's
// forward and backward both do first): proj, xbc, dt, y, normed, rstd.
typedef struct acts {
  float *proj, *xbc, *dt, *y, *normed, *rstd, *sm;
} acts;

static acts forward_acts(const mixer *m) {
  const m2_dims *d = &m->d;
  acts a = {kt_calloc(m->n * d->proj, 4), kt_calloc(m->n * d->conv_dim, 4),
            kt_calloc(m->n * d->heads, 4), kt_calloc(m->n * d->inner, 4),
            kt_calloc(m->n * d->inner, 4), kt_calloc(m->n * d->groups, 4),
            kt_calloc(m2_scan_smem_floats(d), 4)};
  assert_null(srt_cpu_linear_forward(a.proj, part_of(m, 0), part_of(m, 1), NULL, m->n,
                                     m->c.hidden, d->proj));
  for (int64_t i = 0; i < m->n * d->conv_dim; ++i)
    m2_conv_forward_at(a.xbc, a.proj, m->seg, part_of(m, 2), part_of(m, 3), d, i);
  for (int64_t i = 0; i < m->n * d->heads; ++i)
    m2_dt_forward_at(a.dt, a.proj, part_of(m, 4), d, i);
  for (int64_t b = 0; b < d->batch; ++b)
    for (int64_t h = 0; h < d->heads; ++h)
      m2_scan_forward(a.y, a.xbc, a.dt, m->seg, part_of(m, 5), part_of(m, 6), d, b, h, a.sm, 0,
                      1);
  int64_t gs = d->inner / d->groups;
  for (int64_t i = 0; i < m->n * d->groups; ++i) {
    int64_t r = i / d->groups, q = i % d->groups;
    a.rstd[i] = m2_norm_rstd(a.y, a.proj, d, r, q);
    for (int64_t k = q * gs; k < (q + 1) * gs; ++k)
      a.normed[r * d->inner + k] = m2_norm_out(a.y, a.proj, part_of(m, 7), a.rstd[i], d, r, k);
  }
  return a;
}

static void free_acts(acts *a) {
  float *p[] = {a->proj, a->xbc, a->dt, a->y, a->normed, a->rstd, a->sm};
  for (size_t i = 0; i < sizeof p / sizeof p[0]; ++i)
    free(p[i]);
}

// fp32 through both: the cpu's chunked sums against the recurrence's
// token-by-token sums, of O(1) values over about seq x state = 55 terms:
// 55 x 2^-24 = 3e-6 relative at worst, 1.1e-7 measured; a wrong decay,
// reset or index is O(1).
static const double kTolForward = 3e-6;
// The backward adds sums over the sequence (dS's suffix sums, the weights'
// sums over rows, cancelling terms in dS): ten times that (2.6e-6 measured).
static const double kTolBackward = 3e-5;

static void check_forward(const mixer *m) {
  const srt_mamba2_config *c = &m->c;
  float *ws = kt_calloc(srt_cpu_mamba2_workspace_floats(c, false), 4);
  float *want = kt_calloc(m->n * c->hidden, 4), *got = kt_calloc(m->n * c->hidden, 4);
  srt_mamba2_weights w = {part_of(m, 1), part_of(m, 2), part_of(m, 3), part_of(m, 4),
                          part_of(m, 5), part_of(m, 6), part_of(m, 7), part_of(m, 8)};
  assert_null(srt_cpu_mamba2_forward(want, part_of(m, 0), m->seg, &w, ws, c));
  acts a = forward_acts(m);
  assert_null(srt_cpu_linear_forward(got, a.normed, part_of(m, 8), NULL, m->n, m->d.inner,
                                     c->hidden));
  expect_close(a.xbc, ws_part(ws, c, false, W_XBC), m->n * m->d.conv_dim, kTolForward,
               "conv1d + SiLU");
  expect_close(a.dt, ws_part(ws, c, false, W_DT), m->n * c->heads, kTolForward, "dt");
  expect_close(a.y, ws_part(ws, c, false, W_Y), m->n * m->d.inner, kTolForward, "scan y");
  expect_close(a.normed, ws_part(ws, c, false, W_NORMED), m->n * m->d.inner, kTolForward,
               "gated norm");
  expect_close(got, want, m->n * c->hidden, kTolForward, "mixer output");
  free_acts(&a);
  free(ws);
  free(want);
  free(got);
}

// The scan's gradient as the op runs it: per batch row, both sweeps of
// every head, then the group sums; then the per-head A_log and D.
static void scan_backward(float *dxbc, float *ddt, float *dA_log, float *dD, const float *dy,
                          const acts *a, const mixer *m) {
  const m2_dims *d = &m->d;
  float *part = kt_calloc(d->seq * d->heads * 2 * d->state, 4);
  float *ds = kt_calloc(d->seq * d->heads, 4), *dA_part = kt_calloc(d->batch * d->heads, 4);
  float *dD_part = kt_calloc(d->batch * d->heads, 4);
  for (int64_t b = 0; b < d->batch; ++b) {
    for (int64_t h = 0; h < d->heads; ++h)
      m2_scan_backward_states(part, ds, dy, a->xbc, a->dt, m->seg, part_of(m, 5),
                              part_of(m, 6), d, b, h, a->sm, 0, 1);
    for (int64_t h = 0; h < d->heads; ++h)
      m2_scan_backward_adjoint(dxbc, part, ddt, dA_part, dD_part, ds, dy, a->xbc, a->dt,
                               m->seg, part_of(m, 5), part_of(m, 6), d, b, h, a->sm, 0, 1);
    for (int64_t i = 0; i < d->seq * d->groups * 2 * d->state; ++i)
      m2_group_sum_at(dxbc, part, d, b, i);
  }
  for (int64_t h = 0; h < d->heads; ++h)
    m2_head_grads_at(dA_log, dD, dA_part, dD_part, part_of(m, 5), d, h);
  free(part);
  free(ds);
  free(dA_part);
  free(dD_part);
}

// The conv's and dt's gradients: dproj's xBC and dt columns and the conv
// weight, conv bias and dt_bias gradients (dxbc becomes dpre).
static void conv_dt_backward(float *dproj, float *const grads[], float *dxbc, const float *ddt,
                             const acts *a, const mixer *m) {
  const m2_dims *d = &m->d;
  for (int64_t i = 0; i < m->n * d->heads; ++i)
    m2_dt_backward_at(dproj, ddt, a->proj, part_of(m, 4), d, i);
  for (int64_t h = 0; h < d->heads; ++h)
    m2_column_sum_at(grads[4], dproj + d->inner + d->conv_dim, d->proj, m->n, h);
  for (int64_t i = 0; i < m->n * d->conv_dim; ++i)
    m2_conv_dpre_at(dxbc, a->proj, m->seg, part_of(m, 2), part_of(m, 3), d, i);
  for (int64_t i = 0; i < m->n * d->conv_dim; ++i)
    m2_conv_dinput_at(dproj, dxbc, m->seg, part_of(m, 2), d, i);
  for (int64_t i = 0; i < d->conv_dim * d->conv_kernel; ++i)
    m2_conv_dweight_at(grads[2], dxbc, a->proj, m->seg, d, i);
  for (int64_t ch = 0; ch < d->conv_dim; ++ch)
    m2_column_sum_at(grads[3], dxbc, d->conv_dim, m->n, ch);
}

static const char *kGrad[9] = {"dx",      "d in_proj", "d conv_w", "d conv_b",  "d dt_bias",
                               "d A_log", "d D",       "d norm_w", "d out_proj"};

// The cpu's gradients (its weight gradients accumulate onto zeros) against
// the host run of the kernels', and the intermediates of both.
static void check_backward(const mixer *m, uint64_t seed) {
  const srt_mamba2_config *c = &m->c;
  const m2_dims *d = &m->d;
  float *ws = kt_calloc(srt_cpu_mamba2_workspace_floats(c, true), 4);
  float *want = kt_calloc(m->off[9], 4), *got = kt_calloc(m->off[9], 4);
  float *dout = kt_calloc(m->n * c->hidden, 4);
  test_rng rng = {seed};
  test_fill(dout, m->n * c->hidden, &rng, -1, 1);
  for (int64_t i = 0; i < m->n * c->hidden; ++i)
    dout[i] = bf16_round(dout[i]);
  srt_mamba2_weights w = {part_of(m, 1), part_of(m, 2), part_of(m, 3), part_of(m, 4),
                          part_of(m, 5), part_of(m, 6), part_of(m, 7), part_of(m, 8)};
  float *gw[9];
  for (int i = 0; i < 9; ++i)
    gw[i] = got + m->off[i];
  srt_mamba2_grads g = {want + m->off[1], want + m->off[2], want + m->off[3], want + m->off[4],
                        want + m->off[5], want + m->off[6], want + m->off[7], want + m->off[8]};
  assert_null(srt_cpu_mamba2_backward(want, &g, dout, part_of(m, 0), m->seg, &w, ws, c));

  acts a = forward_acts(m);
  float *dnormed = kt_calloc(m->n * d->inner, 4), *dy = kt_calloc(m->n * d->inner, 4);
  float *dproj = kt_calloc(m->n * d->proj, 4), *dxbc = kt_calloc(m->n * d->conv_dim, 4);
  float *ddt = kt_calloc(m->n * d->heads, 4);
  assert_null(srt_cpu_linear_backward(dnormed, gw[8], NULL, dout, a.normed, part_of(m, 8),
                                      m->n, d->inner, c->hidden));
  for (int64_t i = 0; i < m->n * d->groups; ++i)
    m2_norm_backward_at(dy, dproj, dnormed, a.rstd, a.y, a.proj, part_of(m, 7), d, i);
  for (int64_t k = 0; k < d->inner; ++k)
    m2_norm_dweight_at(gw[7], dnormed, a.rstd, a.y, a.proj, d, k);
  scan_backward(dxbc, ddt, gw[5], gw[6], dy, &a, m);
  expect_close(dy, ws_part(ws, c, true, W_DY), m->n * d->inner, kTolBackward, "scan dy (norm grad)");
  expect_close(ddt, ws_part(ws, c, true, W_DDT), m->n * d->heads, kTolBackward, "scan ddt");
  conv_dt_backward(dproj, gw, dxbc, ddt, &a, m);
  expect_close(dxbc, ws_part(ws, c, true, W_DXBC), m->n * d->conv_dim, kTolBackward, "conv dpre");
  expect_close(dproj, ws_part(ws, c, true, W_DPROJ), m->n * d->proj, kTolBackward, "d proj");
  assert_null(srt_cpu_linear_backward(gw[0], gw[1], NULL, dproj, part_of(m, 0), part_of(m, 1),
                                      m->n, c->hidden, d->proj));
  for (int i = 0; i < 9; ++i)
    expect_close(gw[i], want + m->off[i], m->off[i + 1] - m->off[i], kTolBackward, kGrad[i]);
  free_acts(&a);
  float *p[] = {ws, want, got, dout, dnormed, dy, dproj, dxbc, ddt};
  for (size_t i = 0; i < sizeof p / sizeof p[0]; ++i)
    free(p[i]);
}

static srt_mamba2_config base(void) {
  return (srt_mamba2_config){.batch = 2, .seq = 11, .hidden = 6, .heads = 4, .head_dim = 3,
                             .groups = 2, .state = 5, .conv_kernel = 4, .chunk = 4,
                             .eps = 1e-5f, .dt_min = 0.0f, .dt_max = INFINITY};
}

static void test_one_document_per_row(void **state) {
  (void)state;
  mixer m = mixer_of(base(), NULL, 11);
  check_forward(&m);
  check_backward(&m, 12);
  free(m.v);
}

// Row 0: documents of 3, 1 (one token) and 7 tokens; row 1: 6 and 5, the
// second across a chunk border; dt clamped at 1.2 for part of the tokens.
static void test_packed_documents_and_clamp(void **state) {
  (void)state;
  static const int64_t seg[22] = {4, 4, 4, 9, 2, 2, 2, 2, 2, 2, 2,
                                  1, 1, 1, 1, 1, 1, 3, 3, 3, 3, 3};
  srt_mamba2_config c = base();
  c.dt_max = 1.2f;
  c.dt_min = 0.3f;
  mixer m = mixer_of(c, seg, 21);
  check_forward(&m);
  check_backward(&m, 22);
  free(m.v);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_one_document_per_row),
      cmocka_unit_test(test_packed_documents_and_clamp),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
