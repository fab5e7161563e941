// libshardrt's public C API in one include: the runtime that ahead-of-time
// compiled tensor-parallel training binaries link against, usable directly.
//
// Conventions (every header follows them):
// - Prefix srt_; every fallible call returns an srt_status (NULL = OK, else
//   a heap object with code and message: free it or pass it up). The
//   library never calls exit() or abort().
// - Tensors are row-major and contiguous; shapes are int64_t; a mesh is dp
//   x tp with tp fastest (rank = dp_index * tp + tp_index).
// - Ownership is stated per function; the context (srt_context) is the only
//   mutable state — there are no globals.
#ifndef SHARDRT_H
#define SHARDRT_H

#include "shardrt/status.h"       // srt_status, codes
#include "shardrt/types.h"        // dtypes, reductions, placements

#include "shardrt/arena.h"        // one bump arena per rank
#include "shardrt/mesh.h"         // dp x tp mesh, rank <-> coordinate
#include "shardrt/tensor.h"       // srt_tensor, local shapes and offsets

#include "shardrt/context.h"      // MPI, groups world/dp/tp/dp_cp
#include "shardrt/collectives.h"  // all-reduce, all-gather, reduce-scatter, ...
#include "shardrt/dtensor.h"      // to_local, full_tensor

#include "shardrt/grad_norm.h"    // global grad norm, clipping
#include "shardrt/kernels.h"      // CPU kernels, forward and backward

#include "shardrt/convert.h"      // bf16/f16 <-> f32
#include "shardrt/safetensors.h"  // reading safetensors (mmap)
#include "shardrt/safetensors_write.h" // writing them atomically
#include "shardrt/checkpoint.h"   // sharded load, per-rank/consolidated save
#include "shardrt/tokens.h"       // token files, deterministic batches
#include "shardrt/program.h"      // a compiled step: memory plan, params, step
#include "shardrt/ops.h"          // graph-level ops compiled code calls

#endif // SHARDRT_H
