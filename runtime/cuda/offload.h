// --cpu-offload on the cuda backend (torch FSDP2's CPUOffloadPolicy): the
// fp32 master weights and AdamW moments of every parameter live only in
// the host's copy of the persistent region (srt_program.offload_bytes, the
// prefix [0, offload_bytes); pinned by the backend's open), and AdamW
// steps them there. The device holds each parameter's fp32 gradient and
// bf16 compute copy. A step: the forward and backward on the device, the
// gradient norm on the device (as without offload), the gradients copied
// to the host, AdamW on the host (threaded, srt_cpu_adamw_step: the same
// fp32 operations, in the same order, as the device's AdamW kernel, so the
// weights are bit-identical with and without offload), the bf16 copies
// rounded on the host and copied back. Internal to runtime/cuda.
#ifndef SHARDRT_CUDA_OFFLOAD_H
#define SHARDRT_CUDA_OFFLOAD_H

#include <stdint.h>

#include "device.h"
#include "shardrt/program.h"

/// AdamW over every parameter of `program` in `host` (the host copy of the
/// persistent region, laid out by the program's offsets): fp32 weights at
/// `offset`, moments at `m_offset` / `v_offset`, the gradient (already
/// copied from the device) at `grad_offset`, scaled by `clip` (the total
/// norm's clipping coefficient, 1 for none) as srt_cpu_adamw_step does;
/// then every bf16 compute copy refreshed from the new weights
/// (srt_cuda_offload_refresh). Host memory only: no CUDA call.
/// Errors: SRT_INVALID_ARGUMENT for a NULL argument or a step < 1.
srt_status srt_cuda_offload_step(const srt_program *program, uint8_t *host,
                                 const srt_step_options *options, float clip);

/// Rounds every parameter's fp32 weights in `host` to its bf16 compute
/// copy at `compute_offset` as the device's __float2bfloat16_rn does (nearest
/// even; any NaN becomes the canonical 0x7fff), threaded over elements (the
/// same bytes for any thread count). Host memory only.
void srt_cuda_offload_refresh(const srt_program *program, uint8_t *host);

/// What srt_cuda_offload_copy moves: every gradient to the host, or every
/// bf16 compute copy to the device.
typedef enum srt_offload_copy {
  SRT_OFFLOAD_GRADS_TO_HOST,
  SRT_OFFLOAD_COPIES_TO_DEVICE,
} srt_offload_copy;

/// Enqueues on the compute stream the copies `what` names between the
/// device arena and the pinned host copy `d->host`, parameters whose
/// buffers follow one another (at most the 64-byte alignment apart) moved
/// as one copy. Does not wait. Errors: SRT_UNAVAILABLE naming the failing
/// CUDA call.
srt_status srt_cuda_offload_copy(srt_cuda_device *d, const srt_program *program,
                                 srt_offload_copy what);

#endif // SHARDRT_CUDA_OFFLOAD_H
