// Unit tests of token files (runtime/src/tokens.c): batches read back the
// tokens written, at every token width; an id outside the model's
// vocabulary is found; and a file truncated while it is open is an error
// naming its sizes (a mapping of it once killed every rank with SIGBUS).
#include <stdlib.h>
#include <unistd.h>

#include "runtime_test_util.h"
#include "shardrt/tokens.h"

static char g_path[64];

static void make_path(void) {
  snprintf(g_path, sizeof g_path, "/tmp/runtime_tokens_test_%d.tok", (int)getpid());
}

static void test_batches_read_back_every_width(void **state) {
  (void)state;
  make_path();
  const int64_t vocabs[] = {256, 65536, (int64_t)1 << 20};
  for (int v = 0; v < 3; ++v) {
    enum { kCount = 1000 };
    int64_t tokens[kCount];
    for (int64_t i = 0; i < kCount; ++i)
      tokens[i] = (i * 7919) % vocabs[v];
    ASSERT_OK(srt_tokens_write(g_path, tokens, kCount, vocabs[v]));
    srt_tokens *t;
    ASSERT_OK(srt_tokens_open(g_path, &t));
    assert_int_equal(srt_tokens_count(t), kCount);
    assert_int_equal(srt_tokens_vocab(t), vocabs[v]);
    // Step 3 of a batch of 4 rows of 16: row r starts at ((3-1)*4 + r)*16.
    int64_t ids[2 * 16];
    ASSERT_OK(srt_tokens_batch(t, 3, 4, 16, 1, 2, ids));
    for (int r = 0; r < 2; ++r)
      for (int k = 0; k < 16; ++k)
        assert_int_equal(ids[r * 16 + k], tokens[(8 + 1 + r) * 16 + k]);
    assert_int_equal(srt_tokens_at(t, 999), tokens[999]);
    ASSERT_OK(srt_tokens_check_vocab(t, vocabs[v]));
    // The first id at or above 100 is the one named.
    int64_t first = 0;
    while (tokens[first] < 100)
      ++first;
    char want[64];
    snprintf(want, sizeof want, "token %lld has id %lld,", (long long)first,
             (long long)tokens[first]);
    ASSERT_ERROR(srt_tokens_check_vocab(t, 100), SRT_OUT_OF_RANGE, want);
    srt_tokens_close(t);
  }
  unlink(g_path);
}

static void test_truncated_during_the_run(void **state) {
  (void)state;
  make_path();
  int64_t tokens[4096];
  for (int i = 0; i < 4096; ++i)
    tokens[i] = i % 256;
  ASSERT_OK(srt_tokens_write(g_path, tokens, 4096, 256));
  srt_tokens *t;
  ASSERT_OK(srt_tokens_open(g_path, &t));
  assert_int_equal(truncate(g_path, 1000), 0);
  int64_t ids[64];
  // A window past the new end (4096 one-byte tokens after a 32-byte
  // header): rows start at ((step - 1) * 1 + 0) * 64.
  ASSERT_ERROR(srt_tokens_batch(t, 50, 1, 64, 0, 1, ids), SRT_DATA_LOSS,
               "is 1000 bytes now, 4128 when it was opened: it was truncated or rewritten "
               "during the run");
  ASSERT_ERROR(srt_tokens_check_vocab(t, 256), SRT_DATA_LOSS, "truncated");
  assert_int_equal(srt_tokens_at(t, 4000), -1);
  srt_tokens_close(t);
  unlink(g_path);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_batches_read_back_every_width),
      cmocka_unit_test(test_truncated_during_the_run),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
