// A map from pointers (the opaque handles of MLIR values and ops) to
// integers: open addressing with linear probing, grown at half load. The
// passes key values by `MlirValue.ptr` to find what a value became
// (its gradient, its local value, its buffer).
#ifndef SHARD_PASSES_PTR_MAP_H
#define SHARD_PASSES_PTR_MAP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/// Zero-initialise to get an empty map; free with tp_ptr_map_free.
typedef struct tp_ptr_map {
  const void **keys;
  intptr_t *values;
  size_t cap, len;
} tp_ptr_map;

/// Sets *value to the value of `key` and returns true, or returns false if
/// the key is absent (NULL is never a key).
bool tp_ptr_map_get(const tp_ptr_map *m, const void *key, intptr_t *value);

/// Sets the value of `key` (not NULL), adding it if absent. Exits the
/// process with a message if memory runs out (a compiler pass cannot go on).
void tp_ptr_map_put(tp_ptr_map *m, const void *key, intptr_t value);

/// Frees the map's storage; the map is empty again.
void tp_ptr_map_free(tp_ptr_map *m);

#endif // SHARD_PASSES_PTR_MAP_H
