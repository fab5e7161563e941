// Attention through cuDNN's fused scaled-dot-product attention (the cuDNN
// backend "graph" C API, cudnn_graph.h): forward with the log-sum-exp
// statistics and the backward, bf16 in and out with fp32 softmax, causal and
// sliding-window masks, GQA. Plans (operation graph, engine config,
// execution plan, workspace size) are built once per shape and cached in
// the device state; only the variant pack changes per call. cuDNN's
// workspace comes from srt_cuda_cudnn_workspace (never srt_cuda_scratch,
// which holds the caller's buffers).
//
// What cuDNN cannot do is reported, not failed: *supported = false (with
// NULL returned) for softcapping, a replicated-KV head mapping
// (q_head_offset != 0 or global_heads != heads), head_dim above 256 or not a
// multiple of 8, or when cuDNN finalises no engine for the graph; the
// caller then uses our kernels (kernels/attention.cu). Results are checked
// against those kernels on first use of every shape (ops_attention.c).
//
// Layouts are the nn dialect's: q, out, dout, dq [batch, seq, heads * hd];
// k, v, dk, dv [batch, seq, kv_heads * hd]; lse [batch, heads, seq] fp32.
#ifndef SHARDRT_CUDA_CUDNN_ATTENTION_H
#define SHARDRT_CUDA_CUDNN_ATTENTION_H

#include <stdbool.h>

#include "device.h"

/// out = softmax(mask(scale q k^T)) v and lse, on d->compute.
/// Errors: SRT_UNAVAILABLE naming the failing cuDNN call (a graph cuDNN
/// accepted and then failed to run).
srt_status srt_cudnn_attention_forward(srt_cuda_device *d, const srt_cuda_attention_shape *s,
                                       const srt_bf16 *q, const srt_bf16 *k,
                                       const srt_bf16 *v, srt_bf16 *out, float *lse,
                                       bool *supported);

/// dq, dk, dv (WRITTEN) from dout and the forward's out and lse, on
/// d->compute. Errors: as the forward.
srt_status srt_cudnn_attention_backward(srt_cuda_device *d, const srt_cuda_attention_shape *s,
                                        const srt_bf16 *q, const srt_bf16 *k,
                                        const srt_bf16 *v, const srt_bf16 *out,
                                        const srt_bf16 *dout, const float *lse, srt_bf16 *dq,
                                        srt_bf16 *dk, srt_bf16 *dv, bool *supported);

/// Frees every cached cuDNN plan of `d` (called by the backend's close).
void srt_cudnn_attention_release(srt_cuda_device *d);

#endif // SHARDRT_CUDA_CUDNN_ATTENTION_H
