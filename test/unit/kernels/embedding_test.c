// Unit tests of the vocabulary-range embedding (runtime/cpu/embedding.c):
// forward against a float64 gather, backward against finite differences.
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdlib.h>

#include "kernel_testing.h"
#include "shardrt/kernels.h"

enum { kTokens = 9, kHidden = 5, kLocalVocab = 4 };
static const int64_t kVocabStart = 3;
// Below, inside (3..6, with repeats) and above (7, 100) the local range
// [3, 7), plus a negative id: all out-of-range ids must give zero rows.
static const int64_t kIds[kTokens] = {5, 0, 3, 6, 7, -4, 5, 100, 4};

static void ref_forward(double *out, const double *w, double scale) {
  for (int t = 0; t < kTokens; t++)
    for (int i = 0; i < kHidden; i++) {
      int64_t row = kIds[t] - kVocabStart;
      out[t * kHidden + i] =
          row >= 0 && row < kLocalVocab ? scale * w[row * kHidden + i] : 0.0;
    }
}

static void check_forward(float scale) {
  test_rng rng = {42};
  float w[kLocalVocab * kHidden], out[kTokens * kHidden];
  test_fill(w, kLocalVocab * kHidden, &rng, -1, 1);
  test_fill(out, kTokens * kHidden, &rng, 5, 6); // garbage to overwrite
  srt_cpu_embedding_forward(out, kIds, w, kTokens, kHidden, kVocabStart,
                            kLocalVocab, scale);
  double *wd = test_to_double(w, kLocalVocab * kHidden);
  double want[kTokens * kHidden];
  ref_forward(want, wd, scale);
  // A float times a float is exact in double, so the fp32 product rounded
  // once equals the float64 reference rounded: tolerance 0.5 ulp, i.e. the
  // relative 2^-24.
  test_assert_close(out, want, kTokens * kHidden, 0.0, 0x1p-24,
                    "embedding forward");
  for (int i = 0; i < kHidden; i++) { // id 0, 7, -4, 100: exact zero rows
    assert_true(out[1 * kHidden + i] == 0.0f);
    assert_true(out[4 * kHidden + i] == 0.0f);
    assert_true(out[5 * kHidden + i] == 0.0f);
    assert_true(out[7 * kHidden + i] == 0.0f);
  }
  free(wd);
}

static void test_forward_masks_out_of_range_ids(void **state) {
  (void)state;
  check_forward(1.0f);
  check_forward(2.2360680f); // Gemma's sqrt(hidden) for hidden = 5
}

typedef struct fd_ctx {
  const double *cot; // the cotangent r: loss = <out, r>
  double scale;
} fd_ctx;

static double loss_of_weight(const double *w, void *p) {
  fd_ctx *c = p;
  double out[kTokens * kHidden];
  ref_forward(out, w, c->scale);
  return test_dot(out, c->cot, kTokens * kHidden);
}

static void test_backward_accumulates_and_matches_fd(void **state) {
  (void)state;
  test_rng rng = {7};
  float w[kLocalVocab * kHidden], dout[kTokens * kHidden];
  float dw[kLocalVocab * kHidden], dw0[kLocalVocab * kHidden];
  test_fill(w, kLocalVocab * kHidden, &rng, -1, 1);
  test_fill(dout, kTokens * kHidden, &rng, -1, 1);
  test_fill(dw0, kLocalVocab * kHidden, &rng, -1, 1);
  for (int i = 0; i < kLocalVocab * kHidden; i++)
    dw[i] = dw0[i];
  float scale = 1.5f;
  srt_cpu_embedding_backward(dw, dout, kIds, kTokens, kHidden, kVocabStart,
                             kLocalVocab, scale, -1);

  double *wd = test_to_double(w, kLocalVocab * kHidden);
  double *cot = test_to_double(dout, kTokens * kHidden);
  fd_ctx ctx = {cot, scale};
  double want[kLocalVocab * kHidden];
  test_fd_gradient(loss_of_weight, &ctx, wd, kLocalVocab * kHidden, 1e-6,
                   want);
  for (int i = 0; i < kLocalVocab * kHidden; i++)
    want[i] += dw0[i]; // the kernel accumulates
  // At most 3 fp32 additions per element (id 5 appears twice): a few ulp of
  // values below 5, so 1e-6 absolute; FD error ~1e-10 (kernel_testing.h).
  test_assert_close(dw, want, kLocalVocab * kHidden, 1e-6, 1e-6,
                    "embedding dweight");
  free(wd);
  free(cot);
}

// torch nn.Embedding(padding_idx=p): lookups of p give row p no gradient;
// the other rows get exactly what they get without a padding_idx. p = 5
// (hit twice, local row 2), and p outside this rank's range (another rank's
// row, or -1) changes nothing here.
static void test_backward_padding_idx(void **state) {
  (void)state;
  test_rng rng = {9};
  float dout[kTokens * kHidden], plain[kLocalVocab * kHidden], pad[kLocalVocab * kHidden];
  test_fill(dout, kTokens * kHidden, &rng, -1, 1);
  test_fill(plain, kLocalVocab * kHidden, &rng, -1, 1);
  for (int i = 0; i < kLocalVocab * kHidden; i++)
    pad[i] = plain[i];
  float before[kLocalVocab * kHidden];
  for (int i = 0; i < kLocalVocab * kHidden; i++)
    before[i] = plain[i];
  srt_cpu_embedding_backward(plain, dout, kIds, kTokens, kHidden, kVocabStart, kLocalVocab,
                             2.0f, -1);
  srt_cpu_embedding_backward(pad, dout, kIds, kTokens, kHidden, kVocabStart, kLocalVocab,
                             2.0f, 5);
  for (int r = 0; r < kLocalVocab; r++)
    for (int i = 0; i < kHidden; i++) {
      int k = r * kHidden + i;
      if (r + kVocabStart == 5)
        assert_true(pad[k] == before[k]); // untouched: accumulates nothing
      else
        assert_true(pad[k] == plain[k]);
    }
  for (int64_t other = 0; other < 3; other++) { // 100: another rank's; -1: none
    int64_t p = other == 0 ? 100 : other == 1 ? 0 : -1;
    float again[kLocalVocab * kHidden];
    for (int i = 0; i < kLocalVocab * kHidden; i++)
      again[i] = before[i];
    srt_cpu_embedding_backward(again, dout, kIds, kTokens, kHidden, kVocabStart, kLocalVocab,
                               2.0f, p);
    assert_memory_equal(again, plain, sizeof again);
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_forward_masks_out_of_range_ids),
      cmocka_unit_test(test_backward_accumulates_and_matches_fd),
      cmocka_unit_test(test_backward_padding_idx),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
