// srt_arena: one bump allocator per rank — a single allocation made up
// front, handed out in 64-byte-aligned pieces and reset as a whole.
#ifndef SHARDRT_ARENA_H
#define SHARDRT_ARENA_H

#include <stddef.h>

#include "shardrt/status.h"

/// Alignment of every arena offset: a cache line, and enough for any SIMD
/// load (AVX-512) or cuBLAS/cuDNN buffer requirement.
#define SRT_ARENA_ALIGN 64

/// A bump arena. Fields are readable; change them only through the
/// functions below. The arena owns `base`.
typedef struct srt_arena {
  unsigned char *base; ///< the one allocation (SRT_ARENA_ALIGN aligned)
  size_t capacity;     ///< bytes at base
  size_t used;         ///< bytes handed out since the last reset (aligned)
  size_t high_water;   ///< largest `used` ever seen (to size the next run)
} srt_arena;

/// Allocates `capacity` bytes (rounded up to SRT_ARENA_ALIGN) once.
/// Errors: SRT_RESOURCE_EXHAUSTED if the allocation fails (message gives
/// the size). On error the arena is zeroed and needs no destroy.
srt_status srt_arena_init(srt_arena *arena, size_t capacity);

/// Hands out `bytes` bytes at the next SRT_ARENA_ALIGN-aligned offset into
/// *out (valid until srt_arena_reset or srt_arena_destroy; not zeroed).
/// `what` names the buffer in the error. A request of 0 bytes gives a valid,
/// aligned pointer. Errors: SRT_RESOURCE_EXHAUSTED naming `what`, the
/// request, the bytes used and the capacity.
srt_status srt_arena_alloc(srt_arena *arena, size_t bytes, const char *what,
                           void **out);

/// Forgets every allocation (pointers handed out become invalid); keeps the
/// memory.
void srt_arena_reset(srt_arena *arena);

/// Frees the memory and zeroes the arena. A zeroed arena is fine.
void srt_arena_destroy(srt_arena *arena);

#endif // SHARDRT_ARENA_H
