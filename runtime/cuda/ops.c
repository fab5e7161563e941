// The cuda backend's table of entry points (srt_cuda_ops), and the entry
// points of the unary elementwise ops of ops.def (SRT_UNARY_OP), which
// launch their kernels srt_cuda_<name>_forward / _backward (kernels.h) on
// bf16 activations.
#include "ops_internal.h"

#define SRT_UNARY_OP(KIND, name)                                                               \
  srt_status srt_cuda_op_##name(srt_exec *e, int64_t x, int64_t y, int64_t n) {                \
    srt_cuda_device *d;                                                                        \
    SRT_RETURN_IF_ERROR(srt_cuda_device_of(e, "srt_cuda_op_" #name, &d));                      \
    return CU_LAUNCH(srt_cuda_##name##_forward(cu_bf16(e, y), cu_bf16(e, x), n, d->compute));  \
  }                                                                                            \
  srt_status srt_cuda_op_##name##_grad(srt_exec *e, int64_t x, int64_t dy, int64_t dx,         \
                                       int64_t n) {                                            \
    srt_cuda_device *d;                                                                        \
    SRT_RETURN_IF_ERROR(srt_cuda_device_of(e, "srt_cuda_op_" #name "_grad", &d));              \
    return CU_LAUNCH(srt_cuda_##name##_backward(cu_bf16(e, dx), cu_bf16(e, dy), cu_bf16(e, x), \
                                                n, d->compute));                               \
  }
#include "shardrt/ops.def"

const srt_ops srt_cuda_ops = {
#define SRT_OP(name, source, check, args) .name = srt_cuda_op_##name,
#include "shardrt/ops.def"
};
