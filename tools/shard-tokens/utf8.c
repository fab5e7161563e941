// UTF-8 for the tokenizer: strict validation (RFC 3629), code point
// encode/decode, and the lossy conversion Rust's String::from_utf8_lossy
// does (each maximal invalid subpart becomes one U+FFFD), which the
// ByteLevel and ByteFallback decoders of tokenizers apply.
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tokenizer_internal.h"

// Length of the valid sequence at s[i] (1-4), or 0 with *valid_prefix set to
// the bytes of the maximal subpart that could still start a sequence.
static int utf8_at(const unsigned char *s, size_t len, size_t i, int32_t *cp, int *prefix) {
  unsigned char c = s[i];
  *prefix = 1;
  if (c < 0x80) {
    *cp = c;
    return 1;
  }
  int n;
  unsigned char lo = 0x80, hi = 0xBF;
  if (c >= 0xC2 && c <= 0xDF)
    n = 2;
  else if (c >= 0xE0 && c <= 0xEF) {
    n = 3;
    if (c == 0xE0)
      lo = 0xA0;
    if (c == 0xED)
      hi = 0x9F;
  } else if (c >= 0xF0 && c <= 0xF4) {
    n = 4;
    if (c == 0xF0)
      lo = 0x90;
    if (c == 0xF4)
      hi = 0x8F;
  } else
    return 0;
  int32_t v = c & (0x7F >> n);
  for (int k = 1; k < n; ++k) {
    if (i + k >= len)
      return 0;
    unsigned char d = s[i + k];
    if (d < (k == 1 ? lo : 0x80) || d > (k == 1 ? hi : 0xBF))
      return 0;
    v = v << 6 | (d & 0x3F);
    *prefix = k + 1;
  }
  *cp = v;
  return n;
}

int tok_utf8_decode(const char *s, size_t len, size_t i, int32_t *cp) {
  int prefix;
  return utf8_at((const unsigned char *)s, len, i, cp, &prefix);
}

int64_t tok_utf8_check(const char *s, size_t len) {
  for (size_t i = 0; i < len;) {
    if ((unsigned char)s[i] < 0x80) { // the common case, without the call
      ++i;
      continue;
    }
    int32_t cp;
    int n = tok_utf8_decode(s, len, i, &cp);
    if (!n)
      return (int64_t)i;
    i += (size_t)n;
  }
  return -1;
}

int tok_utf8_encode(int32_t cp, char out[4]) {
  if (cp < 0x80) {
    out[0] = (char)cp;
    return 1;
  }
  if (cp < 0x800) {
    out[0] = (char)(0xC0 | cp >> 6);
    out[1] = (char)(0x80 | (cp & 0x3F));
    return 2;
  }
  if (cp < 0x10000) {
    out[0] = (char)(0xE0 | cp >> 12);
    out[1] = (char)(0x80 | (cp >> 6 & 0x3F));
    out[2] = (char)(0x80 | (cp & 0x3F));
    return 3;
  }
  out[0] = (char)(0xF0 | cp >> 18);
  out[1] = (char)(0x80 | (cp >> 12 & 0x3F));
  out[2] = (char)(0x80 | (cp >> 6 & 0x3F));
  out[3] = (char)(0x80 | (cp & 0x3F));
  return 4;
}

int tok_utf8_lossy(const char *s, size_t len, tok_buf *out) {
  if (!len) // s may be NULL then
    return tok_buf_append(out, "", 0);
  const unsigned char *u = (const unsigned char *)s;
  size_t run = 0; // start of the pending valid run
  for (size_t i = 0; i < len;) {
    int32_t cp;
    int prefix;
    int n = utf8_at(u, len, i, &cp, &prefix);
    if (n) {
      i += (size_t)n;
      continue;
    }
    if (tok_buf_append(out, s + run, i - run) || tok_buf_append(out, "\xEF\xBF\xBD", 3))
      return -1;
    i += (size_t)prefix;
    run = i;
  }
  return tok_buf_append(out, s + run, len - run);
}

int tok_buf_append(tok_buf *b, const void *data, size_t len) {
  if (b->len + len + 1 > b->cap) {
    size_t cap = b->cap ? b->cap : 64;
    while (cap < b->len + len + 1)
      cap *= 2;
    char *grown = realloc(b->data, cap);
    if (!grown)
      return -1;
    b->data = grown;
    b->cap = cap;
  }
  if (len)
    memcpy(b->data + b->len, data, len);
  b->len += len;
  b->data[b->len] = 0; // always terminated, for the callers that print it
  return 0;
}

int tok_ids_push(tok_ids *v, int32_t id) {
  if (v->count == v->cap) {
    size_t cap = v->cap ? 2 * v->cap : 256;
    int32_t *grown = realloc(v->ids, cap * sizeof *grown);
    if (!grown)
      return -1;
    v->ids = grown;
    v->cap = cap;
  }
  v->ids[v->count++] = id;
  return 0;
}

char *tok_format(const char *fmt, ...) {
  va_list ap, again;
  va_start(ap, fmt);
  va_copy(again, ap);
  int n = vsnprintf(NULL, 0, fmt, ap);
  char *s = n >= 0 ? malloc((size_t)n + 1) : NULL;
  if (s)
    vsnprintf(s, (size_t)n + 1, fmt, again);
  va_end(again);
  va_end(ap);
  return s;
}
