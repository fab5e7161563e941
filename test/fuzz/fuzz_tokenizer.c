// libFuzzer target: the tokenizer (tools/shard-tokens). The first byte picks
// one of the test tokenizers (test/tokenizers); the rest is the text. Valid
// UTF-8 is encoded and decoded; every id must be inside the vocabulary, and
// for the byte-level tokenizers (lossless) the decoded text must be the
// input exactly. Invalid UTF-8 must be found by tok_utf8_check at a byte
// where decoding really fails.
#define _GNU_SOURCE // memmem
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <utf8proc.h>

#include "tokenizer.h"

#ifndef TOKENIZER_FIXTURES
#error "TOKENIZER_FIXTURES: the test/tokenizers directory"
#endif

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const char *kinds[] = {"bytelevel-qwen2", "bytelevel-llama3", "sentencepiece-llama2",
                              "metaspace"};
enum { KINDS = sizeof kinds / sizeof *kinds };

static tok_tokenizer *get(int k) {
  static tok_tokenizer *loaded[KINDS];
  if (!loaded[k]) {
    char *path = tok_format("%s/%s/tokenizer.json", TOKENIZER_FIXTURES, kinds[k]), *error = NULL;
    loaded[k] = tok_load(path, &error);
    if (!loaded[k])
      abort();
    free(path);
  }
  return loaded[k];
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (!size)
    return 0;
  int k = data[0] % KINDS;
  const char *text = (const char *)data + 1;
  size_t len = size - 1;
  if (tok_utf8_check(text, len) >= 0)
    return 0;
  tok_tokenizer *t = get(k);
  tok_ids ids = {0};
  char *error = NULL;
  if (tok_encode(t, text, len, &ids, &error))
    abort();
  for (size_t i = 0; i < ids.count; ++i)
    if (ids.ids[i] < 0 || ids.ids[i] >= tok_vocab_size(t))
      abort();
  tok_buf back = {0};
  if (tok_decode(t, ids.ids, ids.count, &back, &error))
    abort();
  // Byte-level BPE is lossless: the text comes back as its normalizer left
  // it (qwen2: NFC; llama3: none), but for the llama3 fixture's <tool>,
  // whose lstrip/rstrip eat the spaces around it (as in the library).
  utf8proc_uint8_t *nfc = NULL;
  utf8proc_ssize_t nfc_len = k == 0 ? utf8proc_map((const utf8proc_uint8_t *)text,
                                                   (utf8proc_ssize_t)len, &nfc,
                                                   UTF8PROC_STABLE | UTF8PROC_COMPOSE)
                                    : 0;
  const char *want = k == 0 ? (const char *)nfc : text;
  size_t want_len = k == 0 ? (size_t)nfc_len : len;
  bool lossless = (k == 0 && nfc_len >= 0) || (k == 1 && !memmem(text, len, "<tool>", 6));
  if (lossless && (back.len != want_len || memcmp(back.data ? back.data : "", want, want_len)))
    abort();
  free(nfc);
  free(back.data);
  free(ids.ids);
  return 0;
}
