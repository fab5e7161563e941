// Row tiles of the bf16 cpu backend's elementwise and norm ops
// (bf16_elementwise.c): instead of staging whole bf16 buffers in fp32
// (bf16_stage.h), an op splits its rows into tiles of about a thousand
// elements; each of the kernels' threads widens one tile of every bf16
// input into its own fp32 buffers (which stay in its cache), runs the fp32
// kernel on that tile and rounds the tile's bf16 outputs to nearest even.
// The values are those of the staged path: every row is computed by the
// same fp32 kernel from the same exactly widened inputs and rounded once;
// only the memory traffic differs (bf16 in, bf16 out, no fp32 copy of the
// whole tensor written and read back).
#ifndef SHARDRT_CPU_BF16_ROWS_H
#define SHARDRT_CPU_BF16_ROWS_H

#include <stdbool.h>
#include <stdint.h>

#include "bf16_stage.h"

/// Operands of one row-tiled op: its inputs, then its outputs.
enum { SRT_BF16_ROWS_MAX = 6 };

/// One operand: the arena offset of its [rows, width] buffer (-1: absent),
/// bf16 unless `f32` (then its rows are read or written in place).
typedef struct srt_bf16_operand {
  int64_t at, width;
  bool f32;
} srt_bf16_operand;

/// The fp32 kernel on the tile of rows [r0, r0 + rows): op[i] holds
/// operand i's rows (fp32: the thread's widened copy of a bf16 input, the
/// buffer a bf16 output is rounded from, the arena's rows of an fp32
/// operand, NULL for an absent one). Runs on one thread.
typedef void srt_bf16_tile_fn(const void *ctx, float *const *op, int64_t r0,
                              int64_t rows);

/// A row-tiled op: `rows` rows in tiles of `tile_rows` (the last may be
/// shorter), operands ops[0, num_in) read and ops[num_in, num_in +
/// num_out) written.
typedef struct srt_bf16_rows {
  int num_in, num_out;
  srt_bf16_operand ops[SRT_BF16_ROWS_MAX];
  int64_t rows, tile_rows;
  srt_bf16_tile_fn *fn;
  const void *ctx;
} srt_bf16_rows;

/// Rows per tile for operands up to `width` elements wide: about 1024
/// elements (4 KiB per fp32 operand), at least one row.
int64_t srt_bf16_tile_rows(int64_t width);

/// Runs `r` tile by tile on the kernels' threads, each thread's fp32
/// buffers taken from st's tail (st records a full tail; the op's
/// srt_bf16_stage_end returns that error, and nothing runs).
void srt_bf16_rows_run(srt_bf16_stage *st, const srt_bf16_rows *r);

#endif // SHARDRT_CPU_BF16_ROWS_H
