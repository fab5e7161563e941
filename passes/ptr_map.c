// Pointer -> integer map (ptr_map.h).
#include "ptr_map.h"

#include <stdio.h>
#include <stdlib.h>

// Fibonacci hashing of the pointer bits above the allocator's alignment.
static size_t slot(const tp_ptr_map *m, const void *key) {
  size_t i = (((size_t)key >> 4) * 0x9E3779B97F4A7C15ull) & (m->cap - 1);
  while (m->keys[i] && m->keys[i] != key)
    i = (i + 1) & (m->cap - 1);
  return i;
}

bool tp_ptr_map_get(const tp_ptr_map *m, const void *key, intptr_t *value) {
  if (!m->cap || !key)
    return false;
  size_t i = slot(m, key);
  if (!m->keys[i])
    return false;
  *value = m->values[i];
  return true;
}

static void grow(tp_ptr_map *m) {
  tp_ptr_map bigger = {.cap = m->cap ? 2 * m->cap : 1024};
  bigger.keys = calloc(bigger.cap, sizeof *bigger.keys);
  bigger.values = calloc(bigger.cap, sizeof *bigger.values);
  if (!bigger.keys || !bigger.values) {
    fprintf(stderr, "error: out of memory growing a map of %zu entries\n", m->len);
    exit(1);
  }
  for (size_t i = 0; i < m->cap; ++i)
    if (m->keys[i]) {
      size_t j = slot(&bigger, m->keys[i]);
      bigger.keys[j] = m->keys[i];
      bigger.values[j] = m->values[i];
      ++bigger.len;
    }
  tp_ptr_map_free(m);
  *m = bigger;
}

void tp_ptr_map_put(tp_ptr_map *m, const void *key, intptr_t value) {
  if (2 * (m->len + 1) > m->cap)
    grow(m);
  size_t i = slot(m, key);
  m->len += !m->keys[i];
  m->keys[i] = key;
  m->values[i] = value;
}

void tp_ptr_map_free(tp_ptr_map *m) {
  free(m->keys);
  free(m->values);
  *m = (tp_ptr_map){0};
}
