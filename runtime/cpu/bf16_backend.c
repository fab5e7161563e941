// The bf16 cpu backend as an object (srt_cpu_bf16_backend): what a program
// compiled with --param-dtype bf16 for the cpu names in its table. It runs
// like a device backend (host false): its arena is its own mapping, which
// holds the program's arena_bytes and, past them, the staging tail of its
// ops (bf16_stage.h); the driver keeps the persistent region on the host
// and copies it in and out, and each copy in that covers parameters
// refreshes their bf16 compute copies from the fp32 masters (round to
// nearest even), as the cuda backend's does.
#define _DEFAULT_SOURCE // MAP_ANONYMOUS, MAP_NORESERVE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "bf16_stage.h"
#include "shardrt/context.h"
#include "shardrt/cpu.h"
#include "shardrt/kernels.h"
#include "shardrt/tensor.h"

// The tail: the fp32 copies of one op's bf16 buffers, at most twice the
// bytes of the buffers it reads and writes, which lie in the arena (an
// output in place of an input counted twice): 4 x the arena bounds them.
// It is reserved, not committed: only the pages the largest op touches
// take memory.
static int64_t tail_bytes(int64_t arena_bytes) {
  return 4 * arena_bytes + (1 << 20);
}

static srt_status open_bf16(srt_context *ctx, const srt_program *program,
                            void **device, uint8_t **arena) {
  (void)ctx;
  srt_cpu_bf16_device *d = calloc(1, sizeof *d);
  if (!d)
    return SRT_ERROR(SRT_RESOURCE_EXHAUSTED,
                     "cpu-bf16 backend: out of host memory");
  d->arena_bytes = program->arena_bytes;
  d->tail_bytes = tail_bytes(program->arena_bytes);
  void *base = mmap(NULL, (size_t)(d->arena_bytes + d->tail_bytes),
                    PROT_READ | PROT_WRITE,
                    MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (base == MAP_FAILED) {
    int64_t bytes = d->arena_bytes + d->tail_bytes;
    free(d);
    return SRT_ERROR(
        SRT_RESOURCE_EXHAUSTED,
        "cpu-bf16 backend: cannot map an arena and staging of %lld bytes",
        (long long)bytes);
  }
  d->base = base;
  *device = d;
  *arena = d->base;
  return NULL;
}

// Each parameter whose fp32 master overlaps [offset, offset + bytes): its
// compute copy rounded from the master.
static void refresh_compute(const srt_cpu_bf16_device *d,
                            const srt_program *program, int64_t offset,
                            int64_t bytes) {
  for (int32_t i = 0; i < program->num_params; ++i) {
    const srt_param_info *p = &program->params[i];
    int64_t n = srt_shape_numel(p->rank, p->local_shape);
    if (p->compute_offset >= 0 && p->offset < offset + bytes &&
        p->offset + 4 * n > offset)
      srt_bf16_round((uint16_t *)(void *)(d->base + p->compute_offset),
                     (const float *)(const void *)(d->base + p->offset), n);
  }
}

static srt_status to_device(void *device, const srt_program *program,
                            const uint8_t *host, int64_t offset,
                            int64_t bytes) {
  srt_cpu_bf16_device *d = device;
  memcpy(d->base + offset, host + offset, (size_t)bytes);
  refresh_compute(d, program, offset, bytes);
  return NULL;
}

static srt_status to_host(void *device, const srt_program *program,
                          uint8_t *host, int64_t offset, int64_t bytes) {
  (void)program;
  const srt_cpu_bf16_device *d = device;
  memcpy(host + offset, d->base + offset, (size_t)bytes);
  return NULL;
}

static srt_status close_bf16(void *device) {
  srt_cpu_bf16_device *d = device;
  if (d) {
    munmap(d->base, (size_t)(d->arena_bytes + d->tail_bytes));
    free(d);
  }
  return NULL;
}

// The fp32 backend's measured peak (fp32 GEMMs): the bf16 GEMMs run up to
// twice as fast, so the MFU it gives a bf16 program can exceed what its
// bf16 kernels allow; the source says so.
static srt_status peak_flops(void *device, double *flops, char *source, size_t size) {
  (void)device;
  SRT_RETURN_IF_ERROR(srt_cpu_backend.peak_flops(NULL, flops, source, size));
  snprintf(source, size, "%s", "fp32 GEMM measured on every rank, summed; no bf16 peak");
  return NULL;
}

const srt_backend srt_cpu_bf16_backend = {
    .name = "cpu-bf16",
    .ops = &srt_cpu_bf16_ops,
    .open = open_bf16,
    .to_device = to_device,
    .to_host = to_host,
    .close = close_bf16,
    .peak_flops = peak_flops,
    .host = false,
};
