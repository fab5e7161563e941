// The pre-tokenizer chain of a tokenizer.json (tokenizers/src/pre_tokenizers):
// Split (a regex or a literal, with the five delimiter behaviors), ByteLevel
// (optional prefix space and GPT-2 regex; the byte mapping itself is folded
// into the vocabulary, see tokenizer_internal.h) and Metaspace. Each turns
// every piece of the previous stage into zero or more pieces; empty pieces
// are dropped, as the library drops them.
#include <stdlib.h>
#include <string.h>

#include "tokenizer_internal.h"

int tok_pieces_add(tok_pieces *p, const char *s, size_t len, bool first) {
  if (!len)
    return 0;
  if (p->count == p->cap) {
    size_t cap = p->cap ? 2 * p->cap : 64;
    struct tok_piece *grown = realloc(p->pieces, cap * sizeof *grown);
    if (!grown)
      return -1;
    p->pieces = grown;
    p->cap = cap;
  }
  size_t off = p->text.len;
  if (tok_buf_append(&p->text, s, len))
    return -1;
  p->pieces[p->count++] = (struct tok_piece){off, len, first};
  return 0;
}

void tok_pieces_free(tok_pieces *p) {
  free(p->text.data);
  free(p->pieces);
  memset(p, 0, sizeof *p);
}

typedef struct {
  size_t start, end;
  bool match;
} span;

// Splits s by the matches of `pat` under `behavior` (tokenizers'
// SplitDelimiterBehavior, with `invert` swapping matches and gaps) into `out`.
static int split(tok_tokenizer *t, const tok_pattern *pat, tok_split_behavior behavior,
                 bool invert, const char *s, size_t len, bool first, tok_pieces *out,
                 char **error) {
  span *spans = NULL;
  size_t n = 0, cap = 0, at = 0, prev = 0, ms, me;
  int found, rc = -1;
#define PUSH(a, b, m)                                                                    \
  do {                                                                                   \
    if (n == cap) {                                                                      \
      cap = cap ? 2 * cap : 64;                                                          \
      span *g = realloc(spans, cap * sizeof *g);                                         \
      if (!g)                                                                            \
        goto done;                                                                       \
      spans = g;                                                                         \
    }                                                                                    \
    spans[n++] = (span){(a), (b), (m) != invert};                                        \
  } while (0)
  while (at <= len && (found = tok_pattern_next(pat, t->match, s, len, at, &ms, &me, error)) == 1) {
    if (prev != ms)
      PUSH(prev, ms, false);
    PUSH(ms, me, true);
    prev = me;
    at = me;
    if (me == ms) { // an empty match: search again one character on
      int32_t cp;
      int k = ms < len ? tok_utf8_decode(s, len, ms, &cp) : 1;
      at = ms + (size_t)(k ? k : 1);
    }
  }
  if (at <= len && found < 0)
    goto done;
  if (prev != len)
    PUSH(prev, len, false);
#undef PUSH
  // Merge the spans as the behavior says (in place; `w` is the write index).
  size_t w = 0;
  bool previous_match = false;
  if (behavior == TOK_SPLIT_MERGED_WITH_NEXT) { // right to left, as the library
    for (size_t r = n; r-- > 0;) {
      if (spans[r].match && !previous_match && w)
        spans[n - w].start = spans[r].start; // grow the piece to its right
      else
        spans[n - ++w] = spans[r];
      previous_match = spans[r].match;
    }
    memmove(spans, spans + n - w, w * sizeof *spans);
  } else {
    for (size_t r = 0; r < n; ++r) {
      bool m = spans[r].match;
      if (behavior == TOK_SPLIT_REMOVED) {
        if (!m)
          spans[w++] = spans[r];
      } else if (behavior == TOK_SPLIT_MERGED_WITH_PREVIOUS && m && !previous_match && w)
        spans[w - 1].end = spans[r].end;
      else if (behavior == TOK_SPLIT_CONTIGUOUS && m == previous_match && w)
        spans[w - 1].end = spans[r].end;
      else
        spans[w++] = spans[r];
      previous_match = m;
    }
  }
  for (size_t i = 0; i < w; ++i)
    if (tok_pieces_add(out, s + spans[i].start, spans[i].end - spans[i].start,
                       first && spans[i].start == 0))
      goto done;
  rc = 0;
done:
  free(spans);
  return rc;
}

static int byte_level(tok_tokenizer *t, const tok_pretokenizer *p, const char *s, size_t len,
                      bool first, tok_pieces *out, char **error) {
  tok_buf b = {0};
  if (p->add_prefix_space && (!len || s[0] != ' ')) {
    if (tok_buf_append(&b, " ", 1) || tok_buf_append(&b, s, len))
      return free(b.data), -1;
    s = b.data;
    len = b.len;
  }
  int rc = p->use_regex ? split(t, &p->pattern, TOK_SPLIT_ISOLATED, false, s, len, first, out, error)
                        : tok_pieces_add(out, s, len, first);
  free(b.data);
  return rc;
}

static int metaspace(tok_tokenizer *t, const tok_pretokenizer *p, const char *s, size_t len,
                     bool first, tok_pieces *out, char **error) {
  size_t rlen = strlen(p->replacement);
  tok_buf b = {0};
  int rc = -1;
  // Replace ' ' first, then test the start, as the library does.
  for (size_t i = 0; i < len; ++i)
    if (s[i] == ' ' ? tok_buf_append(&b, p->replacement, rlen) : tok_buf_append(&b, s + i, 1))
      goto done;
  bool starts = b.len >= rlen && !memcmp(b.data, p->replacement, rlen);
  if (!starts && (p->prepend == TOK_PREPEND_ALWAYS || (p->prepend == TOK_PREPEND_FIRST && first))) {
    tok_buf c = {0};
    if (tok_buf_append(&c, p->replacement, rlen) || tok_buf_append(&c, b.data, b.len)) {
      free(c.data);
      goto done;
    }
    free(b.data);
    b = c;
  }
  if (p->split) {
    tok_pattern lit = {.literal = (char *)p->replacement, .literal_len = rlen};
    rc = split(t, &lit, TOK_SPLIT_MERGED_WITH_NEXT, false, b.data, b.len, first, out, error);
  } else
    rc = tok_pieces_add(out, b.data, b.len, first);
done:
  free(b.data);
  return rc;
}

int tok_pretokenize(tok_tokenizer *t, const char *s, size_t len, bool first, tok_pieces *out,
                    char **error) {
  tok_pieces cur = {0};
  if (tok_pieces_add(&cur, s, len, first))
    return tok_pieces_free(&cur), -1;
  for (int i = 0; i < t->n_pres; ++i) {
    const tok_pretokenizer *p = &t->pres[i];
    tok_pieces next = {0};
    for (size_t k = 0; k < cur.count; ++k) {
      const char *ps = cur.text.data + cur.pieces[k].off;
      size_t pl = cur.pieces[k].len;
      bool pf = cur.pieces[k].first;
      int rc = p->kind == TOK_PRE_SPLIT
                   ? split(t, &p->pattern, p->behavior, p->invert, ps, pl, pf, &next, error)
               : p->kind == TOK_PRE_BYTELEVEL ? byte_level(t, p, ps, pl, pf, &next, error)
                                              : metaspace(t, p, ps, pl, pf, &next, error);
      if (rc) {
        tok_pieces_free(&next);
        tok_pieces_free(&cur);
        return -1;
      }
    }
    tok_pieces_free(&cur);
    cur = next;
  }
  tok_pieces_free(out);
  *out = cur;
  return 0;
}
