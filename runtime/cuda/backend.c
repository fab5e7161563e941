// The cuda backend object (srt_cuda_backend): opens the device (device.c)
// and owns its lifetime and that of what hangs off it, so that device.c
// needs none of them: the cuDNN plan cache (cudnn_attention.c) is released
// at close before the cuDNN handle, the --cpu-offload copies (offload.c)
// refresh the weights on a copy to the device, the peak FLOP/s (peak.c)
// answer peak_flops.
#include "cudnn_attention.h"
#include "device.h"
#include "offload.h"
#include "peak.h"

#include <stdbool.h>
#include <stdint.h>

#include "shardrt/cuda.h"

static srt_status open_device(srt_context *ctx, const srt_program *p, void **device,
                              uint8_t **arena) {
  srt_cuda_device *d = NULL;
  SRT_RETURN_IF_ERROR(srt_cuda_device_open(ctx, p, &d));
  *device = d;
  *arena = d->arena;
  return NULL;
}

// The wait aborts the communicators if the last collectives never end; the
// cached cuDNN plans go before the handle they were made with.
static srt_status close_device(void *device) {
  srt_cuda_device *d = device;
  if (!d)
    return NULL;
  srt_status first = d->compute ? srt_cuda_wait(d, d->compute, "closing the device") : NULL;
  srt_cudnn_attention_release(d);
  srt_cuda_device_free(d);
  return first;
}

// Whether [offset, offset + bytes) overlaps a parameter's master weights.
static bool touches_params(const srt_program *p, int64_t offset, int64_t bytes) {
  for (int32_t i = 0; i < p->num_params; ++i) {
    const srt_param_info *pi = &p->params[i];
    int64_t numel = 1;
    for (int k = 0; k < pi->rank; ++k)
      numel *= pi->local_shape[k];
    if (pi->offset < offset + bytes && offset < pi->offset + 4 * numel)
      return true;
  }
  return false;
}

// The device's part of [offset, offset + bytes): without its host-only
// prefix (--cpu-offload). Errors: a range outside the arena.
static srt_status device_part(const srt_cuda_device *d, const char *dir, int64_t *offset,
                              int64_t *bytes) {
  if (!d || *offset < 0 || *bytes < 0 || *offset + *bytes > d->arena_bytes)
    return SRT_ERROR(SRT_INVALID_ARGUMENT, "cuda backend: copy of [%lld, %lld) to the %s "
                     "lies outside the arena",
                     (long long)*offset, (long long)(*offset + *bytes), dir);
  int64_t end = *offset + *bytes;
  if (*offset < d->offload)
    *offset = d->offload;
  *bytes = end > *offset ? end - *offset : 0;
  return NULL;
}

// With offload: the bf16 copies from the host's weights, then to the device.
static srt_status refresh_from_host(srt_cuda_device *d, const srt_program *p,
                                    const uint8_t *host) {
  if (host != d->host)
    return SRT_ERROR(SRT_INVALID_ARGUMENT,
                     "cuda backend: with --cpu-offload the weights are copied from the "
                     "context's arena, the host copy the device was opened with");
  // The last step's copies of the bf16 weights may still read them.
  SRT_RETURN_IF_ERROR(srt_cuda_wait(d, d->compute, "the copies before refreshing the weights"));
  srt_cuda_offload_refresh(p, d->host);
  return srt_cuda_offload_copy(d, p, SRT_OFFLOAD_COPIES_TO_DEVICE);
}

static srt_status to_device(void *device, const srt_program *p, const uint8_t *host,
                            int64_t offset, int64_t bytes) {
  srt_cuda_device *d = device;
  bool params = touches_params(p, offset, bytes);
  SRT_RETURN_IF_ERROR(device_part(d, "device", &offset, &bytes));
  if (params && d->offload)
    SRT_RETURN_IF_ERROR(refresh_from_host(d, p, host));
  // On the compute stream, after the work that may still read the buffers
  // (the last step's inputs), and waited for: `host` is pageable.
  if (bytes)
    SRT_CUDA_CHECK(cudaMemcpyAsync(d->arena + offset, host + offset, (size_t)bytes,
                                   cudaMemcpyHostToDevice, d->compute));
  SRT_RETURN_IF_ERROR(srt_cuda_wait(d, d->compute, "the copy to the device"));
  if (params && !d->offload) {
    SRT_RETURN_IF_ERROR(srt_cuda_launched(
        srt_cuda_refresh_compute(d->slots, d->num_slots, d->total_numel, d->compute),
        "srt_cuda_refresh_compute", __FILE__, __LINE__));
    SRT_RETURN_IF_ERROR(srt_cuda_wait(d, d->compute, "refreshing the bf16 weights"));
  }
  return NULL;
}

// With offload the host's weights and moments are the only ones: nothing
// of the prefix is copied back.
static srt_status to_host(void *device, const srt_program *p, uint8_t *host, int64_t offset,
                          int64_t bytes) {
  (void)p;
  srt_cuda_device *d = device;
  SRT_RETURN_IF_ERROR(device_part(d, "host", &offset, &bytes));
  if (bytes)
    SRT_CUDA_CHECK(cudaMemcpyAsync(host + offset, d->arena + offset, (size_t)bytes,
                                   cudaMemcpyDeviceToHost, d->compute));
  return srt_cuda_wait(d, d->compute, "the copy to the host");
}

const srt_backend srt_cuda_backend = {
    .name = "cuda",
    .ops = &srt_cuda_ops,
    .open = open_device,
    .to_device = to_device,
    .to_host = to_host,
    .close = close_device,
    .peak_flops = srt_cuda_peak_flops,
};
