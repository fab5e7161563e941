// The bf16 cpu backend's staging (srt_cpu_bf16_backend, bf16_backend.c):
// its ops (bf16_ops.c) run the fp32 entry points of the cpu backend on fp32
// copies of their bf16 buffers. The copies lie in a tail of the backend's
// own arena, past the program's arena_bytes, so that an fp32 entry point
// reads them at arena offsets like any other buffer (and the fp32 buffers
// it gets unchanged). An op stages each bf16 input (widened exactly), runs
// the fp32 entry point on the staged offsets and rounds each staged output
// back to bf16, round to nearest even (srt_f32_to_bf16's rounding, as the
// cuda kernels' __float2bfloat16). The tail is reused by every op.
#ifndef SHARDRT_CPU_BF16_STAGE_H
#define SHARDRT_CPU_BF16_STAGE_H

#include <stdint.h>

#include "shardrt/backend.h"
#include "shardrt/program.h"
#include "shardrt/types.h"

/// The backend's state (srt_exec.device): the mapping of the arena and its
/// staging tail, `tail_bytes` past `arena_bytes`.
typedef struct srt_cpu_bf16_device {
  uint8_t *base;
  int64_t arena_bytes, tail_bytes;
} srt_cpu_bf16_device;

/// The most staged inputs and outputs of one op: a bucket's members.
enum { SRT_BF16_STAGE_MAX = SRT_MAX_BUCKET };

/// A staged buffer: n fp32 at f32_at, the copy of the bf16 buffer at bf16_at
/// (an output is rounded into it).
typedef struct srt_bf16_staged {
  int64_t bf16_at, f32_at, n;
} srt_bf16_staged;

/// One op's staging: the tail's next free byte offset (from the arena's
/// start), the inputs staged and the outputs to round back.
typedef struct srt_bf16_stage {
  srt_exec *e;
  const char *op;
  int64_t top, end;
  int num_ins, num_outs;
  srt_bf16_staged ins[SRT_BF16_STAGE_MAX], outs[SRT_BF16_STAGE_MAX];
  srt_status error;
} srt_bf16_stage;

/// A staging for op `op` (named in errors) over the exec's tail.
srt_bf16_stage srt_bf16_stage_begin(srt_exec *e, const char *op);

/// The offset of an fp32 copy of the n bf16 elements at arena offset `at`
/// (-1, an absent optional buffer, stays -1). On a full tail it records the
/// error (srt_bf16_stage_end returns it) and returns `at`.
int64_t srt_bf16_stage_in(srt_bf16_stage *s, int64_t at, int64_t n);

/// The offset of n fp32 elements that srt_bf16_stage_end rounds into the
/// bf16 buffer at `at`: the staged input's copy where the op reads the same
/// buffer (an op the buffer plan runs in place, whose fp32 kernel then
/// runs in place too), else new. Errors as srt_bf16_stage_in.
int64_t srt_bf16_stage_out(srt_bf16_stage *s, int64_t at, int64_t n);

/// The offset of n fp32 of scratch in the tail, 64-byte aligned, for the
/// op's own use until srt_bf16_stage_end; -1 with the error recorded (as
/// srt_bf16_stage_in) when the tail is full.
int64_t srt_bf16_stage_scratch(srt_bf16_stage *s, int64_t n);

/// Rounds the staged outputs back when `status` is NULL; returns the
/// staging's error, else `status`.
srt_status srt_bf16_stage_end(srt_bf16_stage *s, srt_status status);

/// n bf16 at `src` widened to fp32 (exact), and n fp32 rounded to bf16
/// (nearest, ties to even; NaN stays a quiet NaN), on the kernels' threads.
void srt_bf16_widen(float *dst, const uint16_t *src, int64_t n);
void srt_bf16_round(uint16_t *dst, const float *src, int64_t n);

/// The same conversions on the calling thread: a tile of an op that its
/// own threads split (bf16_rows.h).
void srt_bf16_widen_tile(float *dst, const uint16_t *src, int64_t n);
void srt_bf16_round_tile(uint16_t *dst, const float *src, int64_t n);

#endif // SHARDRT_CPU_BF16_STAGE_H
