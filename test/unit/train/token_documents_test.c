// The driver's side of version 2 token files (runtime/train/token_documents.c):
// the tokenizer warning names both tokenizers when the file's digest is not
// that of the tokenizer.json compiled into the program, and warns on a
// byte-level file given to a model with a tokenizer; nothing is said when
// they agree or either does not say. Version 1 files get no row plan, and
// version 2 files are refused until the program takes packed rows.
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../runtime/runtime_test_util.h"
#include "train_internal.h"

static char g_path[64];
static const char kJson[] = "{\"model\": {\"type\": \"BPE\"}}";
static const int64_t kTokens[6] = {1, 2, 3, 4, 5, 6}, kStarts[3] = {0, 2, 6}, kPrompts[2] = {0, 1};

static srt_tokens *write_open(const srt_tokenizer_identity *id) {
  if (id)
    ASSERT_OK(srt_tokens_write_documents(g_path, kTokens, 6, 256, kStarts, kPrompts, 2, id));
  else
    ASSERT_OK(srt_tokens_write(g_path, kTokens, 6, 256));
  srt_tokens *t;
  ASSERT_OK(srt_tokens_open(g_path, &t));
  return t;
}

static void test_tokenizer_warning(void **state) {
  (void)state;
  srt_program p = {.model = "qwen/config.json", .tokenizer_json = kJson};
  srt_program none = {.model = "bare/config.json", .tokenizer_json = ""};
  char buf[2048];
  srt_tokenizer_identity same = {.kind = SRT_TOKENIZER_JSON,
                                 .digest = srt_tokenizer_digest(kJson, strlen(kJson)),
                                 .name = "qwen/tokenizer.json"};
  srt_tokenizer_identity other = {.kind = SRT_TOKENIZER_JSON, .digest = 0x1234,
                                  .name = "llama/tokenizer.json"};
  srt_tokenizer_identity bytes = {.kind = SRT_TOKENIZER_BYTES, .name = "bytes"};
  srt_tokens *t = write_open(&same);
  assert_false(train_tokenizer_mismatch(&p, t, buf, sizeof buf));
  srt_tokens_close(t);
  t = write_open(&other);
  assert_true(train_tokenizer_mismatch(&p, t, buf, sizeof buf));
  assert_non_null(
      strstr(buf, "made by tokenizer 'llama/tokenizer.json' (digest 0000000000001234)"));
  assert_non_null(strstr(buf, "the tokenizer.json beside 'qwen/config.json' (digest"));
  assert_false(train_tokenizer_mismatch(&none, t, buf, sizeof buf)); // the model has none
  srt_tokens_close(t);
  t = write_open(&bytes);
  assert_true(train_tokenizer_mismatch(&p, t, buf, sizeof buf));
  assert_non_null(strstr(buf, "holds byte-level tokens"));
  assert_non_null(strstr(buf, "beside 'qwen/config.json'"));
  assert_false(train_tokenizer_mismatch(&none, t, buf, sizeof buf));
  srt_tokens_close(t);
  t = write_open(NULL); // version 1: no identity
  assert_false(train_tokenizer_mismatch(&p, t, buf, sizeof buf));
  srt_tokens_close(t);
  unlink(g_path);
}

static void test_plan_and_refusal(void **state) {
  (void)state;
  srt_program p = {.seq = 4};
  train_pack_plan plan;
  srt_tokens *t = write_open(NULL);
  ASSERT_OK(train_pack_setup(t, 4, &plan));
  assert_int_equal(plan.rows, 0); // version 1: windows
  srt_tokens_close(t);
  srt_tokenizer_identity bytes = {.kind = SRT_TOKENIZER_BYTES, .name = "bytes"};
  t = write_open(&bytes);
  ASSERT_OK(train_pack_setup(t, 4, &plan));
  assert_int_equal(plan.rows, 2); // [d0 pad pad] [d1]
  // A step with both document inputs takes packed rows; one without them
  // (a hand-written graph: offsets -1) is refused.
  ASSERT_OK(train_packed_supported(&p, g_path));
  p.segment_ids_offset = -1;
  ASSERT_ERROR(train_packed_supported(&p, g_path), SRT_FAILED_PRECONDITION,
               "holds documents (version 2): packed documents need a step that takes "
               "position_ids and segment_ids");
  train_pack_plan_free(&plan);
  srt_tokens_close(t);
  // No document (and no token): named, not a division by zero rows.
  ASSERT_OK(srt_tokens_write_documents(g_path, kTokens, 0, 256, kStarts, kPrompts, 0, &bytes));
  ASSERT_OK(srt_tokens_open(g_path, &t));
  ASSERT_ERROR(train_pack_setup(t, 4, &plan), SRT_OUT_OF_RANGE, "holds no document");
  srt_tokens_close(t);
  unlink(g_path);
}

int main(void) {
  snprintf(g_path, sizeof g_path, "/tmp/token_documents_test_%d.tok", (int)getpid());
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_tokenizer_warning),
      cmocka_unit_test(test_plan_and_refusal),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
