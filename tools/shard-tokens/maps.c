// The tokenizer's hash maps: byte string -> id (vocabulary, added tokens,
// word cache) and id pair -> merge (BPE merges). Open addressing with linear
// probing at most half full; FNV-1a for strings, a 64-bit mix for pairs.
#include <stdlib.h>
#include <string.h>

#include "tokenizer_internal.h"

static uint32_t fnv1a(const char *s, size_t len) {
  uint32_t h = 2166136261u;
  for (size_t i = 0; i < len; ++i)
    h = (h ^ (unsigned char)s[i]) * 16777619u;
  return h;
}

static int strmap_grow(tok_strmap *m) {
  uint32_t slots = m->mask ? 2 * (m->mask + 1) : 1024;
  int32_t *grown = calloc(slots, sizeof *grown);
  if (!grown)
    return -1;
  for (size_t e = 0; e < m->count; ++e) {
    uint32_t i = m->entries[e].hash & (slots - 1);
    while (grown[i])
      i = (i + 1) & (slots - 1);
    grown[i] = (int32_t)e + 1;
  }
  free(m->slots);
  m->slots = grown;
  m->mask = slots - 1;
  return 0;
}

int32_t tok_strmap_get(const tok_strmap *m, const char *key, size_t len) {
  if (!m->mask)
    return -1;
  uint32_t h = fnv1a(key, len);
  for (uint32_t i = h & m->mask; m->slots[i]; i = (i + 1) & m->mask) {
    const struct tok_strmap_entry *e = &m->entries[m->slots[i] - 1];
    if (e->hash == h && e->len == len && !memcmp(m->keys.data + e->off, key, len))
      return e->value;
  }
  return -1;
}

int tok_strmap_put(tok_strmap *m, const char *key, size_t len, int32_t value) {
  if ((m->count + 1) * 2 > (size_t)m->mask + 1 && strmap_grow(m))
    return -1;
  uint32_t h = fnv1a(key, len);
  uint32_t i = h & m->mask;
  for (; m->slots[i]; i = (i + 1) & m->mask) {
    struct tok_strmap_entry *e = &m->entries[m->slots[i] - 1];
    if (e->hash == h && e->len == len && !memcmp(m->keys.data + e->off, key, len)) {
      e->value = value;
      return 0;
    }
  }
  if (m->count == m->cap) {
    size_t cap = m->cap ? 2 * m->cap : 1024;
    struct tok_strmap_entry *grown = realloc(m->entries, cap * sizeof *grown);
    if (!grown)
      return -1;
    m->entries = grown;
    m->cap = cap;
  }
  size_t off = m->keys.len;
  if (tok_buf_append(&m->keys, key, len))
    return -1;
  m->entries[m->count] = (struct tok_strmap_entry){(uint32_t)off, (uint32_t)len, h, value};
  m->slots[i] = (int32_t)++m->count;
  return 0;
}

void tok_strmap_free(tok_strmap *m) {
  free(m->slots);
  free(m->entries);
  free(m->keys.data);
  memset(m, 0, sizeof *m);
}

static uint32_t pair_hash(uint64_t k) {
  k ^= k >> 33;
  k *= 0xff51afd7ed558ccdull;
  k ^= k >> 33;
  return (uint32_t)k;
}

static int pairmap_grow(tok_pairmap *m) {
  uint32_t slots = m->mask ? 2 * (m->mask + 1) : 1024;
  uint64_t *keys = calloc(slots, sizeof *keys);
  int32_t *rank = malloc(slots * sizeof *rank), *merged = malloc(slots * sizeof *merged);
  if (!keys || !rank || !merged) {
    free(keys);
    free(rank);
    free(merged);
    return -1;
  }
  for (uint32_t s = 0; m->mask && s <= m->mask; ++s) {
    if (!m->keys[s])
      continue;
    uint32_t i = pair_hash(m->keys[s]) & (slots - 1);
    while (keys[i])
      i = (i + 1) & (slots - 1);
    keys[i] = m->keys[s];
    rank[i] = m->rank[s];
    merged[i] = m->merged[s];
  }
  free(m->keys);
  free(m->rank);
  free(m->merged);
  m->keys = keys;
  m->rank = rank;
  m->merged = merged;
  m->mask = slots - 1;
  return 0;
}

int tok_pairmap_put(tok_pairmap *m, int32_t left, int32_t right, int32_t rank, int32_t merged) {
  if ((m->count + 1) * 2 > (size_t)m->mask + 1 && pairmap_grow(m))
    return -1;
  uint64_t k = ((uint64_t)(uint32_t)left << 32 | (uint32_t)right) + 1;
  uint32_t i = pair_hash(k) & m->mask;
  while (m->keys[i] && m->keys[i] != k)
    i = (i + 1) & m->mask;
  // A repeated merge takes the later rank, as tokenizers' HashMap collect does.
  m->count += !m->keys[i];
  m->keys[i] = k;
  m->rank[i] = rank;
  m->merged[i] = merged;
  return 0;
}

bool tok_pairmap_get(const tok_pairmap *m, int32_t left, int32_t right, int32_t *rank,
                     int32_t *merged) {
  if (!m->mask)
    return false;
  uint64_t k = ((uint64_t)(uint32_t)left << 32 | (uint32_t)right) + 1;
  for (uint32_t i = pair_hash(k) & m->mask; m->keys[i]; i = (i + 1) & m->mask)
    if (m->keys[i] == k) {
      *rank = m->rank[i];
      *merged = m->merged[i];
      return true;
    }
  return false;
}

void tok_pairmap_free(tok_pairmap *m) {
  free(m->keys);
  free(m->rank);
  free(m->merged);
  memset(m, 0, sizeof *m);
}
