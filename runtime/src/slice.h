// Internal: walks the contiguous rows of a box (a sub-block) inside a
// row-major tensor, for copying a shard out of a full tensor (to_local,
// checkpoint slicing) with whatever per-row work the caller needs.
#ifndef SHARDRT_SLICE_H
#define SHARDRT_SLICE_H

#include <stdint.h>

#include "shardrt/tensor.h"

/// Called once per contiguous run: `n` elements starting at element
/// `src_index` of the full tensor go to element `dst_index` of the box
/// (both row-major element indices, not bytes).
typedef void (*srt_slice_row_fn)(int64_t src_index, int64_t dst_index, int64_t n,
                                 void *arg);

/// Calls `fn` for every run of the box `box[0..ndim)` at `offset[0..ndim)`
/// inside a tensor of shape `shape[0..ndim)`, in row-major order of the box
/// (so dst_index grows by n each call). Trailing dims the box covers whole
/// are merged into one run. The caller guarantees offset + box <= shape.
/// ndim = 0 is one run of one element; an empty box gives no calls.
void srt_slice_rows(int ndim, const int64_t *shape, const int64_t *offset,
                    const int64_t *box, srt_slice_row_fn fn, void *arg);

/// srt_slice_rows over the shard of `t` held by the rank at `coord`, piece
/// by piece (srt_tensor_pieces: one box, or one per part of a tensor split
/// part by part over tp); dst_index counts over the whole local shard.
/// Errors: those of srt_tensor_pieces.
srt_status srt_slice_shard(const srt_tensor *t, const srt_mesh *mesh,
                           const int coord[SRT_MESH_NDIMS], srt_slice_row_fn fn, void *arg);

#endif // SHARDRT_SLICE_H
