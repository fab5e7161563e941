// Unit tests of token files (runtime/src/tokens.c): batches read back the
// tokens written, at every token width; an id outside the model's
// vocabulary is found; and a file truncated while it is open is an error
// naming its sizes (a mapping of it once killed every rank with SIGBUS);
// version 2 files (document index, tokenizer identity) round-trip, and each
// malformed index or field is refused naming the file and the values.
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
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

// A version 2 file of 10 one-byte tokens in 3 documents [0,4) [4,5) [5,10)
// with prompts 2, 0, 3, made by "t.json" (8 name bytes): fields at 32,
// name at 56, starts at 64 (4 x 8), prompts at 96 (3 x 8), tokens at 120.
static const int64_t kTokens[10] = {5, 6, 7, 8, 9, 10, 11, 12, 13, 14};
static const int64_t kStarts[4] = {0, 4, 5, 10}, kPrompts[3] = {2, 0, 3};
enum { kStartsAt = 64, kPromptsAt = 96, kTokensAt = 120 };

static srt_status write_v2(void) {
  srt_tokenizer_identity id = {.kind = SRT_TOKENIZER_JSON,
                               .digest = srt_tokenizer_digest("{}", 2), .name = "t.json"};
  return srt_tokens_write_documents(g_path, kTokens, 10, 256, kStarts, kPrompts, 3, &id);
}

// Overwrites the little-endian u64 at byte `at` of the test file.
static void poke_u64(int64_t at, uint64_t v) {
  unsigned char b[8];
  for (int i = 0; i < 8; ++i, v >>= 8)
    b[i] = (unsigned char)(v & 0xff);
  int fd = open(g_path, O_WRONLY);
  assert_true(fd >= 0);
  assert_int_equal(pwrite(fd, b, 8, at), 8);
  close(fd);
}

static void test_v2_round_trip(void **state) {
  (void)state;
  make_path();
  ASSERT_OK(write_v2());
  srt_tokens *t;
  ASSERT_OK(srt_tokens_open(g_path, &t));
  assert_int_equal(srt_tokens_version(t), 2);
  assert_int_equal(srt_tokens_count(t), 10);
  assert_int_equal(srt_tokens_documents(t), 3);
  for (int d = 0; d < 4; ++d)
    assert_int_equal(srt_tokens_document_starts(t)[d], kStarts[d]);
  for (int d = 0; d < 3; ++d)
    assert_int_equal(srt_tokens_prompt_lengths(t)[d], kPrompts[d]);
  srt_tokenizer_identity id;
  assert_true(srt_tokens_tokenizer(t, &id));
  assert_int_equal(id.kind, SRT_TOKENIZER_JSON);
  // FNV-1a 64 of "{}", computed by hand from the basis and prime.
  uint64_t h = 0xcbf29ce484222325ull;
  h = (h ^ '{') * 0x100000001b3ull;
  h = (h ^ '}') * 0x100000001b3ull;
  assert_true(id.digest == h);
  assert_string_equal(id.name, "t.json");
  int64_t ids[10];
  ASSERT_OK(srt_tokens_read(t, 3, 7, ids));
  for (int i = 0; i < 7; ++i)
    assert_int_equal(ids[i], kTokens[3 + i]);
  ASSERT_ERROR(srt_tokens_read(t, 5, 6, ids), SRT_INVALID_ARGUMENT, "tokens [5, 11) outside");
  assert_int_equal(srt_tokens_at(t, 9), 14);
  srt_tokens_close(t);
  // Bytes: the identity is the kind alone.
  srt_tokenizer_identity bytes = {.kind = SRT_TOKENIZER_BYTES, .name = "bytes"};
  ASSERT_OK(srt_tokens_write_documents(g_path, kTokens, 10, 256, kStarts, kPrompts, 3, &bytes));
  ASSERT_OK(srt_tokens_open(g_path, &t));
  assert_true(srt_tokens_tokenizer(t, &id));
  assert_int_equal(id.kind, SRT_TOKENIZER_BYTES);
  assert_string_equal(id.name, "bytes");
  srt_tokens_close(t);
  unlink(g_path);
}

static void test_v1_still_reads(void **state) {
  (void)state;
  make_path();
  ASSERT_OK(srt_tokens_write(g_path, kTokens, 10, 256));
  srt_tokens *t;
  ASSERT_OK(srt_tokens_open(g_path, &t));
  assert_int_equal(srt_tokens_version(t), 1);
  assert_int_equal(srt_tokens_documents(t), 0);
  assert_null(srt_tokens_document_starts(t));
  srt_tokenizer_identity id;
  assert_false(srt_tokens_tokenizer(t, &id));
  // The windowed stream as before: step 2 of 2 rows of 3, row 1 starts at
  // ((2 - 1) * 2 + 1) * 3 mod (10 - 3 + 1) = 1.
  int64_t ids[3];
  ASSERT_OK(srt_tokens_batch(t, 2, 2, 3, 1, 1, ids));
  for (int i = 0; i < 3; ++i)
    assert_int_equal(ids[i], kTokens[1 + i]);
  srt_tokens_close(t);
  unlink(g_path);
}

// Opening the poked file fails with DATA_LOSS naming `needle`.
static void refused(int64_t at, uint64_t v, const char *needle) {
  ASSERT_OK(write_v2());
  poke_u64(at, v);
  srt_tokens *t = (srt_tokens *)1;
  ASSERT_ERROR(srt_tokens_open(g_path, &t), SRT_DATA_LOSS, needle);
  assert_null(t);
}

static void test_v2_refusals(void **state) {
  (void)state;
  make_path();
  refused(kStartsAt, 1, "document 0 starts at token 1, not 0");
  refused(kStartsAt + 3 * 8, 9, "the document index ends at token 9, but the file has 10 tokens");
  refused(kStartsAt + 2 * 8, 3, "document 1 starts at token 4 and document 2 at 3: documents "
                                "must be non-empty, in order and not overlap");
  refused(kStartsAt + 2 * 8, 4, "document 1 starts at token 4 and document 2 at 4");
  refused(kPromptsAt + 0 * 8, 5, "document 0 has a prompt of 5 tokens, outside [0, its 4 tokens]");
  refused(kPromptsAt + 8, (uint64_t)1 << 63, "prompt length 1 is 9223372036854775808, past 2^63");
  refused(32, 4, "header says 10 tokens of 1 bytes and 4 documents");      // documents
  refused(16, 11, "header says 11 tokens of 1 bytes and 3 documents");     // count
  refused(48, 7, "tokenizer kind 7");                                      // kind, name 0
  refused(48, (uint64_t)5000 << 32 | 1, "tokenizer name of 5000 bytes");   // name length
  unlink(g_path);
}

static void test_v2_writer_refusals(void **state) {
  (void)state;
  make_path();
  srt_tokenizer_identity id = {.kind = SRT_TOKENIZER_JSON, .digest = 1, .name = "t.json"};
  const int64_t bad_end[4] = {0, 4, 5, 9}, bad_order[4] = {0, 5, 4, 10};
  const int64_t long_prompt[3] = {2, 2, 3};
  ASSERT_ERROR(srt_tokens_write_documents(g_path, kTokens, 10, 256, bad_end, kPrompts, 3, &id),
               SRT_INVALID_ARGUMENT, "ends at token 9, but the file has 10 tokens");
  ASSERT_ERROR(srt_tokens_write_documents(g_path, kTokens, 10, 256, bad_order, kPrompts, 3, &id),
               SRT_INVALID_ARGUMENT, "document 1 starts at token 5 and document 2 at 4");
  ASSERT_ERROR(
      srt_tokens_write_documents(g_path, kTokens, 10, 256, kStarts, long_prompt, 3, &id),
      SRT_INVALID_ARGUMENT, "document 1 has a prompt of 2 tokens, outside [0, its 1 tokens]");
  srt_tokenizer_identity bytes_digest = {.kind = SRT_TOKENIZER_BYTES, .digest = 3,
                                         .name = "bytes"};
  ASSERT_ERROR(srt_tokens_write_documents(g_path, kTokens, 10, 256, kStarts, kPrompts, 3,
                                          &bytes_digest),
               SRT_INVALID_ARGUMENT, "bytes with digest 0");
  assert_int_equal(access(g_path, F_OK), -1); // nothing was written
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_batches_read_back_every_width),
      cmocka_unit_test(test_truncated_during_the_run),
      cmocka_unit_test(test_v2_round_trip),
      cmocka_unit_test(test_v1_still_reads),
      cmocka_unit_test(test_v2_refusals),
      cmocka_unit_test(test_v2_writer_refusals),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
