// Unit tests of cross-entropy (runtime/cpu/cross_entropy.c): shifted and
// unshifted losses with ignored labels against float64, gradients against
// finite differences, and the vocabulary-parallel loss over 2 and 4
// simulated ranks equal to the single-rank one.
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

enum { kB = 2, kS = 6, kV = 14, kRows = kB * kS };

// Some -100 labels, one at the first position (never scored when shifting)
// and some at scored positions.
static const int64_t kLabels[kRows] = {-100, 3,  13,   0, -100, 7,
                                       5,    -100, 12, 1, 9,    -100};

static srt_cross_entropy_config plain_config(bool shift) {
  return (srt_cross_entropy_config){.batch = kB, .seq = kS, .vocab = kV,
                                    .vocab_start = 0, .local_vocab = kV,
                                    .shift = shift, .ignore_index = -100};
}

// Float64 mean cross-entropy with Hugging Face's shift.
static double ref_loss(const double *logits, const int64_t *labels,
                       bool shift) {
  double total = 0.0;
  int kept = 0;
  for (int b = 0; b < kB; b++)
    for (int s = 0; s + (shift ? 1 : 0) < kS; s++) {
      int64_t y = labels[b * kS + s + (shift ? 1 : 0)];
      if (y == -100)
        continue;
      const double *x = logits + (b * kS + s) * kV;
      double mx = x[0];
      for (int v = 1; v < kV; v++)
        mx = x[v] > mx ? x[v] : mx;
      double sum = 0.0;
      for (int v = 0; v < kV; v++)
        sum += exp(x[v] - mx);
      total += mx + log(sum) - x[y];
      kept++;
    }
  return total / kept;
}

typedef struct fd_ctx {
  bool shift;
} fd_ctx;

static double loss_fn(const double *logits, void *p) {
  return ref_loss(logits, kLabels, ((fd_ctx *)p)->shift);
}

static void check_plain(bool shift) {
  test_rng rng = {shift ? 1u : 2u};
  float logits[kRows * kV], lse[kRows], ws[2 * kRows], dl[kRows * kV], loss;
  test_fill(logits, kRows * kV, &rng, -4, 4);
  srt_cross_entropy_config c = plain_config(shift);
  assert_int_equal(srt_cpu_cross_entropy_workspace_floats(&c), 2 * kRows);
  assert_null(srt_cpu_cross_entropy_forward(&loss, lse, logits, kLabels, ws, &c));
  double *ld = test_to_double(logits, kRows * kV);
  double want = ref_loss(ld, kLabels, shift);
  // fp32 exp/log of O(1) values summed in double: ~1e-7 relative.
  test_assert_close(&loss, &want, 1, 1e-6, 1e-6, "cross_entropy loss");

  float dloss = 0.75f;
  int64_t kept = srt_cpu_cross_entropy_count(kLabels, &c);
  assert_int_equal(kept, shift ? 7 : 8);
  srt_cpu_cross_entropy_backward(dl, logits, lse, kLabels, dloss, (float)kept,
                                 &c);
  double g[kRows * kV];
  fd_ctx f = {shift};
  test_fd_gradient(loss_fn, &f, ld, kRows * kV, 1e-6, g);
  for (int i = 0; i < kRows * kV; i++)
    g[i] *= dloss;
  // Softmax probabilities from fp32 exp(x - lse): ~1e-7 relative each.
  test_assert_close(dl, g, kRows * kV, 1e-7, 1e-5, "cross_entropy dlogits");
  // Ignored rows (and the last position when shifting) have zero gradient.
  for (int v = 0; v < kV; v++) {
    assert_true(dl[(shift ? 3 : 4) * kV + v] == 0.0f); // label -100 scored here
    if (shift)
      assert_true(dl[(kS - 1) * kV + v] == 0.0f);
  }
  free(ld);
}

static void test_plain_shifted(void **state) {
  (void)state;
  check_plain(true);
}

static void test_plain_unshifted(void **state) {
  (void)state;
  check_plain(false);
}

//===----------------------------------------------------------------------===//
// Vocabulary-parallel: P ranks simulated in one process by replay.
//===----------------------------------------------------------------------===//

// The kernel is deterministic, so the ranks can run one after another: in
// round r every rank runs the forward again; the fake all-reduce answers its
// first r calls with the results already combined, records the rank's input
// to call r and stops the rank there (returning an error status). After all
// ranks have run round r, call r's inputs are combined (sum or max) and round
// r + 1 begins. A run that finishes without being stopped is complete.
enum { kMaxRanks = 4, kMaxCalls = 4, kMaxCount = 2 * kRows };

typedef struct fake_world {
  int nranks, round, calls_done; // calls combined so far
  int64_t count[kMaxCalls];
  srt_reduce_op op[kMaxCalls];
  float input[kMaxCalls][kMaxRanks][kMaxCount];
  float result[kMaxCalls][kMaxCount];
} fake_world;

typedef struct fake_rank {
  fake_world *world;
  int rank, call; // calls made in this run
} fake_rank;

static srt_status fake_allreduce(void *group, float *data, int64_t count,
                                 srt_reduce_op op) {
  fake_rank *r = group;
  fake_world *w = r->world;
  int call = r->call++;
  assert_true(call < kMaxCalls && count <= kMaxCount);
  if (call < w->calls_done) {
    // Already combined: the same call must see the same shape and op, and
    // this rank's input must be what it gave before (determinism).
    assert_int_equal(count, w->count[call]);
    assert_int_equal(op, w->op[call]);
    assert_memory_equal(data, w->input[call][r->rank], count * sizeof *data);
    memcpy(data, w->result[call], (size_t)count * sizeof *data);
    return NULL;
  }
  w->count[call] = count;
  w->op[call] = op;
  memcpy(w->input[call][r->rank], data, (size_t)count * sizeof *data);
  return SRT_ERROR(SRT_UNAVAILABLE, "replay: stop before call %d", call);
}

static void combine(fake_world *w) {
  int call = w->calls_done++;
  for (int64_t i = 0; i < w->count[call]; i++) {
    float acc = w->input[call][0][i];
    for (int p = 1; p < w->nranks; p++) {
      float x = w->input[call][p][i];
      acc = w->op[call] == SRT_REDUCE_MAX ? (x > acc ? x : acc) : acc + x;
    }
    w->result[call][i] = acc;
  }
}

static void check_vocab_parallel(int nranks, const int64_t *starts,
                                 const int64_t *sizes, bool shift) {
  test_rng rng = {100u + (uint64_t)nranks};
  float logits[kRows * kV];
  test_fill(logits, kRows * kV, &rng, -5, 5);
  srt_cross_entropy_config pc = plain_config(shift);
  float plain_loss, plain_lse[kRows], ws[2 * kRows], plain_dl[kRows * kV];
  assert_null(srt_cpu_cross_entropy_forward(&plain_loss, plain_lse, logits,
                                            kLabels, ws, &pc));
  float kept = (float)srt_cpu_cross_entropy_count(kLabels, &pc);
  srt_cpu_cross_entropy_backward(plain_dl, logits, plain_lse, kLabels, 1.0f,
                                 kept, &pc);

  fake_world *w = kt_calloc(1, sizeof *w);
  w->nranks = nranks;
  float shard[kMaxRanks][kRows * kV], lse[kMaxRanks][kRows], loss[kMaxRanks];
  fake_rank ranks[kMaxRanks];
  srt_cross_entropy_config rc[kMaxRanks];
  for (int p = 0; p < nranks; p++) {
    // The local shard: logits[..., start : start + size], contiguous.
    for (int r = 0; r < kRows; r++)
      memcpy(shard[p] + r * sizes[p], logits + r * kV + starts[p],
             (size_t)sizes[p] * sizeof(float));
    rc[p] = pc;
    rc[p].vocab_start = starts[p];
    rc[p].local_vocab = sizes[p];
    rc[p].allreduce = fake_allreduce;
    rc[p].group = &ranks[p];
  }
  for (bool done = false; !done; w->round++) {
    assert_true(w->round <= kMaxCalls);
    done = true;
    for (int p = 0; p < nranks; p++) {
      ranks[p] = (fake_rank){w, p, 0};
      float wsp[2 * kRows];
      srt_status s = srt_cpu_cross_entropy_forward(&loss[p], lse[p], shard[p],
                                                   kLabels, wsp, &rc[p]);
      if (s) { // stopped at a call not yet combined: the error passes up
        assert_int_equal(srt_status_code(s), SRT_UNAVAILABLE);
        srt_status_free(s);
        done = false;
      }
    }
    if (!done)
      combine(w);
  }
  // Max over the vocabulary, then one fused SUM of exp-sums and targets.
  assert_int_equal(w->calls_done, 2);
  assert_int_equal(w->op[0], SRT_REDUCE_MAX);
  assert_int_equal(w->count[0], kRows);
  assert_int_equal(w->op[1], SRT_REDUCE_SUM);
  assert_int_equal(w->count[1], 2 * kRows);

  double want_lse[kRows];
  for (int r = 0; r < kRows; r++)
    want_lse[r] = plain_lse[r];
  for (int p = 0; p < nranks; p++) {
    double want = plain_loss;
    // Only the order of fp32 additions in the exp-sums differs (sums in
    // double per rank, rounded to fp32 before the all-reduce): ~1e-7.
    test_assert_close(&loss[p], &want, 1, 1e-6, 1e-6, "vocab-parallel loss");
    test_assert_close(lse[p], want_lse, kRows, 1e-6, 1e-6, "vocab-parallel lse");
    float dl[kRows * kV];
    srt_cpu_cross_entropy_backward(dl, shard[p], lse[p], kLabels, 1.0f, kept,
                                   &rc[p]);
    double want_dl[kRows * kV];
    for (int r = 0; r < kRows; r++)
      for (int v = 0; v < sizes[p]; v++)
        want_dl[r * sizes[p] + v] = plain_dl[r * kV + starts[p] + v];
    // Each gradient is exp(x - lse) / K with lse equal to ~1e-6: 1e-6 rel.
    test_assert_close(dl, want_dl, kRows * sizes[p], 1e-8, 1e-5,
                      "vocab-parallel dlogits");
  }
  free(w);
}

static void test_vocab_parallel_two_ranks(void **state) {
  (void)state;
  const int64_t starts[] = {0, 7}, sizes[] = {7, 7};
  check_vocab_parallel(2, starts, sizes, true);
  check_vocab_parallel(2, starts, sizes, false);
}

static void test_vocab_parallel_four_uneven_ranks(void **state) {
  (void)state;
  const int64_t starts[] = {0, 4, 8, 11}, sizes[] = {4, 4, 3, 3};
  check_vocab_parallel(4, starts, sizes, true);
}

//===----------------------------------------------------------------------===//
// Phase kernels: tp = 2 (vocabulary) x dp = 2 (batch), combined by the test
// exactly as tp-partition's collectives would.
//===----------------------------------------------------------------------===//

static void test_phases_tp2_dp2(void **state) {
  (void)state;
  enum { kTp = 2, kDp = 2, kLocalB = kB / kDp, kLocalRows = kLocalB * kS };
  const int64_t starts[kTp] = {0, 9}, sizes[kTp] = {9, 5}; // uneven split
  test_rng rng = {555};
  float logits[kRows * kV];
  test_fill(logits, kRows * kV, &rng, -5, 5);
  srt_cross_entropy_config pc = plain_config(true);
  float plain_loss, plain_lse[kRows], ws[2 * kRows], plain_dl[kRows * kV];
  assert_null(srt_cpu_cross_entropy_forward(&plain_loss, plain_lse, logits,
                                            kLabels, ws, &pc));
  float total_kept = (float)srt_cpu_cross_entropy_count(kLabels, &pc);
  srt_cpu_cross_entropy_backward(plain_dl, logits, plain_lse, kLabels, 1.0f,
                                 total_kept, &pc);

  float pairs[kDp][2];
  float max[kDp][kTp][kLocalRows], se[kDp][kTp][kLocalRows];
  float tg[kDp][kTp][kLocalRows];
  float shard[kDp][kTp][kLocalRows * kV];
  srt_cross_entropy_config rc[kTp];
  for (int d = 0; d < kDp; d++) {
    const int64_t *labels = kLabels + d * kLocalRows;
    for (int t = 0; t < kTp; t++) {
      rc[t] = pc;
      rc[t].batch = kLocalB;
      rc[t].vocab_start = starts[t];
      rc[t].local_vocab = sizes[t];
      for (int r = 0; r < kLocalRows; r++)
        memcpy(shard[d][t] + r * sizes[t],
               logits + (d * kLocalRows + r) * kV + starts[t],
               (size_t)sizes[t] * sizeof(float));
      srt_cpu_cross_entropy_logit_max(max[d][t], shard[d][t], kLocalRows,
                                      sizes[t]);
    }
    for (int r = 0; r < kLocalRows; r++) { // all-reduce MAX over tp
      float m = fmaxf(max[d][0][r], max[d][1][r]);
      max[d][0][r] = max[d][1][r] = m;
    }
    for (int t = 0; t < kTp; t++)
      assert_null(srt_cpu_cross_entropy_partial_sums(
          se[d][t], tg[d][t], shard[d][t], labels, max[d][t], &rc[t]));
    for (int r = 0; r < kLocalRows; r++) { // all-reduce SUM over tp
      float a = se[d][0][r] + se[d][1][r], b = tg[d][0][r] + tg[d][1][r];
      se[d][0][r] = se[d][1][r] = a;
      tg[d][0][r] = tg[d][1][r] = b;
    }
    float p0[2], p1[2];
    srt_cpu_cross_entropy_loss_sum(p0, max[d][0], se[d][0], tg[d][0], labels,
                                   &rc[0]);
    srt_cpu_cross_entropy_loss_sum(p1, max[d][1], se[d][1], tg[d][1], labels,
                                   &rc[1]);
    assert_memory_equal(p0, p1, sizeof p0); // tp ranks agree bit for bit
    pairs[d][0] = p0[0], pairs[d][1] = p0[1];
  }
  float global[2] = {pairs[0][0] + pairs[1][0], pairs[0][1] + pairs[1][1]};
  assert_true(global[1] == total_kept); // SUM over dp of the counts
  float loss = srt_cpu_cross_entropy_mean(global);
  double want = plain_loss;
  // Different summation order only (fp32 partial sums per shard): ~1e-7.
  test_assert_close(&loss, &want, 1, 1e-6, 1e-6, "phased loss");

  // Backward per (dp, tp) rank from the phases' lse and the GLOBAL count.
  for (int d = 0; d < kDp; d++)
    for (int t = 0; t < kTp; t++) {
      float lse[kLocalRows], dl[kLocalRows * kV];
      double want_dl[kLocalRows * kV];
      srt_cpu_cross_entropy_lse(lse, max[d][t], se[d][t], kLocalRows);
      srt_cpu_cross_entropy_backward(dl, shard[d][t], lse,
                                     kLabels + d * kLocalRows, 1.0f,
                                     global[1], &rc[t]);
      for (int r = 0; r < kLocalRows; r++)
        for (int v = 0; v < sizes[t]; v++)
          want_dl[r * sizes[t] + v] =
              plain_dl[(d * kLocalRows + r) * kV + starts[t] + v];
      test_assert_close(dl, want_dl, kLocalRows * sizes[t], 1e-8, 1e-5,
                        "phased dlogits");
    }
  float none[2] = {0.0f, 0.0f};
  assert_true(srt_cpu_cross_entropy_mean(none) == 0.0f);
}

//===----------------------------------------------------------------------===//
// Errors and edge cases
//===----------------------------------------------------------------------===//

typedef struct counting {
  int calls;
} counting;

static srt_status counting_allreduce(void *group, float *data, int64_t count,
                                     srt_reduce_op op) {
  ((counting *)group)->calls++;
  return NULL;
}

static void test_bad_label_fails_before_any_collective(void **state) {
  (void)state;
  float logits[kRows * kV] = {0}, lse[kRows], ws[2 * kRows], loss;
  int64_t labels[kRows];
  memcpy(labels, kLabels, sizeof labels);
  labels[8] = kV; // past the vocabulary
  counting cnt = {0};
  srt_cross_entropy_config c = plain_config(true);
  c.allreduce = counting_allreduce;
  c.group = &cnt;
  srt_status s = srt_cpu_cross_entropy_forward(&loss, lse, logits, labels, ws, &c);
  assert_int_equal(srt_status_code(s), SRT_OUT_OF_RANGE);
  srt_status_free(s);
  labels[8] = -1; // negative and not ignore_index
  s = srt_cpu_cross_entropy_forward(&loss, lse, logits, labels, ws, &c);
  assert_int_equal(srt_status_code(s), SRT_OUT_OF_RANGE);
  srt_status_free(s);
  assert_int_equal(cnt.calls, 0);
  // A label at the unscored position 0 is never read when shifting.
  memcpy(labels, kLabels, sizeof labels);
  labels[0] = 12345;
  assert_null(srt_cpu_cross_entropy_forward(&loss, lse, logits, labels, ws, &c));
  assert_int_equal(cnt.calls, 2);
  // The phase kernel refuses the same labels.
  labels[8] = kV;
  float m[kRows] = {0}, se[kRows], tg[kRows];
  s = srt_cpu_cross_entropy_partial_sums(se, tg, logits, labels, m, &c);
  assert_int_equal(srt_status_code(s), SRT_OUT_OF_RANGE);
  srt_status_free(s);
  // A local range outside the vocabulary.
  c.vocab_start = 10;
  c.local_vocab = 5;
  s = srt_cpu_cross_entropy_forward(&loss, lse, logits, kLabels, ws, &c);
  assert_int_equal(srt_status_code(s), SRT_INVALID_ARGUMENT);
  srt_status_free(s);
}

static void test_all_ignored(void **state) {
  (void)state;
  float logits[kRows * kV], lse[kRows], ws[2 * kRows], dl[kRows * kV], loss;
  test_rng rng = {77};
  test_fill(logits, kRows * kV, &rng, -1, 1);
  int64_t labels[kRows];
  for (int i = 0; i < kRows; i++)
    labels[i] = -100;
  srt_cross_entropy_config c = plain_config(true);
  assert_null(srt_cpu_cross_entropy_forward(&loss, lse, logits, labels, ws, &c));
  // The nn.ce_mean convention: 0 (torch's mean would be 0/0 = NaN).
  assert_true(loss == 0.0f);
  assert_int_equal(srt_cpu_cross_entropy_count(labels, &c), 0);
  srt_cpu_cross_entropy_backward(dl, logits, lse, labels, 1.0f, 0.0f, &c);
  for (int i = 0; i < kRows * kV; i++)
    assert_true(dl[i] == 0.0f);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_plain_shifted),
      cmocka_unit_test(test_plain_unshifted),
      cmocka_unit_test(test_vocab_parallel_two_ranks),
      cmocka_unit_test(test_vocab_parallel_four_uneven_ranks),
      cmocka_unit_test(test_phases_tp2_dp2),
      cmocka_unit_test(test_bad_label_fails_before_any_collective),
      cmocka_unit_test(test_all_ignored),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
