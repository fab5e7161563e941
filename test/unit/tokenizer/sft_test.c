// shard-tokens on a prompt-completion JSONL (test/tokenizers/sft/pairs.jsonl)
// with two fixture tokenizers: the version 2 token file it writes holds, per
// pair, the ids and the prompt length that TRL's tokenization gives with
// the `tokenizers` library (test/tokenizers/generate_sft.py: prompt +
// completion + EOS text as one text, the prompt alone for its length, BOS
// per tokenizer_config.json), and names its tokenizer by the digest of
// tokenizer.json's bytes and the path given.
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../runtime/runtime_test_util.h"
#include "shardrt/tokens.h"

static char g_out[64];

// The digest of the file's bytes, read here (srt_tokenizer_digest itself is
// checked by hand in runtime_tokens_test).
static uint64_t file_digest(const char *path) {
  FILE *f = fopen(path, "rb");
  assert_non_null(f);
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  fseek(f, 0, SEEK_SET);
  char *buf = malloc((size_t)n);
  assert_int_equal(fread(buf, 1, (size_t)n, f), (size_t)n);
  fclose(f);
  uint64_t h = srt_tokenizer_digest(buf, (size_t)n);
  free(buf);
  return h;
}

static void check_tokenizer(const char *name) {
  char tok[1024], want[1024], cmd[4096];
  snprintf(tok, sizeof tok, "%s/%s/tokenizer.json", TOKENIZER_FIXTURES, name);
  snprintf(want, sizeof want, "%s/sft/%s.json", TOKENIZER_FIXTURES, name);
  snprintf(cmd, sizeof cmd, "'%s' --tokenizer '%s' '%s/sft/pairs.jsonl' -o '%s' >/dev/null 2>&1",
           SHARD_TOKENS, tok, TOKENIZER_FIXTURES, g_out);
  assert_int_equal(system(cmd), 0);
  json_error_t je;
  json_t *root = json_load_file(want, 0, &je), *docs = json_object_get(root, "documents");
  assert_true(json_is_array(docs));
  srt_tokens *t;
  ASSERT_OK(srt_tokens_open(g_out, &t));
  assert_int_equal(srt_tokens_version(t), 2);
  assert_int_equal(srt_tokens_documents(t), (int64_t)json_array_size(docs));
  const int64_t *starts = srt_tokens_document_starts(t), *prompts = srt_tokens_prompt_lengths(t);
  size_t d;
  json_t *doc;
  json_array_foreach(docs, d, doc) {
    json_t *ids = json_object_get(doc, "ids");
    assert_int_equal(starts[d + 1] - starts[d], (int64_t)json_array_size(ids));
    assert_int_equal(prompts[d], json_integer_value(json_object_get(doc, "prompt")));
    for (size_t i = 0; i < json_array_size(ids); ++i)
      assert_int_equal(srt_tokens_at(t, starts[d] + (int64_t)i),
                       json_integer_value(json_array_get(ids, i)));
  }
  srt_tokenizer_identity id;
  assert_true(srt_tokens_tokenizer(t, &id));
  assert_int_equal(id.kind, SRT_TOKENIZER_JSON);
  assert_true(id.digest == file_digest(tok));
  assert_string_equal(id.name, tok);
  srt_tokens_close(t);
  json_decref(root);
  unlink(g_out);
}

static void test_qwen2_pairs(void **state) {
  (void)state;
  check_tokenizer("bytelevel-qwen2");
}

static void test_llama2_pairs(void **state) {
  (void)state;
  check_tokenizer("sentencepiece-llama2");
}

int main(void) {
  snprintf(g_out, sizeof g_out, "/tmp/sft_test_%d.tok", (int)getpid());
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_qwen2_pairs),
      cmocka_unit_test(test_llama2_pairs),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
