// The BPE model of tokenizers (tokenizers/src/models/bpe/{model,word}.rs) on
// one pre-tokenized piece: characters (bytes, for byte-level vocabularies)
// to ids, with byte_fallback and unk (fuse_unk) for unknown characters, then
// merges applied lowest rank first, leftmost first among equal ranks, with a
// binary heap of candidate pairs (O(n log n): SentencePiece-style files have
// no pre-tokenizer, so a piece can be a whole line). Results are cached per
// piece; the cache never changes them.
#include <stdlib.h>
#include <string.h>

#include "tokenizer_internal.h"

typedef struct {
  int32_t *id, *prev, *next;
  size_t n, cap;
} symbols;

typedef struct {
  int32_t rank, pos, merged;
} candidate;

typedef struct {
  candidate *c;
  size_t n, cap;
} heap;

static bool before(candidate a, candidate b) {
  return a.rank != b.rank ? a.rank < b.rank : a.pos < b.pos;
}

static int heap_push(heap *h, candidate c) {
  if (h->n == h->cap) {
    size_t cap = h->cap ? 2 * h->cap : 64;
    candidate *g = realloc(h->c, cap * sizeof *g);
    if (!g)
      return -1;
    h->c = g;
    h->cap = cap;
  }
  size_t i = h->n++;
  while (i && before(c, h->c[(i - 1) / 2])) {
    h->c[i] = h->c[(i - 1) / 2];
    i = (i - 1) / 2;
  }
  h->c[i] = c;
  return 0;
}

static candidate heap_pop(heap *h) {
  candidate top = h->c[0], last = h->c[--h->n];
  size_t i = 0;
  for (;;) {
    size_t l = 2 * i + 1, m = l;
    if (l >= h->n)
      break;
    if (l + 1 < h->n && before(h->c[l + 1], h->c[l]))
      m = l + 1;
    if (!before(h->c[m], last))
      break;
    h->c[i] = h->c[m];
    i = m;
  }
  if (h->n)
    h->c[i] = last;
  return top;
}

static int sym_add(symbols *s, int32_t id) {
  if (s->n == s->cap) {
    size_t cap = s->cap ? 2 * s->cap : 64;
    int32_t *a = realloc(s->id, cap * sizeof *a);
    if (a)
      s->id = a;
    int32_t *b = a ? realloc(s->prev, cap * sizeof *b) : NULL;
    if (b)
      s->prev = b;
    int32_t *c = b ? realloc(s->next, cap * sizeof *c) : NULL;
    if (!c)
      return -1;
    s->next = c;
    s->cap = cap;
  }
  s->prev[s->n] = (int32_t)s->n - 1;
  s->next[s->n] = -1;
  if (s->n)
    s->next[s->n - 1] = (int32_t)s->n;
  s->id[s->n++] = id;
  return 0;
}

// The initial symbols: one per character, as BPE::merge_word builds them.
static int initial_symbols(tok_tokenizer *t, const char *p, size_t len, symbols *s) {
  int32_t unk = -1; // a pending unk symbol (fused while fuse_unk)
  for (size_t i = 0; i < len;) {
    int32_t cp;
    int k = t->byte_level ? 1 : tok_utf8_decode(p, len, i, &cp);
    if (!k)
      k = 1; // not reached: the text was validated
    int32_t id = t->byte_level ? t->byte_symbol[(unsigned char)p[i]]
                               : tok_strmap_get(&t->vocab, p + i, (size_t)k);
    if (id >= 0) {
      if (unk >= 0 && sym_add(s, unk))
        return -1;
      unk = -1;
      if (sym_add(s, id))
        return -1;
      i += (size_t)k;
      continue;
    }
    bool bytes = t->byte_fallback;
    for (int b = 0; bytes && b < k; ++b)
      bytes = t->byte_token[(unsigned char)p[i + b]] >= 0;
    if (bytes) { // the library adds them without flushing a pending unk
      for (int b = 0; b < k; ++b)
        if (sym_add(s, t->byte_token[(unsigned char)p[i + b]]))
          return -1;
    } else if (t->unk_id >= 0) {
      if (unk >= 0 && !t->fuse_unk && sym_add(s, unk))
        return -1;
      unk = t->unk_id;
    } else
      ++t->dropped; // no unk token: the library drops the character
    i += (size_t)k;
  }
  return unk >= 0 ? sym_add(s, unk) : 0;
}

static int push_pair(tok_tokenizer *t, const symbols *s, heap *h, int32_t pos) {
  int32_t rank, merged;
  if (pos < 0 || s->next[pos] < 0 ||
      !tok_pairmap_get(&t->merges, s->id[pos], s->id[s->next[pos]], &rank, &merged))
    return 0;
  return heap_push(h, (candidate){rank, pos, merged});
}

static int merge_all(tok_tokenizer *t, symbols *s) {
  heap h = {0};
  int rc = -1;
  for (int32_t i = 0; i + 1 < (int32_t)s->n; ++i)
    if (push_pair(t, s, &h, i))
      goto done;
  while (h.n) {
    candidate c = heap_pop(&h);
    int32_t right = s->next[c.pos], rank, merged;
    // Stale: the left symbol was merged away (id -1) or the pair changed.
    if (s->id[c.pos] < 0 || right < 0 ||
        !tok_pairmap_get(&t->merges, s->id[c.pos], s->id[right], &rank, &merged) ||
        merged != c.merged)
      continue;
    s->id[c.pos] = c.merged;
    s->id[right] = -1;
    s->next[c.pos] = s->next[right];
    if (s->next[right] >= 0)
      s->prev[s->next[right]] = c.pos;
    if (push_pair(t, s, &h, s->prev[c.pos]) || push_pair(t, s, &h, c.pos))
      goto done;
  }
  rc = 0;
done:
  free(h.c);
  return rc;
}

enum { CACHE_MAX_PIECE = 256, CACHE_MAX_ENTRIES = 1 << 20 };

static int cache_put(tok_tokenizer *t, const char *p, size_t len, const int32_t *ids, size_t n) {
  if (len > CACHE_MAX_PIECE || t->n_cache_spans >= CACHE_MAX_ENTRIES)
    return 0;
  if (t->n_cache_spans == t->cap_cache_spans) {
    size_t cap = t->cap_cache_spans ? 2 * t->cap_cache_spans : 4096;
    void *g = realloc(t->cache_spans, cap * sizeof *t->cache_spans);
    if (!g)
      return -1;
    t->cache_spans = g;
    t->cap_cache_spans = cap;
  }
  t->cache_spans[t->n_cache_spans].off = (uint32_t)t->cache_ids.count;
  t->cache_spans[t->n_cache_spans].count = (uint32_t)n;
  for (size_t i = 0; i < n; ++i)
    if (tok_ids_push(&t->cache_ids, ids[i]))
      return -1;
  return tok_strmap_put(&t->cache, p, len, (int32_t)t->n_cache_spans++);
}

int tok_bpe(tok_tokenizer *t, const char *p, size_t len, tok_ids *out) {
  int32_t id;
  if (t->ignore_merges && (id = tok_strmap_get(&t->vocab, p, len)) >= 0)
    return tok_ids_push(out, id);
  if (len <= CACHE_MAX_PIECE && (id = tok_strmap_get(&t->cache, p, len)) >= 0) {
    for (uint32_t i = 0; i < t->cache_spans[id].count; ++i)
      if (tok_ids_push(out, t->cache_ids.ids[t->cache_spans[id].off + i]))
        return -1;
    return 0;
  }
  symbols s = {0};
  size_t start = out->count;
  int64_t dropped = t->dropped;
  int rc = initial_symbols(t, p, len, &s) || merge_all(t, &s) ? -1 : 0;
  for (int32_t i = s.n ? 0 : -1; !rc && i >= 0; i = s.next[i])
    rc = tok_ids_push(out, s.id[i]);
  if (!rc && dropped == t->dropped) // a piece that drops characters is counted each time
    rc = cache_put(t, p, len, out->ids + start, out->count - start);
  free(s.id);
  free(s.prev);
  free(s.next);
  return rc;
}
