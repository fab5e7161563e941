// Graph-level entry points that compiled training steps call, one per op
// of a partitioned nn graph (forward, backward, collectives, optimizer),
// and the table of entry points a backend implements (srt_ops). Every op,
// its arguments and its semantics are described once, in shardrt/ops.def;
// the prototypes below are generated from it.
//
// srt_op_X(e, ...) checks what does not depend on the backend (buffer
// offsets >= 0 or -1 where optional, sizes >= 0, mesh axes in {-1, 0, 1},
// dtypes in {0, 1}, pointers not NULL, then the op's own check of
// ops.def: a norm group that divides the features, an attention
// configuration, a collective's shape), then calls the entry point of the
// exec's backend (e->backend->ops; srt_cpu_backend's are srt_cpu_ops).
// Each op takes the executing rank (srt_exec), its buffers as byte offsets
// into the rank's arena and its local sizes; each WRITES its outputs
// (never accumulates) and returns srt_status.
//
// Conventions: `n` is the number of rows (batch * seq) or of elements, as
// ops.def says. A `*_axis` argument names the mesh axis (0 = dp, 1 = tp)
// whose index decides a range, or -1 for none. A `dtype` is the element
// type of the op's buffers (srt_op_dtype); the cpu backend computes fp32
// only, the cuda backend's buffers follow its mixed precision
// (shardrt/cuda.h). Ids and labels are int64.
//
// Errors: SRT_INVALID_ARGUMENT naming the op (srt_op_X), the argument and
// its value, and the rank; a backend's own errors (shardrt/cpu.h, cuda.h).
#ifndef SHARDRT_OPS_H
#define SHARDRT_OPS_H

#include <stdint.h>

#include "shardrt/op_table.h"
#include "shardrt/program.h"

/// Element types of op buffers (the `dtype` arguments).
typedef enum srt_op_dtype { SRT_OP_F32 = 0, SRT_OP_BF16 = 1 } srt_op_dtype;

/// Attention configuration as the graph gives it (q [batch, seq, num_heads *
/// head_dim], k and v [batch, seq, num_kv_heads * head_dim]). With
/// q_head_offset_axis >= 0 the KV heads are complete on every rank
/// (replicated) and local query head i is global head index * num_heads +
/// i, whose KV head is chosen by global_num_heads / num_kv_heads. The field
/// list is SRT_ATTENTION_CONFIG_FIELDS (lower-to-runtime builds the same
/// struct from it).
#define SRT_ATTENTION_CONFIG_FIELDS(X)                                                   \
  X(int64_t, batch) X(int64_t, seq) X(int64_t, num_heads) X(int64_t, num_kv_heads)       \
  X(int64_t, head_dim) X(int64_t, causal) X(int64_t, sliding_window) /* 0 = none */      \
  X(double, scale) X(double, softcap) /* 0 = none */                                    \
  X(int64_t, q_head_offset_axis) X(int64_t, global_num_heads)                          \
  X(int64_t, cp_size) /* > 1: K/V all-gathered over the cp group (see below) */

typedef struct srt_op_attention_config {
#define SRT_FIELD(type, name) type name;
  SRT_ATTENTION_CONFIG_FIELDS(SRT_FIELD)
#undef SRT_FIELD
} srt_op_attention_config;

//===----------------------------------------------------------------------===//
// The ops (srt_op_<name>, one per SRT_OP row of ops.def)
//===----------------------------------------------------------------------===//

#define SRT_OP(name, source, check, args) SRT_OP_DECLARE(srt_op_, name, args)
#include "shardrt/ops.def"

//===----------------------------------------------------------------------===//
// The backend interface
//===----------------------------------------------------------------------===//

/// A backend's entry points, one per op, with the arguments of srt_op_X:
/// the way an IREE HAL device is a table of functions. Called only after
/// srt_op_X's checks passed. Every slot is set (a backend defines every
/// op; a missing or mistyped one is a build error).
typedef struct srt_ops {
#define SRT_OP(name, source, check, args) srt_status (*name)(srt_exec * e SRT_OP_PARAMS(args));
#include "shardrt/ops.def"
} srt_ops;

#endif // SHARDRT_OPS_H
