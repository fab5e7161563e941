// Added tokens (tokenizers/src/tokenizer/added_vocabulary.rs): the text is
// cut at every added token before the model sees it, leftmost match first
// and the longest at a position (aho-corasick LeftmostLongest), tokens with
// "normalized": false on the raw text and the others on the normalized text;
// single_word, lstrip and rstrip as the library applies them.
#include <string.h>
#include <utf8proc.h>

#include "tokenizer_internal.h"

// Rust's c.is_alphanumeric() || c == '_' (a "word" character for single_word).
static bool word_char(int32_t c) {
  if (c == '_')
    return true;
  utf8proc_category_t k = utf8proc_category(c);
  return (k >= UTF8PROC_CATEGORY_LU && k <= UTF8PROC_CATEGORY_LO) ||
         (k >= UTF8PROC_CATEGORY_ND && k <= UTF8PROC_CATEGORY_NO);
}

// The character ending just before s[i] (i > 0).
static int32_t char_before(const char *s, size_t len, size_t i, size_t *start) {
  size_t j = i - 1;
  while (j && ((unsigned char)s[j] & 0xC0) == 0x80)
    --j;
  int32_t cp = 0;
  tok_utf8_decode(s, len, j, &cp);
  *start = j;
  return cp;
}

// The longest token of the group starting at s[i], or NULL.
static const tok_added *match_at(const tok_tokenizer *t, bool normalized, const char *s,
                                 size_t len, size_t i) {
  const tok_added *best = NULL;
  for (int k = 0; k < t->n_added; ++k) {
    const tok_added *a = &t->added[k];
    if (a->normalized == normalized && a->len <= len - i && (!best || a->len > best->len) &&
        a->content[0] == s[i] && !memcmp(a->content, s + i, a->len))
      best = a;
  }
  return best;
}

int tok_split_added(tok_tokenizer *t, bool normalized, const char *s, size_t len, bool first,
                    tok_text_fn text_fn, tok_ids *out, char **error) {
  bool lead[256] = {false}; // first bytes of the group's tokens
  for (int k = 0; k < t->n_added; ++k)
    if (t->added[k].normalized == normalized)
      lead[(unsigned char)t->added[k].content[0]] = true;
  size_t done = 0; // end of the last token (start of the pending text)
  for (size_t i = 0; i < len;) {
    const tok_added *a = lead[(unsigned char)s[i]] ? match_at(t, normalized, s, len, i) : NULL;
    if (!a) {
      ++i;
      continue;
    }
    size_t start = i, stop = i + a->len, at;
    int32_t cp;
    if (a->single_word) {
      bool left_ok = !start || !word_char(char_before(s, len, start, &at));
      bool right_ok = stop == len || !tok_utf8_decode(s, len, stop, &cp) || !word_char(cp);
      if (!left_ok || !right_ok) { // rejected: the library moves past the match
        i = stop;
        continue;
      }
    }
    while (a->lstrip && start > done && tok_is_whitespace(char_before(s, len, start, &at)))
      start = at;
    int k;
    while (a->rstrip && stop < len && (k = tok_utf8_decode(s, len, stop, &cp)) &&
           tok_is_whitespace(cp))
      stop += (size_t)k;
    if (start > done && text_fn(t, s + done, start - done, first && done == 0, out, error))
      return -1;
    if (tok_ids_push(out, a->id))
      return -1;
    done = i = stop;
  }
  return done < len ? text_fn(t, s + done, len - done, first && done == 0, out, error) : 0;
}
