// tok_decode: tokenizers' Tokenizer::decode (skip_special_tokens=False):
// ids to token strings, then the decoder chain (tokenizers/src/decoders):
// ByteLevel, Replace, ByteFallback, Fuse, Strip, Metaspace, each a
// transformation of the token list.
#include <stdlib.h>
#include <string.h>

#include "tokenizer_internal.h"

typedef struct {
  tok_buf *s;
  size_t n;
} strings;

static void strings_free(strings *l) {
  for (size_t i = 0; i < l->n; ++i)
    free(l->s[i].data);
  free(l->s);
  l->s = NULL;
  l->n = 0;
}

// Appends an empty string to `l`; returns it, or NULL when out of memory.
static tok_buf *strings_add(strings *l) {
  tok_buf *g = realloc(l->s, (l->n + 1) * sizeof *g);
  if (!g)
    return NULL;
  l->s = g;
  l->s[l->n] = (tok_buf){0};
  return tok_buf_append(&l->s[l->n], "", 0) ? NULL : &l->s[l->n++];
}

static int byte_fallback_flush(tok_buf *pending, strings *out) {
  if (!pending->len)
    return 0;
  if (tok_utf8_check(pending->data, pending->len) < 0) { // valid: one string
    tok_buf *s = strings_add(out);
    if (!s || tok_buf_append(s, pending->data, pending->len))
      return -1;
  } else // invalid: one U+FFFD per byte, as the library
    for (size_t i = 0; i < pending->len; ++i) {
      tok_buf *s = strings_add(out);
      if (!s || tok_buf_append(s, "\xEF\xBF\xBD", 3))
        return -1;
    }
  pending->len = 0;
  return 0;
}

static int hexval(char c) {
  return c >= '0' && c <= '9' ? c - '0' : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                        : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

static int byte_fallback(const strings *in, strings *out) {
  tok_buf pending = {0};
  int rc = 0;
  for (size_t i = 0; !rc && i < in->n; ++i) {
    const tok_buf *t = &in->s[i];
    int hi = t->len == 6 ? hexval(t->data[3]) : -1, lo = t->len == 6 ? hexval(t->data[4]) : -1;
    if (hi >= 0 && lo >= 0 && !memcmp(t->data, "<0x", 3) && t->data[5] == '>') {
      char b = (char)(hi << 4 | lo);
      rc = tok_buf_append(&pending, &b, 1);
      continue;
    }
    tok_buf *s;
    rc = byte_fallback_flush(&pending, out) || !(s = strings_add(out)) ||
         tok_buf_append(s, t->data, t->len);
  }
  if (!rc)
    rc = byte_fallback_flush(&pending, out);
  free(pending.data);
  return rc;
}

// Removes up to `start` leading and `stop` trailing copies of the character c.
static int strip(const tok_decoder *d, const tok_buf *t, tok_buf *s) {
  size_t cl = strlen(d->content), a = 0, b = t->len;
  for (int k = 0; k < d->start && a + cl <= b && !memcmp(t->data + a, d->content, cl); ++k)
    a += cl;
  for (int k = 0; k < d->stop && b >= a + cl && !memcmp(t->data + b - cl, d->content, cl); ++k)
    b -= cl;
  return tok_buf_append(s, t->data + a, b - a);
}

static int replace_all(const tok_tokenizer *t, const tok_pattern *p, const char *content,
                       const tok_buf *in, tok_buf *s) {
  size_t at = 0, ms, me;
  char *error = NULL;
  int found;
  while (at < in->len &&
         (found = tok_pattern_next(p, t->match, in->data, in->len, at, &ms, &me, &error)) == 1 &&
         me > ms) {
    if (tok_buf_append(s, in->data + at, ms - at) || tok_buf_append(s, content, strlen(content)))
      return -1;
    at = me;
  }
  free(error);
  return tok_buf_append(s, in->data + at, in->len - at);
}

static int apply(const tok_tokenizer *t, const tok_decoder *d, const strings *in, strings *out) {
  if (d->kind == TOK_DEC_BYTEFALLBACK)
    return byte_fallback(in, out);
  if (d->kind == TOK_DEC_BYTELEVEL || d->kind == TOK_DEC_FUSE) {
    tok_buf joined = {0}, *s = strings_add(out);
    int rc = !s;
    for (size_t i = 0; !rc && i < in->n; ++i)
      rc = tok_buf_append(&joined, in->s[i].data, in->s[i].len);
    // ByteLevel: the vocabulary already holds raw bytes (tokenizer_json.c);
    // what is left is the library's lossy UTF-8 conversion.
    if (!rc)
      rc = d->kind == TOK_DEC_BYTELEVEL ? tok_utf8_lossy(joined.data, joined.len, s)
                                        : tok_buf_append(s, joined.data, joined.len);
    free(joined.data);
    return rc ? -1 : 0;
  }
  size_t rl = strlen(d->replacement);
  for (size_t i = 0; i < in->n; ++i) {
    tok_buf *s = strings_add(out);
    if (!s)
      return -1;
    const tok_buf *tk = &in->s[i];
    int rc = 0;
    if (d->kind == TOK_DEC_STRIP)
      rc = strip(d, tk, s);
    else if (d->kind == TOK_DEC_REPLACE)
      rc = replace_all(t, &d->pattern, d->content, tk, s);
    else // Metaspace: the replacement becomes ' ', dropped in the first token
      for (size_t j = 0; !rc && j < tk->len;) {
        if (j + rl <= tk->len && !memcmp(tk->data + j, d->replacement, rl)) {
          if (i || d->prepend == TOK_PREPEND_NEVER)
            rc = tok_buf_append(s, " ", 1);
          j += rl;
        } else
          rc = tok_buf_append(s, tk->data + j++, 1);
      }
    if (rc)
      return -1;
  }
  return 0;
}

int tok_decode(const tok_tokenizer *t, const int32_t *ids, size_t count, tok_buf *out,
               char **error) {
  *error = NULL;
  strings cur = {0};
  for (size_t i = 0; i < count; ++i) {
    if (ids[i] < 0 || ids[i] >= t->n_ids || !t->id_to_token[ids[i]].text) {
      strings_free(&cur);
      *error = tok_format("token %zu: id %d is not in the vocabulary of '%s' (size %lld)", i,
                          ids[i], t->path, (long long)t->vocab_size);
      return -1;
    }
    tok_buf *s = strings_add(&cur);
    if (!s || tok_buf_append(s, t->id_to_token[ids[i]].text, t->id_to_token[ids[i]].len))
      goto oom;
  }
  for (int k = 0; k < t->n_decs; ++k) {
    strings next = {0};
    if (apply(t, &t->decs[k], &cur, &next)) {
      strings_free(&next);
      goto oom;
    }
    strings_free(&cur);
    cur = next;
  }
  for (size_t i = 0; i < cur.n; ++i) // the library joins what the chain leaves
    if (tok_buf_append(out, cur.s[i].data, cur.s[i].len))
      goto oom;
  strings_free(&cur);
  return 0;
oom:
  strings_free(&cur);
  *error = tok_format("decoding with '%s': out of memory", t->path);
  return -1;
}
