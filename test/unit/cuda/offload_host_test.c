// The host half of --cpu-offload (runtime/cuda/offload.c), which needs no
// GPU: AdamW over a program's parameters in the host copy of the
// persistent region, laid out as lower-to-runtime lays out an offloaded
// program (weights and moments in the host-only prefix, then gradients,
// then bf16 copies), against a float64 torch.optim.AdamW over 3 steps with
// clipping; the bf16 copies against a bit-level round to nearest even and
// the device's NaN; the same bytes for 1, 2 and 3 threads; bad arguments
// refused.
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "../runtime/runtime_test_util.h"
#include "offload.h"

// Three parameters: a matrix large enough to be threaded (> 2^16 elements
// and several AdamW chunks), a vector whose bytes are not a multiple of the
// alignment, and one element.
enum { kParams = 3, kSteps = 3 };
static const int64_t kNumel[kParams] = {300 * 257, 37, 1};

static int64_t align64(int64_t b) { return (b + 63) / 64 * 64; }

typedef struct fixture {
  srt_param_info params[kParams];
  srt_program program;
  uint8_t *host;
  int64_t bytes;
} fixture;

static void build(fixture *f) {
  memset(f, 0, sizeof *f);
  int64_t master = 0, grads = 0;
  for (int i = 0; i < kParams; ++i) {
    master += 3 * align64(4 * kNumel[i]);
    grads += align64(4 * kNumel[i]);
  }
  int64_t at_master = 0, at_grad = master, at_copy = master + grads;
  for (int i = 0; i < kParams; ++i) {
    srt_param_info *p = &f->params[i];
    p->name = i == 0 ? "w" : i == 1 ? "b" : "s";
    p->rank = 1;
    p->global_shape[0] = p->local_shape[0] = kNumel[i];
    int64_t b = align64(4 * kNumel[i]);
    p->offset = at_master;
    p->m_offset = at_master + b;
    p->v_offset = at_master + 2 * b;
    at_master += 3 * b;
    p->grad_offset = at_grad;
    at_grad += b;
    p->compute_offset = at_copy;
    at_copy += align64(2 * kNumel[i]);
  }
  f->bytes = at_copy;
  f->program = (srt_program){.abi = SRT_PROGRAM_ABI, .num_params = kParams,
                             .params = f->params, .persistent_bytes = at_copy,
                             .offload_bytes = master};
  f->host = aligned_alloc(64, (size_t)align64(f->bytes));
  assert_non_null(f->host);
  memset(f->host, 0, (size_t)f->bytes);
}

static float *at(fixture *f, int64_t offset) { return (float *)(void *)(f->host + offset); }

// Deterministic values in [-1, 1).
static float value(uint64_t i, uint64_t salt) {
  uint64_t x = (i + 1) * 0x9E3779B97F4A7C15ull ^ salt * 0xBF58476D1CE4E5B9ull;
  x ^= x >> 31;
  x *= 0x94D049BB133111EBull;
  x ^= x >> 29;
  return (float)((double)(x >> 11) / 9007199254740992.0 * 2.0 - 1.0);
}

static void fill_weights(fixture *f) {
  for (int i = 0; i < kParams; ++i)
    for (int64_t k = 0; k < kNumel[i]; ++k)
      at(f, f->params[i].offset)[k] = value((uint64_t)k, (uint64_t)i);
}

static void fill_grads(fixture *f, int step) {
  for (int i = 0; i < kParams; ++i)
    for (int64_t k = 0; k < kNumel[i]; ++k)
      at(f, f->params[i].grad_offset)[k] =
          value((uint64_t)k, 100u + (uint64_t)(10 * step + i)) * (k % 7 == 0 ? 1e-3f : 1.0f);
}

static srt_step_options options_at(int step) {
  return (srt_step_options){.step = step, .lr = 1e-2f, .beta1 = 0.9f, .beta2 = 0.95f,
                            .eps = 1e-8f, .weight_decay = 0.1f};
}

// torch.optim.AdamW in float64 on g = clip g (its documented algorithm).
static void ref_step(double *p, double *m, double *v, const float *g, int64_t n, int t,
                     double clip, const srt_step_options *o) {
  for (int64_t i = 0; i < n; ++i) {
    double gi = clip * (double)g[i];
    p[i] -= (double)o->lr * (double)o->weight_decay * p[i];
    m[i] = (double)o->beta1 * m[i] + (1 - (double)o->beta1) * gi;
    v[i] = (double)o->beta2 * v[i] + (1 - (double)o->beta2) * gi * gi;
    double mhat = m[i] / (1 - pow(o->beta1, t)), vhat = v[i] / (1 - pow(o->beta2, t));
    p[i] -= (double)o->lr * mhat / (sqrt(vhat) + (double)o->eps);
  }
}

// float32 -> bfloat16 by its bits: round to nearest, ties to even (no NaN
// here).
static uint16_t bf16_bits(float x) {
  uint32_t u;
  memcpy(&u, &x, sizeof u);
  return (uint16_t)((u + 0x7FFFu + ((u >> 16) & 1u)) >> 16);
}

// Runs kSteps offloaded steps (clip 0.5 on step 2) with `threads` threads.
static void train(fixture *f, int threads) {
  omp_set_num_threads(threads);
  fill_weights(f);
  for (int t = 1; t <= kSteps; ++t) {
    fill_grads(f, t);
    srt_step_options o = options_at(t);
    ASSERT_OK(srt_cuda_offload_step(&f->program, f->host, &o, t == 2 ? 0.5f : 1.0f));
  }
}

static void test_matches_float64_adamw(void **state) {
  (void)state;
  fixture f;
  build(&f);
  train(&f, 2);
  fixture r; // the reference's gradients, step by step
  build(&r);
  for (int i = 0; i < kParams; ++i) {
    int64_t n = kNumel[i];
    double *p = calloc((size_t)n, sizeof *p), *m = calloc((size_t)n, sizeof *m),
           *v = calloc((size_t)n, sizeof *v);
    assert_true(p && m && v);
    for (int64_t k = 0; k < n; ++k)
      p[k] = value((uint64_t)k, (uint64_t)i);
    for (int t = 1; t <= kSteps; ++t) {
      fill_grads(&r, t);
      srt_step_options o = options_at(t);
      ref_step(p, m, v, at(&r, r.params[i].grad_offset), n, t, t == 2 ? 0.5 : 1.0, &o);
    }
    // fp32 steps round p, m, v at 2^-24 relative a few times per step:
    // 2e-6 of |p| <= ~1 over 3 steps. m sums terms of up to 0.1 whose signs
    // change (it may cancel to ~1e-5): 1e-7 absolute; v likewise 1e-9.
    const float *pw = at(&f, f.params[i].offset), *pm = at(&f, f.params[i].m_offset),
                *pv = at(&f, f.params[i].v_offset);
    const uint16_t *copy = (const uint16_t *)(const void *)(f.host + f.params[i].compute_offset);
    for (int64_t k = 0; k < n; ++k) {
      if (fabs(pw[k] - p[k]) > 2e-6 + 1e-6 * fabs(p[k]) ||
          fabs(pm[k] - m[k]) > 1e-7 + 1e-5 * fabs(m[k]) ||
          fabs(pv[k] - v[k]) > 1e-9 + 1e-5 * fabs(v[k]))
        fail_msg("param %d element %lld: weight %.9g (ref %.9g), m %.9g (%.9g), v %.9g (%.9g)",
                 i, (long long)k, (double)pw[k], p[k], (double)pm[k], m[k], (double)pv[k],
                 v[k]);
      if (copy[k] != bf16_bits(pw[k]))
        fail_msg("param %d element %lld: bf16 copy 0x%04x, expected 0x%04x of %.9g", i,
                 (long long)k, copy[k], bf16_bits(pw[k]), (double)pw[k]);
    }
    free(p);
    free(m);
    free(v);
  }
  free(f.host);
  free(r.host);
}

static void test_thread_counts_give_the_same_bytes(void **state) {
  (void)state;
  fixture one;
  build(&one);
  train(&one, 1);
  for (int threads = 2; threads <= 3; ++threads) {
    fixture f;
    build(&f);
    train(&f, threads);
    // Gradients were rewritten identically; everything else is the result.
    if (memcmp(one.host, f.host, (size_t)one.bytes) != 0)
      fail_msg("%d threads: the host copy differs from 1 thread's", threads);
    free(f.host);
  }
  free(one.host);
}

// Rounding edge cases as the device rounds them: a tie to even both ways,
// overflow to infinity, infinities, and NaNs of either sign and any payload
// to the canonical 0x7fff (__float2bfloat16_rn; the host's
// srt_f32_to_bf16 would keep the sign).
static void test_copies_round_as_the_device(void **state) {
  (void)state;
  fixture f;
  build(&f);
  const uint32_t in[] = {0x3f808000u, 0x3f818000u, 0x7f7fffffu, 0xff800000u,
                         0x7fc00000u, 0xffc00001u, 0x7f800001u};
  const uint16_t want[] = {0x3f80u, 0x3f82u, 0x7f80u, 0xff80u, 0x7fffu, 0x7fffu, 0x7fffu};
  float *w = at(&f, f.params[0].offset);
  for (size_t k = 0; k < sizeof in / sizeof *in; ++k)
    memcpy(&w[k], &in[k], sizeof w[k]);
  srt_cuda_offload_refresh(&f.program, f.host);
  const uint16_t *copy = (const uint16_t *)(const void *)(f.host + f.params[0].compute_offset);
  for (size_t k = 0; k < sizeof in / sizeof *in; ++k)
    if (copy[k] != want[k])
      fail_msg("0x%08x: bf16 0x%04x, expected 0x%04x", in[k], copy[k], want[k]);
  free(f.host);
}

static void test_refuses_bad_arguments(void **state) {
  (void)state;
  fixture f;
  build(&f);
  srt_step_options o = options_at(0);
  ASSERT_ERROR(srt_cuda_offload_step(&f.program, f.host, &o, 1.0f), SRT_INVALID_ARGUMENT,
               "step 0 must be >= 1");
  o.step = 1;
  ASSERT_ERROR(srt_cuda_offload_step(&f.program, NULL, &o, 1.0f), SRT_INVALID_ARGUMENT,
               "NULL");
  free(f.host);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_matches_float64_adamw),
      cmocka_unit_test(test_thread_counts_give_the_same_bytes),
      cmocka_unit_test(test_copies_round_as_the_device),
      cmocka_unit_test(test_refuses_bad_arguments),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
