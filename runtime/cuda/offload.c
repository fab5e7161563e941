// --cpu-offload: the host optimizer step and the copies around it (see
// offload.h).
#include "offload.h"

#include "shardrt/convert.h"
#include "shardrt/kernels.h"
#include "shardrt/tensor.h"

static int64_t numel_of(const srt_param_info *pi) {
  return srt_shape_numel(pi->rank, pi->local_shape);
}

// The bf16 bits the device's __float2bfloat16_rn gives: round to nearest
// even, every NaN the canonical 0x7fff (cuda_bf16.hpp's own host path does
// the same; srt_f32_to_bf16 keeps the sign and payload instead).
static uint16_t device_bf16(float x) { return x != x ? 0x7fffu : srt_f32_to_bf16(x); }

void srt_cuda_offload_refresh(const srt_program *program, uint8_t *host) {
  for (int32_t i = 0; i < program->num_params; ++i) {
    const srt_param_info *pi = &program->params[i];
    const float *w = (const float *)(const void *)(host + pi->offset);
    uint16_t *copy = (uint16_t *)(void *)(host + pi->compute_offset);
    int64_t n = numel_of(pi);
#pragma omp parallel for schedule(static) if (n > (1 << 16))
    for (int64_t k = 0; k < n; ++k)
      copy[k] = device_bf16(w[k]);
  }
}

srt_status srt_cuda_offload_step(const srt_program *program, uint8_t *host,
                                 const srt_step_options *options, float clip) {
  if (!program || !host || !options)
    return SRT_ERROR(SRT_INVALID_ARGUMENT, "cpu offload: program, host copy or options is NULL");
  if (options->step < 1)
    return SRT_ERROR(SRT_INVALID_ARGUMENT, "cpu offload: AdamW step %lld must be >= 1",
                     (long long)options->step);
  srt_adamw_config c = {.lr = options->lr,
                        .beta1 = options->beta1,
                        .beta2 = options->beta2,
                        .eps = options->eps,
                        .weight_decay = options->weight_decay};
  for (int32_t i = 0; i < program->num_params; ++i) {
    const srt_param_info *pi = &program->params[i];
    srt_cpu_adamw_step((float *)(void *)(host + pi->offset),
                       (float *)(void *)(host + pi->m_offset),
                       (float *)(void *)(host + pi->v_offset),
                       (const float *)(const void *)(host + pi->grad_offset), clip,
                       numel_of(pi), options->step, &c);
  }
  srt_cuda_offload_refresh(program, host);
  return NULL;
}

// One contiguous run of buffers: [begin, end) of the persistent region.
typedef struct span {
  int64_t begin, end;
} span;

static srt_status copy_span(srt_cuda_device *d, span s, srt_offload_copy what) {
  size_t bytes = (size_t)(s.end - s.begin);
  if (what == SRT_OFFLOAD_GRADS_TO_HOST)
    SRT_CUDA_CHECK(cudaMemcpyAsync(d->host + s.begin, d->arena + s.begin, bytes,
                                   cudaMemcpyDeviceToHost, d->compute));
  else
    SRT_CUDA_CHECK(cudaMemcpyAsync(d->arena + s.begin, d->host + s.begin, bytes,
                                   cudaMemcpyHostToDevice, d->compute));
  return NULL;
}

srt_status srt_cuda_offload_copy(srt_cuda_device *d, const srt_program *program,
                                 srt_offload_copy what) {
  span run = {0, 0};
  for (int32_t i = 0; i < program->num_params; ++i) {
    const srt_param_info *pi = &program->params[i];
    bool grads = what == SRT_OFFLOAD_GRADS_TO_HOST;
    int64_t begin = grads ? pi->grad_offset : pi->compute_offset;
    int64_t end = begin + numel_of(pi) * (grads ? 4 : 2);
    if (begin == end)
      continue;
    // A gap under the alignment holds no other buffer (every buffer starts
    // 64-byte aligned): copying it with the run is harmless.
    if (run.end > run.begin && begin >= run.end && begin - run.end < 64) {
      run.end = end;
      continue;
    }
    if (run.end > run.begin)
      SRT_RETURN_IF_ERROR(copy_span(d, run, what));
    run = (span){begin, end};
  }
  if (run.end > run.begin)
    SRT_RETURN_IF_ERROR(copy_span(d, run, what));
  return NULL;
}
