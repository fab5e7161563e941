// The CUDA backend (libshardrt_cuda): the graph-level ops that a step
// lowered with lower-to-runtime{backend=cuda} calls, and the srt_backend the
// training driver uses to move the persistent region to and from the GPU.
//
// Every srt_cuda_op_X has the arguments of srt_op_X (shardrt/ops.h) and
// the same semantics, with the backend's mixed precision (the reference's
// MixedPrecisionPolicy, param_dtype bf16 and reduce_dtype fp32):
// activations and the parameters' compute copies are bf16; parameter
// gradients, the loss statistics (ce_* results, the loss) and the rotary
// cos/sin tables are fp32; all arithmetic accumulates in fp32. add and the
// collectives take the element type of their buffers (`dtype`). Ops are
// enqueued on the device's compute stream and collectives on its comm
// stream (NCCL), ordered by events; only srt_cuda_op_optimizer_step waits for the device (it reads the loss and
// the gradient norm back).
//
// Errors: SRT_INVALID_ARGUMENT for an exec without a device or a shape
// the kernels do not take (naming the op and the value);
// SRT_UNAVAILABLE for a failing CUDA, cuBLASLt, cuDNN or NCCL call (naming
// the call and its source location); SRT_OUT_OF_RANGE, reported by the
// optimizer step, for a label outside the vocabulary.
#ifndef SHARDRT_CUDA_H
#define SHARDRT_CUDA_H

#include <stdint.h>

#include "shardrt/ops.h"
#include "shardrt/program.h"

/// The backend table a cuda program's srt_program.backend points to.
extern const srt_backend srt_cuda_backend;

/// Number of CUDA devices, 0 when there is none or no driver (never fails).
int srt_cuda_device_count(void);

/// The cuda backend's entry points (srt_cuda_backend.ops).
extern const srt_ops srt_cuda_ops;

/// srt_cuda_op_X has the arguments and semantics of srt_op_X (shardrt/ops.h)
/// and runs only after srt_op_X's checks passed. The add_rms_norm fusion
/// is lowered for an nn.add of bf16 activations followed at once by the
/// nn.rms_norm of its result.
#define SRT_OP(name, source, check, args) SRT_OP_DECLARE(srt_cuda_op_, name, args)
#include "shardrt/ops.def"

#endif // SHARDRT_CUDA_H
