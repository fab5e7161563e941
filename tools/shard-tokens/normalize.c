// The normalizer chain of a tokenizer.json (tokenizers/src/normalizers):
// Unicode forms through utf8proc, Lowercase, Strip, Replace, Prepend, applied
// in order to one stretch of text between added tokens.
#include <stdlib.h>
#include <string.h>
#include <utf8proc.h>

#include "tokenizer_internal.h"

// Rust's char::is_whitespace (the Unicode White_Space property).
bool tok_is_whitespace(int32_t c) {
  return (c >= 0x09 && c <= 0x0D) || c == 0x20 || c == 0x85 || c == 0xA0 || c == 0x1680 ||
         (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F ||
         c == 0x205F || c == 0x3000;
}

static bool ascii(const char *s, size_t len) {
  for (size_t i = 0; i < len; ++i)
    if ((unsigned char)s[i] >= 0x80)
      return false;
  return true;
}

static int unicode_form(tok_norm_kind kind, const char *in, size_t len, tok_buf *out,
                        char **error) {
  if (ascii(in, len)) // every normalization form leaves ASCII as it is
    return tok_buf_append(out, in, len);
  int options = UTF8PROC_STABLE |
                (kind == TOK_NORM_NFC || kind == TOK_NORM_NFKC ? UTF8PROC_COMPOSE
                                                               : UTF8PROC_DECOMPOSE) |
                (kind == TOK_NORM_NFKC || kind == TOK_NORM_NFKD ? UTF8PROC_COMPAT : 0);
  utf8proc_uint8_t *mapped = NULL;
  utf8proc_ssize_t n =
      utf8proc_map((const utf8proc_uint8_t *)in, (utf8proc_ssize_t)len, &mapped, options);
  if (n < 0) {
    *error = tok_format("normalizer: %s", utf8proc_errmsg(n));
    return -1;
  }
  int rc = tok_buf_append(out, mapped, (size_t)n);
  free(mapped);
  return rc;
}

static int lowercase(const char *in, size_t len, tok_buf *out) {
  for (size_t i = 0; i < len;) {
    int32_t cp;
    int n = tok_utf8_decode(in, len, i, &cp);
    char enc[4];
    if (tok_buf_append(out, enc, (size_t)tok_utf8_encode(utf8proc_tolower(cp), enc)))
      return -1;
    i += (size_t)n;
  }
  return 0;
}

static int strip(const tok_normalizer *n, const char *in, size_t len, tok_buf *out) {
  size_t start = 0, end = len;
  int32_t cp;
  int k;
  while (n->left && start < end && (k = tok_utf8_decode(in, len, start, &cp)) &&
         tok_is_whitespace(cp))
    start += (size_t)k;
  while (n->right && end > start) {
    size_t j = end - 1;
    while (j > start && ((unsigned char)in[j] & 0xC0) == 0x80)
      --j;
    if (!tok_utf8_decode(in, len, j, &cp) || !tok_is_whitespace(cp))
      break;
    end = j;
  }
  return tok_buf_append(out, in + start, end - start);
}

static int replace(const tok_tokenizer *t, const tok_pattern *p, const char *content,
                   const char *in, size_t len, tok_buf *out, char **error) {
  size_t at = 0, ms, me;
  int found;
  while ((found = tok_pattern_next(p, t->match, in, len, at, &ms, &me, error)) == 1) {
    if (tok_buf_append(out, in + at, ms - at) || tok_buf_append(out, content, strlen(content)))
      return -1;
    if (me == ms) { // an empty match replaces nothing more: step one character
      int32_t cp;
      int k = ms < len ? tok_utf8_decode(in, len, ms, &cp) : 0;
      if (!k)
        break;
      if (tok_buf_append(out, in + ms, (size_t)k))
        return -1;
      me = ms + (size_t)k;
    }
    at = me;
  }
  return found < 0 ? -1 : tok_buf_append(out, in + at, len - at);
}

int tok_normalize(const tok_tokenizer *t, const char *in, size_t len, tok_buf *out,
                  char **error) {
  tok_buf a = {0}, b = {0};
  if (tok_buf_append(&a, in, len))
    return -1;
  for (int i = 0; i < t->n_norms; ++i) {
    const tok_normalizer *n = &t->norms[i];
    b.len = 0;
    int rc = 0;
    switch (n->kind) {
    case TOK_NORM_NFC: case TOK_NORM_NFD: case TOK_NORM_NFKC: case TOK_NORM_NFKD:
      rc = unicode_form(n->kind, a.data, a.len, &b, error);
      break;
    case TOK_NORM_LOWERCASE:
      rc = lowercase(a.data, a.len, &b);
      break;
    case TOK_NORM_STRIP:
      rc = strip(n, a.data, a.len, &b);
      break;
    case TOK_NORM_REPLACE:
      rc = replace(t, &n->pattern, n->content, a.data, a.len, &b, error);
      break;
    case TOK_NORM_PREPEND: // only a non-empty text gets the prefix
      rc = a.len ? tok_buf_append(&b, n->content, strlen(n->content)) ||
                       tok_buf_append(&b, a.data, a.len)
                 : 0;
      break;
    }
    if (rc || tok_buf_append(&b, "", 0)) {
      free(a.data);
      free(b.data);
      return -1;
    }
    tok_buf tmp = a;
    a = b;
    b = tmp;
  }
  out->len = 0;
  int rc = tok_buf_append(out, a.data, a.len);
  free(a.data);
  free(b.data);
  return rc;
}
