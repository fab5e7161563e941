// The load-balanced sequence split over cp (runtime/train/cp_split.c).
// The reference is the unsharded step: today's loss scores the logits at
// token t of a row against labels[t + 1] (-100 excluded). For each cp in
// 1..4 and several seq, on packed rows (documents crossing chunk
// boundaries, documents starting exactly at one, a continued document,
// prompts, padding), the cp ranks' local rows must hold every global token
// once, in chunk order c, 2cp-1-c, with its position and segment, each
// rank with the same causal attention work; and the (logit token, label)
// pairs the ranks score (their loss shifting locally at cp 1, not at all
// at cp > 1: the contract of train_cp_split) must be the unsharded
// multiset exactly. Then the inverse, the K/V chunk order, a case worked
// out by hand (seq 8, cp 2) and the refusals. Exact integers throughout.
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "../runtime/runtime_test_util.h"
#include "train_internal.h"

enum {
  ROWS = 3,
  MAX_SEQ = 64,
  MAX_TOKENS = ROWS * MAX_SEQ,
  ID0 = 1000,
  LABEL0 = 50000,
  CONTINUED = 5
};

// A global batch [ROWS, seq]; ids[r][t] = ID0 + r seq + t names its token.
typedef struct batch {
  int64_t ids[MAX_TOKENS], labels[MAX_TOKENS], positions[MAX_TOKENS], segments[MAX_TOKENS];
} batch;

static uint64_t lcg = 12345;
static int64_t draw(int64_t n) { // in [0, n)
  lcg = lcg * 6364136223846793005ull + 1442695040888963407ull;
  return (int64_t)((lcg >> 33) % (uint64_t)n);
}

// Packed rows as train_pack_fill writes them: row 0 documents of exactly
// one chunk, seq / (2 cp) (half a row at cp 1), so each starts at a chunk
// boundary; row 1 one
// document, so every chunk boundary has a scored prediction across it;
// row 2 documents of random lengths, the first tokens of some a prompt,
// the tail padding (segment -1). Labels -100 on each document's first
// token, prompts and padding, else LABEL0 + the token's index (not its
// id, so a label read from the ids would show).
static void make_batch(batch *b, int64_t seq, int cp) {
  int64_t chunk = seq > 1 ? seq / (2 * cp) : 1; // cp 1: two documents
  for (int64_t r = 0; r < ROWS; ++r) {
    int64_t t = 0, doc = 0, used = r < 2 ? seq : seq - draw(seq / 4 + 1);
    while (t < seq) {
      int64_t len = r == 0 ? chunk : r == 1 ? seq : 1 + draw(seq / 2 + 1);
      int64_t prompt = r == 2 ? draw(3) : 0;
      for (int64_t k = 0; k < len && t < seq; ++k, ++t) {
        int64_t i = r * seq + t;
        bool pad = t >= used;
        b->ids[i] = ID0 + i;
        b->positions[i] = pad ? 0 : r == 1 ? CONTINUED + k : k;
        b->segments[i] = pad ? -1 : doc;
        b->labels[i] = pad || (k == 0 && r != 1) || k < prompt ? -100 : LABEL0 + i;
      }
      ++doc;
    }
  }
}

// One rank's local batch [ROWS, seq/cp].
typedef struct local {
  int64_t ids[MAX_TOKENS], labels[MAX_TOKENS], positions[MAX_TOKENS], segments[MAX_TOKENS];
} local;

static void split(const batch *b, int64_t seq, int cp, int c, local *out) {
  train_rows_view g = {.ids = b->ids, .labels = b->labels, .positions = b->positions,
                       .segments = b->segments};
  train_pack_rows l = {.ids = out->ids, .labels = out->labels, .positions = out->positions,
                       .segments = out->segments};
  srt_status st = train_cp_split(&g, ROWS, seq, cp, c, &l);
  if (st)
    fail_msg("%s", srt_status_message(st));
}

// A scored prediction: the id of the token whose logits are scored, and
// the label they are scored against.
typedef struct pair {
  int64_t logit_id, label;
} pair;

static int pair_order(const void *x, const void *y) {
  const pair *a = x, *b = y;
  if (a->logit_id != b->logit_id)
    return a->logit_id < b->logit_id ? -1 : 1;
  return (a->label > b->label) - (a->label < b->label);
}

// The pairs a loss scores on rows [ROWS, width] of ids and labels: with
// `shift` (today's loss) the logits at j against labels[j + 1], else
// against labels[j]; -100 excluded. Appends at pairs[*n].
static void scored(const int64_t *ids, const int64_t *labels, int64_t width, bool shift,
                   pair *pairs, int64_t *n) {
  for (int64_t r = 0; r < ROWS; ++r)
    for (int64_t j = 0; j + (shift ? 1 : 0) < width; ++j) {
      int64_t label = labels[r * width + j + (shift ? 1 : 0)];
      if (label != -100)
        pairs[(*n)++] = (pair){.logit_id = ids[r * width + j], .label = label};
    }
}

// The expected global token of local position j of rank c: chunk c, then
// chunk 2cp-1-c (Megatron-LM's get_batch_on_this_cp_rank).
static int64_t expected_token(int64_t seq, int cp, int c, int64_t j) {
  if (cp == 1)
    return j;
  int64_t chunk = seq / (2 * cp);
  return j < chunk ? c * chunk + j : (2 * cp - 1 - c) * chunk + j - chunk;
}

// Every global token lands on exactly one rank, at the expected place,
// with its own position and segment; srt_cp_global_token agrees.
static void check_tokens(const batch *b, const local *ranks, int64_t seq, int cp) {
  int64_t width = seq / cp, seen[MAX_TOKENS] = {0};
  for (int c = 0; c < cp; ++c)
    for (int64_t r = 0; r < ROWS; ++r)
      for (int64_t j = 0; j < width; ++j) {
        int64_t l = r * width + j, i = ranks[c].ids[l] - ID0, t = i - r * seq;
        assert_true(t >= 0 && t < seq); // a token of this row
        ++seen[i];
        assert_int_equal(t, expected_token(seq, cp, c, j));
        assert_int_equal(t, srt_cp_global_token(seq, cp, c, j));
        assert_int_equal(ranks[c].positions[l], b->positions[i]);
        assert_int_equal(ranks[c].segments[l], b->segments[i]);
      }
  for (int64_t i = 0; i < ROWS * seq; ++i)
    if (seen[i] != 1)
      fail_msg("seq %lld cp %d: token %lld held %lld times", (long long)seq, cp, (long long)i,
               (long long)seen[i]);
}

// The balance: under a causal mask the query at global token t attends to
// t + 1 keys, and every rank's queries attend to as many keys in all.
static void check_balance(const local *ranks, int64_t seq, int cp) {
  int64_t work[4] = {0};
  for (int c = 0; c < cp; ++c)
    for (int64_t j = 0; j < seq / cp; ++j) // row 0: ids ID0 + t
      work[c] += ranks[c].ids[j] - ID0 + 1;
  for (int c = 1; c < cp; ++c)
    if (work[c] != work[0])
      fail_msg("seq %lld cp %d: rank %d attends to %lld keys, rank 0 to %lld", (long long)seq,
               cp, c, (long long)work[c], (long long)work[0]);
}

// The ranks score the unsharded loss's pairs exactly; and the data covers
// a scored prediction across a chunk boundary and a document start inside
// a row (whose pair must be absent), so the equality checks both.
static void check_scored(const batch *b, const local *ranks, int64_t seq, int cp) {
  pair want[MAX_TOKENS], got[MAX_TOKENS];
  int64_t n_want = 0, n_got = 0;
  scored(b->ids, b->labels, seq, true, want, &n_want);
  for (int c = 0; c < cp; ++c)
    scored(ranks[c].ids, ranks[c].labels, seq / cp, cp == 1, got, &n_got);
  assert_int_equal(n_got, n_want);
  qsort(want, (size_t)n_want, sizeof *want, pair_order);
  qsort(got, (size_t)n_got, sizeof *got, pair_order);
  for (int64_t k = 0; k < n_want; ++k)
    if (pair_order(&want[k], &got[k]))
      fail_msg("seq %lld cp %d: scored pair %lld is (%lld, %lld), unsharded (%lld, %lld)",
               (long long)seq, cp, (long long)k, (long long)got[k].logit_id,
               (long long)got[k].label, (long long)want[k].logit_id, (long long)want[k].label);
  int64_t chunk = cp > 1 ? seq / (2 * cp) : seq, across = 0, doc_starts = 0;
  for (int64_t k = 0; k < n_want; ++k)
    across += (want[k].logit_id - ID0) % seq % chunk == chunk - 1;
  for (int64_t i = 0; i < ROWS * seq; ++i)
    doc_starts += i % seq && b->segments[i] >= 0 && b->segments[i] != b->segments[i - 1];
  if (cp > 1)
    assert_true(across > 0);
  if (seq > 1)
    assert_true(doc_starts > 0);
}

// Gathering the ranks' ids, positions and segments gives the batch back;
// their labels give the global labels shifted (cp > 1) or as they were.
static void check_gather(const batch *b, const local *ranks, int64_t seq, int cp) {
  const void *parts[4][4];
  for (int c = 0; c < cp; ++c) {
    parts[0][c] = ranks[c].ids;
    parts[1][c] = ranks[c].positions;
    parts[2][c] = ranks[c].segments;
    parts[3][c] = ranks[c].labels;
  }
  const int64_t *want[3] = {b->ids, b->positions, b->segments};
  int64_t back[MAX_TOKENS], n = ROWS * seq;
  for (int k = 0; k < 4; ++k) {
    srt_status st = srt_cp_gather(parts[k], ROWS, seq, cp, sizeof(int64_t), back);
    if (st)
      fail_msg("%s", srt_status_message(st));
    for (int64_t i = 0; i < n; ++i) {
      int64_t shifted = cp == 1 ? b->labels[i] : i % seq + 1 < seq ? b->labels[i + 1] : -100;
      assert_int_equal(back[i], k < 3 ? want[k][i] : shifted);
    }
  }
}

// K/V gathered in cp rank order (each rank's local row, rank after rank)
// and reordered by srt_cp_kv_chunk_order is the row in token order.
static void check_kv_order(const batch *b, const local *ranks, int64_t seq, int cp) {
  int64_t width = seq / cp, chunk = seq / (2 * cp), src[8];
  srt_cp_kv_chunk_order(cp, src);
  for (int64_t r = 0; r < ROWS; ++r) {
    int64_t gathered[MAX_SEQ];
    for (int c = 0; c < cp; ++c)
      memcpy(gathered + c * width, ranks[c].ids + r * width, (size_t)width * sizeof(int64_t));
    for (int64_t k = 0; k < 2 * cp; ++k)
      for (int64_t i = 0; i < chunk; ++i)
        assert_int_equal(gathered[src[k] * chunk + i], b->ids[r * seq + k * chunk + i]);
  }
}

static void check_split(int64_t seq, int cp) {
  batch b;
  local ranks[4];
  make_batch(&b, seq, cp);
  for (int c = 0; c < cp; ++c)
    split(&b, seq, cp, c, &ranks[c]);
  check_tokens(&b, ranks, seq, cp);
  check_balance(ranks, seq, cp);
  check_scored(&b, ranks, seq, cp);
  check_gather(&b, ranks, seq, cp);
  if (seq % 2 == 0)
    check_kv_order(&b, ranks, seq, cp);
  if (cp == 1) { // nothing changes at all: today's bytes, labels unshifted
    assert_memory_equal(ranks[0].ids, b.ids, (size_t)(ROWS * seq) * sizeof(int64_t));
    assert_memory_equal(ranks[0].labels, b.labels, (size_t)(ROWS * seq) * sizeof(int64_t));
    assert_memory_equal(ranks[0].positions, b.positions, (size_t)(ROWS * seq) * sizeof(int64_t));
    assert_memory_equal(ranks[0].segments, b.segments, (size_t)(ROWS * seq) * sizeof(int64_t));
  }
}

static void test_cp1_identity(void **state) {
  (void)state;
  const int64_t seqs[] = {1, 7, 8, 24};
  for (size_t k = 0; k < sizeof seqs / sizeof seqs[0]; ++k)
    check_split(seqs[k], 1);
}

static void test_cp2_3_4(void **state) {
  (void)state;
  const struct { int cp; int64_t seq; } cases[] = {
      {2, 4}, {2, 8}, {2, 12}, {2, 64}, {3, 6}, {3, 12}, {3, 48},
      {4, 8}, {4, 16}, {4, 24}, {4, 64}};
  for (size_t k = 0; k < sizeof cases / sizeof cases[0]; ++k)
    for (int repeat = 0; repeat < 4; ++repeat) // other random documents
      check_split(cases[k].seq, cases[k].cp);
}

static void test_by_hand(void **state) {
  (void)state;
  // One row, seq 8, cp 2: chunks of 2 tokens; rank 0 holds chunks 0 and 3
  // (tokens 0 1 6 7), rank 1 chunks 1 and 2 (tokens 2 3 4 5). Documents
  // [0, 5) and [5, 8): labels -100 at tokens 0 and 5. Shifted labels:
  // 11 12 13 14 -100 16 17 -100.
  const int64_t ids[] = {10, 11, 12, 13, 14, 15, 16, 17};
  const int64_t labels[] = {-100, 11, 12, 13, 14, -100, 16, 17};
  const int64_t pos[] = {0, 1, 2, 3, 4, 0, 1, 2}, seg[] = {0, 0, 0, 0, 0, 1, 1, 1};
  const int64_t want_ids[2][4] = {{10, 11, 16, 17}, {12, 13, 14, 15}};
  const int64_t want_labels[2][4] = {{11, 12, 17, -100}, {13, 14, -100, 16}};
  const int64_t want_pos[2][4] = {{0, 1, 1, 2}, {2, 3, 4, 0}};
  const int64_t want_seg[2][4] = {{0, 0, 1, 1}, {0, 0, 0, 1}};
  train_rows_view g = {.ids = ids, .labels = labels, .positions = pos, .segments = seg};
  for (int c = 0; c < 2; ++c) {
    int64_t i[4], l[4], p[4], s[4];
    train_pack_rows out = {.ids = i, .labels = l, .positions = p, .segments = s};
    assert_null(train_cp_split(&g, 1, 8, 2, c, &out));
    assert_memory_equal(i, want_ids[c], sizeof i);
    assert_memory_equal(l, want_labels[c], sizeof l);
    assert_memory_equal(p, want_pos[c], sizeof p);
    assert_memory_equal(s, want_seg[c], sizeof s);
  }
  // Gathered: rank 0's chunks (0, 3) then rank 1's (1, 2); global chunk k
  // is gathered chunk 0, 2, 3, 1.
  int64_t src[4];
  srt_cp_kv_chunk_order(2, src);
  assert_memory_equal(src, ((int64_t[]){0, 2, 3, 1}), sizeof src);
}

static void test_wide_tokens(void **state) {
  (void)state; // an activation [2, 12, 3] of floats: 12 bytes per token
  enum { R = 2, S = 12, H = 3, CP = 3 };
  float x[R * S * H], parts[CP][R * S * H / CP], back[R * S * H];
  for (int i = 0; i < R * S * H; ++i)
    x[i] = (float)i * 0.5f;
  for (int c = 0; c < CP; ++c) {
    assert_null(srt_cp_take(x, R, S, CP, c, H * sizeof(float), parts[c]));
    for (int64_t j = 0; j < S / CP; ++j) // rank c's token j is global token t, all H values
      assert_memory_equal(&parts[c][(S / CP + j) * H],
                          &x[(S + srt_cp_global_token(S, CP, c, j)) * H], H * sizeof(float));
  }
  const void *locals[CP] = {parts[0], parts[1], parts[2]};
  assert_null(srt_cp_gather(locals, R, S, CP, H * sizeof(float), back));
  assert_memory_equal(back, x, sizeof x);
}

// The refusal must be SRT_INVALID_ARGUMENT naming every string of `needles`.
static void refused(srt_status st, const char *const *needles) {
  assert_refused(st, SRT_INVALID_ARGUMENT, needles);
}

static void test_refusals(void **state) {
  (void)state;
  int64_t ids[12] = {0}, out[12], pos_out[12];
  train_rows_view g = {.ids = ids, .labels = ids};
  train_pack_rows l = {.ids = out, .labels = out};
  refused(train_cp_split(&g, 1, 10, 3, 0, &l),
          (const char *[]){"seq 10", "2 x cp = 6", "cp 3", NULL});
  refused(train_cp_split(&g, 1, 6, 2, 1, &l), (const char *[]){"seq 6", "2 x cp = 4", NULL});
  refused(srt_cp_check(2, 2, 0), (const char *[]){"seq 2", "2 x cp = 4", NULL});
  refused(srt_cp_check(8, 2, 2), (const char *[]){"rank 2", "cp 2", NULL});
  refused(srt_cp_check(8, 2, -1), (const char *[]){"rank -1", NULL});
  refused(srt_cp_check(8, 0, 0), (const char *[]){"cp 0", NULL});
  refused(srt_cp_check(0, 1, 0), (const char *[]){"seq 0", NULL});
  refused(srt_cp_take(ids, -1, 8, 2, 0, 8, out), (const char *[]){"-1 rows", NULL});
  refused(srt_cp_take(ids, 1, 8, 2, 0, 0, out), (const char *[]){"0 bytes", NULL});
  refused(srt_cp_gather((const void *[]){ids, ids, ids}, 1, 9, 3, 8, out),
          (const char *[]){"seq 9", "cp 3", NULL});
  l.positions = pos_out; // asked for, but the batch has none
  refused(train_cp_split(&g, 1, 8, 2, 0, &l), (const char *[]){"positions", NULL});
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_cp1_identity), cmocka_unit_test(test_cp2_3_4),
      cmocka_unit_test(test_by_hand),      cmocka_unit_test(test_wide_tokens),
      cmocka_unit_test(test_refusals),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
