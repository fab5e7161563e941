// Unit tests of the document packer (runtime/train/pack.c): a hand-checked
// tiny case, and on random document sets the invariants that make it
// right: every token of every document appears exactly once per epoch, in
// file order; each row holds at most seq tokens, padding only at its end;
// positions are the token's place in its document, segments count pieces
// within a row; labels are -100 exactly on prompts, first tokens and
// padding, so no scored label follows another document's token; the same
// step gives the same rows, and any step's rows are the epoch's rows its
// number names.
#include <stdlib.h>
#include <string.h>

#include "../runtime/runtime_test_util.h"
#include "train_internal.h"

// Token source for the tests: token i of the "file" is ids[i].
static srt_status read_array(const void *source, int64_t at, int64_t n, int64_t *ids) {
  memcpy(ids, (const int64_t *)source + at, (size_t)n * sizeof *ids);
  return NULL;
}

enum { kPad = 7 };

// Fills rows [row0, row0 + rows) of `step` into fresh arrays (caller frees
// out->ids etc.).
static void fill(const train_pack_plan *plan, const int64_t *tokens, int64_t step,
                 int64_t batch, int64_t row0, int64_t rows, train_pack_rows *out) {
  size_t n = (size_t)(rows * plan->seq) + 1;
  *out = (train_pack_rows){.ids = calloc(n, 8), .labels = calloc(n, 8),
                           .positions = calloc(n, 8), .segments = calloc(n, 8)};
  ASSERT_OK(train_pack_fill(plan, step, batch, row0, rows, kPad, read_array, tokens, out));
}

static void free_rows(train_pack_rows *r) {
  free(r->ids);
  free(r->labels);
  free(r->positions);
  free(r->segments);
}

static void expect_row(const train_pack_rows *r, int row, int seq, const int64_t *ids,
                       const int64_t *labels, const int64_t *pos, const int64_t *seg) {
  for (int t = 0; t < seq; ++t) {
    assert_int_equal(r->ids[row * seq + t], ids[t]);
    assert_int_equal(r->labels[row * seq + t], labels[t]);
    assert_int_equal(r->positions[row * seq + t], pos[t]);
    assert_int_equal(r->segments[row * seq + t], seg[t]);
  }
}

// seq 4; documents of 3, 2, 6, 1 tokens (ids 100 + index) with prompts
// 1, 0, 2, 0. Next-fit: [d0 pad] [d1 pad pad] [d2 0..3] [d2 4..5, d3, pad].
static void test_tiny_by_hand(void **state) {
  (void)state;
  const int64_t starts[] = {0, 3, 5, 11, 12}, prompts[] = {1, 0, 2, 0};
  int64_t tokens[12];
  for (int i = 0; i < 12; ++i)
    tokens[i] = 100 + i;
  train_pack_plan plan;
  ASSERT_OK(train_pack_plan_build(starts, prompts, 4, 4, &plan));
  assert_int_equal(plan.rows, 4);
  train_pack_rows r;
  fill(&plan, tokens, 1, 3, 0, 3, &r); // step 1: epoch rows 0, 1, 2
  const int64_t N = -100;
  expect_row(&r, 0, 4, (int64_t[]){100, 101, 102, kPad}, (int64_t[]){N, 101, 102, N},
             (int64_t[]){0, 1, 2, 0}, (int64_t[]){0, 0, 0, -1});
  expect_row(&r, 1, 4, (int64_t[]){103, 104, kPad, kPad}, (int64_t[]){N, 104, N, N},
             (int64_t[]){0, 1, 0, 0}, (int64_t[]){0, 0, -1, -1});
  expect_row(&r, 2, 4, (int64_t[]){105, 106, 107, 108}, (int64_t[]){N, N, 107, 108},
             (int64_t[]){0, 1, 2, 3}, (int64_t[]){0, 0, 0, 0});
  free_rows(&r);
  fill(&plan, tokens, 2, 3, 0, 2, &r); // step 2: epoch rows 3, then 0 (wrapped)
  expect_row(&r, 0, 4, (int64_t[]){109, 110, 111, kPad}, (int64_t[]){109, 110, N, N},
             (int64_t[]){4, 5, 0, 0}, (int64_t[]){0, 0, 1, -1});
  expect_row(&r, 1, 4, (int64_t[]){100, 101, 102, kPad}, (int64_t[]){N, 101, 102, N},
             (int64_t[]){0, 1, 2, 0}, (int64_t[]){0, 0, 0, -1});
  free_rows(&r);
  train_pack_stats st;
  ASSERT_OK(train_pack_stats_of(&plan, 1, 3, 0, 3, &st));
  assert_int_equal(st.rows, 3);
  assert_int_equal(st.documents, 3);
  assert_int_equal(st.tokens, 9);
  assert_int_equal(st.padding, 3);
  ASSERT_ERROR(train_pack_fill(&plan, 0, 3, 0, 1, kPad, read_array, tokens, &r),
               SRT_INVALID_ARGUMENT, "step 0");
  ASSERT_ERROR(train_pack_fill(&plan, 1, 3, 2, 2, kPad, read_array, tokens, &r),
               SRT_INVALID_ARGUMENT, "rows [2, 4) outside the batch of 3");
  train_pack_plan_free(&plan);
}

// Checks one epoch's rows against the documents (see the file comment).
static void check_epoch(const train_pack_plan *plan, const int64_t *starts,
                        const int64_t *prompts, int64_t docs, const train_pack_rows *r) {
  int64_t seq = plan->seq, next = 0; // the next token of the file the rows must hold
  for (int64_t row = 0; row < plan->rows; ++row) {
    int64_t used = 0;
    for (int64_t t = 0; t < seq; ++t) {
      int64_t at = row * seq + t, seg = r->segments[at];
      if (seg < 0) { // padding: to the row's end, no loss
        assert_int_equal(r->ids[at], kPad);
        assert_int_equal(r->labels[at], -100);
        continue;
      }
      assert_int_equal(used, t); // no padding before a token
      ++used;
      assert_int_equal(r->ids[at], next); // token i's id is i: every token once, in order
      int64_t d = 0;
      while (starts[d + 1] <= next)
        ++d;
      int64_t k = next - starts[d];
      assert_int_equal(r->positions[at], k);
      bool first = t == 0 || r->segments[at - 1] != seg;
      assert_int_equal(seg, t == 0 ? 0 : r->segments[at - 1] + (first ? 1 : 0));
      if (first && t > 0)
        assert_int_equal(k, 0); // only a row's first piece may continue a document
      if (starts[d + 1] - starts[d] <= seq && k == 0)
        assert_true(t + starts[d + 1] - starts[d] <= seq); // a short document is never split
      assert_int_equal(r->labels[at], k == 0 || k < prompts[d] ? -100 : next);
      if (t > 0 && r->labels[at] != -100)
        assert_int_equal(r->segments[at - 1], seg); // scored only within its document
      ++next;
    }
  }
  assert_int_equal(next, starts[docs]);
}

static void test_random_invariants(void **state) {
  (void)state;
  srand(12345);
  for (int trial = 0; trial < 200; ++trial) {
    int64_t seq = 1 + rand() % 24, docs = 1 + rand() % 40;
    int64_t *starts = malloc((size_t)(docs + 1) * 8), *prompts = malloc((size_t)docs * 8);
    starts[0] = 0;
    for (int64_t d = 0; d < docs; ++d) {
      int64_t len = 1 + rand() % (3 * seq);
      starts[d + 1] = starts[d] + len;
      prompts[d] = rand() % (len + 1);
    }
    int64_t *tokens = malloc((size_t)starts[docs] * 8);
    for (int64_t i = 0; i < starts[docs]; ++i)
      tokens[i] = i;
    train_pack_plan plan;
    ASSERT_OK(train_pack_plan_build(starts, prompts, docs, seq, &plan));
    // The whole epoch as step 1 of a batch of plan.rows rows, in two calls.
    train_pack_rows all, a, b;
    fill(&plan, tokens, 1, plan.rows, 0, plan.rows, &all);
    check_epoch(&plan, starts, prompts, docs, &all);
    int64_t half = plan.rows / 2;
    fill(&plan, tokens, 1, plan.rows, 0, half, &a);
    fill(&plan, tokens, 1, plan.rows, half, plan.rows - half, &b);
    size_t n1 = (size_t)(half * seq) * 8, n2 = (size_t)((plan.rows - half) * seq) * 8;
    assert_memory_equal(a.ids, all.ids, n1);
    assert_memory_equal(b.labels, all.labels + half * seq, n2);
    assert_memory_equal(b.segments, all.segments + half * seq, n2);
    free_rows(&a);
    free_rows(&b);
    // Any step of another batch size, regenerated from its number: row r
    // of step k is epoch row ((k - 1) * batch + r) mod rows, the same twice.
    int64_t batch = 1 + rand() % 5, step = 1 + rand() % 50;
    fill(&plan, tokens, step, batch, 0, batch, &a);
    fill(&plan, tokens, step, batch, 0, batch, &b);
    assert_memory_equal(a.ids, b.ids, (size_t)(batch * seq) * 8);
    for (int64_t row = 0; row < batch; ++row) {
      int64_t e = ((step - 1) * batch + row) % plan.rows;
      assert_memory_equal(a.ids + row * seq, all.ids + e * seq, (size_t)seq * 8);
      assert_memory_equal(a.labels + row * seq, all.labels + e * seq, (size_t)seq * 8);
      assert_memory_equal(a.positions + row * seq, all.positions + e * seq, (size_t)seq * 8);
      assert_memory_equal(a.segments + row * seq, all.segments + e * seq, (size_t)seq * 8);
    }
    // Next-fit: a row ends early only when the next piece would not fit.
    for (int64_t row = 0; row + 1 < plan.rows; ++row) {
      train_pack_stats st;
      ASSERT_OK(train_pack_stats_of(&plan, 1, plan.rows, row, 1, &st));
      assert_true(st.padding < plan.pieces[plan.row_first[row + 1]].length);
    }
    free_rows(&a);
    free_rows(&b);
    free_rows(&all);
    train_pack_plan_free(&plan);
    free(tokens);
    free(starts);
    free(prompts);
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_tiny_by_hand),
      cmocka_unit_test(test_random_invariants),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
