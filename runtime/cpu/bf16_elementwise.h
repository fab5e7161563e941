// The bf16 cpu backend's elementwise and norm entry points
// (bf16_elementwise.c), which srt_cpu_bf16_ops (bf16_ops.c) lists: the
// cpu backend's fp32 kernels on row tiles of their bf16 buffers
// (bf16_rows.h), or, for the adds and GLU, their bf16 loops (the fp32
// per-element math between bf16 loads and rounded stores). Arguments, shapes and errors are those of the fp32 entry
// points of the same name (shardrt/cpu.h); every buffer is bf16 except
// the rotary tables (fp32) and the norm's weight gradient (fp32).
#ifndef SHARDRT_CPU_BF16_ELEMENTWISE_H
#define SHARDRT_CPU_BF16_ELEMENTWISE_H

#include <stdint.h>

#include "shardrt/backend.h"

/// The embedding's lookup of bf16 table rows into bf16 y (the rows a
/// token reads, not the whole table, are widened).
srt_status srt_cpu_bf16_op_embedding(srt_exec *e, int64_t ids, int64_t w, int64_t y, int64_t n,
                                     int64_t hidden, int64_t local_vocab, int64_t vocab_axis,
                                     double scale);

/// y = x + bias (bf16 x, bias, y).
srt_status srt_cpu_bf16_op_bias_add(srt_exec *e, int64_t x, int64_t b, int64_t y, int64_t n,
                                    int64_t f);

/// y = a + b; an fp32 add (dtype SRT_OP_F32) runs the fp32 entry point.
srt_status srt_cpu_bf16_op_add(srt_exec *e, int64_t a, int64_t b, int64_t y, int64_t n,
                               int64_t dtype);

/// RMSNorm of bf16 x with the bf16 weight copy w into bf16 y.
srt_status srt_cpu_bf16_op_rms_norm(srt_exec *e, int64_t x, int64_t w, int64_t y, int64_t n,
                                    int64_t features, int64_t group, double eps,
                                    double offset);

/// sum = a + b rounded to bf16, then y = RMSNorm of that rounded sum: the
/// values of add then rms_norm (as the cuda kernel normalises its bf16 sum).
srt_status srt_cpu_bf16_op_add_rms_norm(srt_exec *e, int64_t a, int64_t b, int64_t sum,
                                        int64_t w, int64_t y, int64_t n, int64_t features,
                                        int64_t group, double eps, double offset);

/// dx (bf16) of RMSNorm.
srt_status srt_cpu_bf16_op_rms_norm_grad_input(srt_exec *e, int64_t x, int64_t w, int64_t dy,
                                               int64_t dx, int64_t n, int64_t features,
                                               int64_t group, double eps, double offset);

/// dw (fp32) of RMSNorm: the fp32 kernel's blocks of rows, summed in block
/// order, so the same bytes as the fp32 entry point on widened x and dy.
srt_status srt_cpu_bf16_op_rms_norm_grad_weight(srt_exec *e, int64_t x, int64_t dy, int64_t dw,
                                                int64_t n, int64_t features, int64_t group,
                                                double eps);

/// Rotary application and its gradient (bf16 x/y, dy/dx; fp32 cos, sin).
srt_status srt_cpu_bf16_op_apply_rotary(srt_exec *e, int64_t x, int64_t cos, int64_t sin,
                                        int64_t y, int64_t batch, int64_t seq, int64_t heads,
                                        int64_t head_dim);
srt_status srt_cpu_bf16_op_apply_rotary_grad(srt_exec *e, int64_t dy, int64_t cos, int64_t sin,
                                             int64_t dx, int64_t batch, int64_t seq,
                                             int64_t heads, int64_t head_dim);

/// The gated MLP activation and its gradient (all bf16).
srt_status srt_cpu_bf16_op_glu(srt_exec *e, int64_t gate, int64_t up, int64_t y, int64_t n,
                               int64_t activation);
srt_status srt_cpu_bf16_op_glu_grad(srt_exec *e, int64_t gate, int64_t up, int64_t dy,
                                    int64_t dgate, int64_t dup, int64_t n, int64_t activation);

#endif // SHARDRT_CPU_BF16_ELEMENTWISE_H
