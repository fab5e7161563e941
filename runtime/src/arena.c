// One bump arena per rank: a single aligned allocation, 64-byte offsets.
#include "shardrt/arena.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static size_t round_up(size_t n) {
  return (n + SRT_ARENA_ALIGN - 1) / SRT_ARENA_ALIGN * SRT_ARENA_ALIGN;
}

srt_status srt_arena_init(srt_arena *arena, size_t capacity) {
  memset(arena, 0, sizeof *arena);
  if (capacity > SIZE_MAX - SRT_ARENA_ALIGN)
    return SRT_ERROR(SRT_RESOURCE_EXHAUSTED, "arena: capacity %zu bytes is too large",
                     capacity);
  size_t bytes = round_up(capacity ? capacity : 1);
  // More than the machine's memory cannot work: say so rather than let the
  // allocator (or a sanitizer's) fail in its own words.
  long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
  if (pages > 0 && page > 0 && bytes / (size_t)page > (size_t)pages)
    return SRT_ERROR(SRT_RESOURCE_EXHAUSTED,
                     "arena: %zu bytes (%.3f GiB) is more than this machine's memory "
                     "(%.3f GiB): use more ranks, a smaller batch or sequence",
                     bytes, (double)bytes / (1024.0 * 1024.0 * 1024.0),
                     (double)pages * (double)page / (1024.0 * 1024.0 * 1024.0));
  void *base = aligned_alloc(SRT_ARENA_ALIGN, bytes);
  if (!base)
    return SRT_ERROR(SRT_RESOURCE_EXHAUSTED,
                     "arena: cannot allocate %zu bytes (%.3f GiB)", bytes,
                     (double)bytes / (1024.0 * 1024.0 * 1024.0));
  arena->base = base;
  arena->capacity = bytes;
  return NULL;
}

srt_status srt_arena_alloc(srt_arena *arena, size_t bytes, const char *what,
                           void **out) {
  *out = NULL;
  size_t avail = arena->capacity - arena->used;
  if (bytes > avail || round_up(bytes) > avail)
    return SRT_ERROR(SRT_RESOURCE_EXHAUSTED,
                     "arena: cannot allocate %zu bytes for '%s': %zu of %zu "
                     "bytes used",
                     bytes, what ? what : "?", arena->used, arena->capacity);
  *out = arena->base + arena->used;
  arena->used += round_up(bytes);
  if (arena->used > arena->high_water)
    arena->high_water = arena->used;
  return NULL;
}

void srt_arena_reset(srt_arena *arena) { arena->used = 0; }

void srt_arena_destroy(srt_arena *arena) {
  free(arena->base);
  memset(arena, 0, sizeof *arena);
}
