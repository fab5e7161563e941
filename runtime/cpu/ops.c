// The cpu backend's table of entry points (srt_cpu_ops), and the entry
// points of the unary elementwise ops of ops.def (SRT_UNARY_OP), which call
// their kernels srt_cpu_<name>_forward / _backward (shardrt/kernels.h).
#include "ops_internal.h"

#define SRT_UNARY_OP(KIND, name)                                                               \
  srt_status srt_cpu_op_##name(srt_exec *e, int64_t x, int64_t y, int64_t n) {                 \
    srt_cpu_##name##_forward(ops_f32(e, y), ops_f32(e, x), n);                                 \
    return NULL;                                                                               \
  }                                                                                            \
  srt_status srt_cpu_op_##name##_grad(srt_exec *e, int64_t x, int64_t dy, int64_t dx,          \
                                      int64_t n) {                                             \
    srt_cpu_##name##_backward(ops_f32(e, dx), ops_f32(e, dy), ops_f32(e, x), n);               \
    return NULL;                                                                               \
  }
#include "shardrt/ops.def"

const srt_ops srt_cpu_ops = {
#define SRT_OP(name, source, check, args) .name = srt_cpu_op_##name,
#include "shardrt/ops.def"
};
