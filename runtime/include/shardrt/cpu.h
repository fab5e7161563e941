// The cpu backend (libshardrt): fp32 kernels (shardrt/kernels.h, OpenBLAS
// GEMMs) and MPI collectives behind the graph-level ops. Its buffers are
// host memory; every dtype argument must be SRT_OP_F32. srt_op_X runs
// srt_cpu_op_X when the exec's backend is srt_cpu_backend.
//
// Every srt_cpu_op_X has the arguments and semantics of srt_op_X
// (shardrt/ops.h) and runs only after srt_op_X's checks passed; called
// directly, it trusts them. Errors: SRT_INVALID_ARGUMENT for a bf16 dtype
// or a shape a kernel refuses; SRT_RESOURCE_EXHAUSTED when the op scratch
// cannot grow; SRT_OUT_OF_RANGE for a label outside the vocabulary; the
// errors of the MPI collectives (shardrt/collectives.h).
#ifndef SHARDRT_CPU_H
#define SHARDRT_CPU_H

#include "shardrt/ops.h"

/// The cpu backend's entry points.
extern const srt_ops srt_cpu_ops;

/// The cpu backend as an object (runtime/cpu/backend.c), like a device
/// backend's: what a program compiled for the cpu names in its table.
extern const srt_backend srt_cpu_backend;

/// The cpu backend under mixed precision (runtime/cpu/bf16_backend.c): what
/// a program compiled with --param-dtype bf16 names. Its buffers hold the
/// dtypes the buffer plan gives them under mixed precision (bf16
/// activations and parameter compute copies, fp32 master weights,
/// gradients and moments: the same as on cuda); its ops (srt_cpu_bf16_ops,
/// runtime/cpu/bf16_ops.c) compute in fp32 on fp32 copies of their bf16
/// buffers, the linears' GEMMs on the bf16 operands themselves (oneDNN's
/// bf16 matmul, fp32 accumulation) where the CPU has one, and round each
/// bf16 result to nearest even; its collectives move and sum bf16 buffers
/// as bf16 (shardrt/collectives.h). Errors: those of srt_cpu_ops.
extern const srt_backend srt_cpu_bf16_backend;
extern const srt_ops srt_cpu_bf16_ops;

#define SRT_OP(name, source, check, args) SRT_OP_DECLARE(srt_cpu_op_, name, args)
#include "shardrt/ops.def"

#endif // SHARDRT_CPU_H
