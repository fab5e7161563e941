// The bf16 cpu backend's staging of bf16 buffers in fp32 (bf16_stage.h).
#include "bf16_stage.h"

#include <string.h>

#include "shardrt/status.h"
#include "vmath.h"

SRT_CPU_CLONES
void srt_bf16_widen_tile(float *dst, const uint16_t *src, int64_t n) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i)
    dst[i] = srt_bf16_load(src[i]);
}

SRT_CPU_CLONES
void srt_bf16_round_tile(uint16_t *dst, const float *src, int64_t n) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i)
    dst[i] = srt_bf16_store(src[i]);
}

void srt_bf16_widen(float *dst, const uint16_t *src, int64_t n) {
#pragma omp parallel for schedule(static) if (n > kChunk)
  for (int64_t i0 = 0; i0 < n; i0 += kChunk)
    srt_bf16_widen_tile(dst + i0, src + i0, srt_chunk_end(i0, n) - i0);
}

void srt_bf16_round(uint16_t *dst, const float *src, int64_t n) {
#pragma omp parallel for schedule(static) if (n > kChunk)
  for (int64_t i0 = 0; i0 < n; i0 += kChunk)
    srt_bf16_round_tile(dst + i0, src + i0, srt_chunk_end(i0, n) - i0);
}

srt_bf16_stage srt_bf16_stage_begin(srt_exec *e, const char *op) {
  const srt_cpu_bf16_device *d = e->device;
  return (srt_bf16_stage){.e = e,
                          .op = op,
                          .top = d->arena_bytes,
                          .end = d->arena_bytes + d->tail_bytes};
}

// n floats of the tail (64-byte aligned), or -1 with the error recorded.
static int64_t take(srt_bf16_stage *s, int64_t n) {
  int64_t at = (s->top + 63) & ~(int64_t)63;
  if (s->error || n < 0 || at + 4 * n > s->end) {
    if (!s->error)
      s->error = SRT_ERROR(
          SRT_RESOURCE_EXHAUSTED,
          "%s: the fp32 staging of its bf16 buffers (%lld more bytes) "
          "exceeds the tail of %lld bytes",
          s->op, (long long)(4 * n), (long long)(s->end - s->top));
    return -1;
  }
  s->top = at + 4 * n;
  return at;
}

// Appends a staged buffer to `list` (of *count, SRT_BF16_STAGE_MAX at most).
static void note(srt_bf16_stage *s, srt_bf16_staged *list, int *count,
                 srt_bf16_staged b) {
  if (*count == SRT_BF16_STAGE_MAX) {
    if (!s->error)
      s->error = SRT_ERROR(SRT_INTERNAL, "%s: more than %d staged buffers",
                           s->op, SRT_BF16_STAGE_MAX);
    return;
  }
  list[(*count)++] = b;
}

int64_t srt_bf16_stage_scratch(srt_bf16_stage *s, int64_t n) {
  return take(s, n);
}

int64_t srt_bf16_stage_in(srt_bf16_stage *s, int64_t at, int64_t n) {
  if (at < 0)
    return at;
  int64_t f = take(s, n);
  if (f < 0)
    return at;
  srt_bf16_widen((float *)(void *)(s->e->arena + f),
                 (const uint16_t *)(const void *)(s->e->arena + at), n);
  note(s, s->ins, &s->num_ins,
       (srt_bf16_staged){.bf16_at = at, .f32_at = f, .n = n});
  return f;
}

int64_t srt_bf16_stage_out(srt_bf16_stage *s, int64_t at, int64_t n) {
  int64_t f = -1;
  for (int i = 0; i < s->num_ins && f < 0; ++i)
    if (s->ins[i].bf16_at == at && s->ins[i].n == n)
      f = s->ins[i].f32_at;
  if (f < 0 && (f = take(s, n)) < 0)
    return at;
  note(s, s->outs, &s->num_outs,
       (srt_bf16_staged){.bf16_at = at, .f32_at = f, .n = n});
  return f;
}

srt_status srt_bf16_stage_end(srt_bf16_stage *s, srt_status status) {
  if (s->error) {
    srt_status_free(status);
    return s->error;
  }
  for (int i = 0; !status && i < s->num_outs; ++i)
    srt_bf16_round(
        (uint16_t *)(void *)(s->e->arena + s->outs[i].bf16_at),
        (const float *)(const void *)(s->e->arena + s->outs[i].f32_at),
        s->outs[i].n);
  return status;
}
