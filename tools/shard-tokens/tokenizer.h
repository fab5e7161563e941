// A Hugging Face `tokenizer.json` BPE tokenizer in C: the ids the
// `tokenizers` library (0.2x) produces for the same file, for byte-level BPE
// (GPT-2 / Qwen2 / Qwen3 / Llama 3) and SentencePiece-style BPE (Llama 2,
// Gemma, Mistral: Metaspace, Prepend/Replace normalizers, byte_fallback).
//
// The pipeline is the library's (tokenizers/src/tokenizer/mod.rs):
//   split on added tokens -> normalizer -> split on normalized added tokens
//   -> pre-tokenizer -> BPE model per piece;  decode: ids -> token strings ->
//   decoder chain.
// Unicode normalization is utf8proc's, the pre-tokenizer regexes PCRE2's
// (UTF + UCP + JIT); nothing here holds a Unicode table.
#ifndef SHARD_TOKENS_TOKENIZER_H
#define SHARD_TOKENS_TOKENIZER_H

#include <stddef.h>
#include <stdint.h>

typedef struct tok_tokenizer tok_tokenizer;

// A growable array of token ids.
typedef struct {
  int32_t *ids;
  size_t count, cap;
} tok_ids;

// A growable byte string (not NUL-terminated unless said).
typedef struct {
  char *data;
  size_t len, cap;
} tok_buf;

// Loads `path` (a tokenizer.json). Returns NULL and sets *error (a message
// naming the file and the offending JSON field or value; the caller frees
// it) for a malformed file or one this implementation does not support
// (a model other than BPE, BPE dropout, a continuing-subword prefix, a
// normalizer, pre-tokenizer or decoder type not listed in docs/data.md).
tok_tokenizer *tok_load(const char *path, char **error);

// Frees `t` (NULL is a no-op).
void tok_free(tok_tokenizer *t);

// Encodes `len` bytes of valid UTF-8 `text` as `encode(text,
// add_special_tokens=False)` does, appending the ids to `out`. The caller
// checks UTF-8 validity first (tok_utf8_check). Returns 0, or -1 on out of
// memory or a regex engine failure with *error set (caller frees).
int tok_encode(tok_tokenizer *t, const char *text, size_t len, tok_ids *out, char **error);

// Decodes `count` ids as `decode(ids, skip_special_tokens=False)` does,
// appending UTF-8 text to `out`. Returns 0, or -1 with *error set for an id
// outside the vocabulary (naming it and its position) or out of memory.
int tok_decode(const tok_tokenizer *t, const int32_t *ids, size_t count, tok_buf *out,
               char **error);

// The id of the token whose text is `token` (an added token or a vocabulary
// entry), or -1.
int32_t tok_token_to_id(const tok_tokenizer *t, const char *token);

// Characters dropped so far by encodes: not in the vocabulary, no
// byte_fallback for them and no unk_token (the library drops them too).
int64_t tok_dropped(const tok_tokenizer *t);

// One past the largest id of the vocabulary and the added tokens.
int64_t tok_vocab_size(const tok_tokenizer *t);

// Byte offset of the first invalid UTF-8 sequence in `s[0..len)`, or -1
// when all of it is valid (RFC 3629: no overlongs, surrogates or values
// above U+10FFFF).
int64_t tok_utf8_check(const char *s, size_t len);

// A printf-formatted string the caller frees, or NULL when out of memory.
char *tok_format(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

// Appends to a tok_ids / tok_buf; return 0, or -1 when out of memory.
int tok_ids_push(tok_ids *v, int32_t id);
int tok_buf_append(tok_buf *b, const void *data, size_t len);

#endif // SHARD_TOKENS_TOKENIZER_H
