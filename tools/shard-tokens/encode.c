// tok_encode: the encoding pipeline of tokenizers' Tokenizer::encode with
// add_special_tokens=False (no post-processor; shard-tokens adds BOS/EOS
// itself): raw added tokens, normalizer, normalized added tokens,
// pre-tokenizer, BPE.
#include <stdlib.h>
#include <string.h>

#include "tokenizer_internal.h"

// BPE of one piece, word by word where the file allows it (word_start).
static int bpe_words(tok_tokenizer *t, const char *p, size_t len, tok_ids *out) {
  size_t cl = strlen(t->word_start), start = 0;
  if (!cl)
    return tok_bpe(t, p, len, out);
  for (size_t i = 1; i + cl <= len; ++i)
    if (!memcmp(p + i, t->word_start, cl) && (i < cl || memcmp(p + i - cl, t->word_start, cl))) {
      if (tok_bpe(t, p + start, i - start, out))
        return -1;
      start = i;
    }
  return tok_bpe(t, p + start, len - start, out);
}

// A stretch between added tokens, already normalized: pre-tokenize, BPE.
static int encode_normalized(tok_tokenizer *t, const char *s, size_t len, bool first,
                             tok_ids *out, char **error) {
  tok_pieces pieces = {0};
  int rc = tok_pretokenize(t, s, len, first, &pieces, error);
  for (size_t i = 0; !rc && i < pieces.count; ++i)
    rc = bpe_words(t, pieces.text.data + pieces.pieces[i].off, pieces.pieces[i].len, out);
  tok_pieces_free(&pieces);
  return rc;
}

// A stretch between raw added tokens: normalize, then cut at the normalized
// added tokens.
static int encode_raw(tok_tokenizer *t, const char *s, size_t len, bool first, tok_ids *out,
                      char **error) {
  tok_buf norm = {0};
  int rc = tok_normalize(t, s, len, &norm, error);
  if (!rc)
    rc = tok_split_added(t, true, norm.data, norm.len, first, encode_normalized, out, error);
  free(norm.data);
  return rc;
}

int tok_encode(tok_tokenizer *t, const char *text, size_t len, tok_ids *out, char **error) {
  *error = NULL;
  int rc = tok_split_added(t, false, text, len, true, encode_raw, out, error);
  if (rc && !*error)
    *error = tok_format("tokenizer '%s': out of memory", t->path);
  return rc;
}
