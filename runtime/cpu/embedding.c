// Token embedding over a local vocabulary range (vocabulary-parallel
// embedding): forward gathers rows (threaded over tokens), backward
// scatter-adds into them (threaded over column blocks, tokens in order: the
// same bytes for any thread count).
// The cpu backend's entry points (srt_cpu_op_embedding and _grad) close the
// file.
#include "shardrt/kernels.h"

#include <string.h>

#include "ops_internal.h"
#include "vmath.h"

void srt_cpu_embedding_forward(float *out, const int64_t *ids,
                               const float *weight, int64_t n, int64_t hidden,
                               int64_t vocab_start, int64_t local_vocab,
                               float scale) {
#pragma omp parallel for schedule(static) if (n * hidden > kChunk)
  for (int64_t t = 0; t < n; t++) {
    float *o = out + t * hidden;
    // Unsigned compare: one test covers ids below and above the range.
    uint64_t row = (uint64_t)ids[t] - (uint64_t)vocab_start;
    if (row >= (uint64_t)local_vocab) {
      memset(o, 0, (size_t)hidden * sizeof *o);
      continue;
    }
    const float *w = weight + (int64_t)row * hidden;
    if (scale == 1.0f) {
      memcpy(o, w, (size_t)hidden * sizeof *o);
    } else {
      for (int64_t i = 0; i < hidden; i++)
        o[i] = w[i] * scale;
    }
  }
}

SRT_CPU_CLONES
static void scatter_columns(float *dweight, const float *dout, const int64_t *ids, int64_t n,
                            int64_t hidden, int64_t vocab_start, int64_t local_vocab,
                            float scale, int64_t padding_idx, int64_t i0, int64_t i1) {
  for (int64_t t = 0; t < n; t++) {
    uint64_t row = (uint64_t)ids[t] - (uint64_t)vocab_start;
    if (row >= (uint64_t)local_vocab || ids[t] == padding_idx)
      continue;
    float *dw = dweight + (int64_t)row * hidden;
    const float *g = dout + t * hidden;
#pragma omp simd
    for (int64_t i = i0; i < i1; i++)
      dw[i] += scale * g[i];
  }
}

void srt_cpu_embedding_backward(float *dweight, const float *dout,
                                const int64_t *ids, int64_t n, int64_t hidden,
                                int64_t vocab_start, int64_t local_vocab,
                                float scale, int64_t padding_idx) {
  // Blocks of 256 columns: each task reads its slice of every token row.
  enum { kBlock = 4 * kColumnBlock };
#pragma omp parallel for schedule(static) if (n * hidden > kChunk)
  for (int64_t i0 = 0; i0 < hidden; i0 += kBlock)
    scatter_columns(dweight, dout, ids, n, hidden, vocab_start, local_vocab, scale,
                    padding_idx, i0, i0 + kBlock < hidden ? i0 + kBlock : hidden);
}

//===----------------------------------------------------------------------===//
// Entry points of the cpu backend (srt_cpu_ops, shardrt/cpu.h): the kernels
// above on arena buffers
//===----------------------------------------------------------------------===//

srt_status srt_cpu_op_embedding(srt_exec *e, int64_t ids, int64_t w, int64_t y, int64_t n,
                                int64_t hidden, int64_t local_vocab, int64_t vocab_axis,
                                double scale) {
  const char *op = "srt_cpu_op_embedding";
  int64_t index, size;
  SRT_RETURN_IF_ERROR(srt_op_axis(e, op, vocab_axis, &index, &size));
  srt_cpu_embedding_forward(ops_f32(e, y), ops_i64(e, ids), ops_f32(e, w), n, hidden,
                            index * local_vocab, local_vocab, (float)scale);
  return NULL;
}

srt_status srt_cpu_op_embedding_grad(srt_exec *e, int64_t ids, int64_t dy, int64_t dw,
                                     int64_t n, int64_t hidden, int64_t local_vocab,
                                     int64_t vocab_axis, double scale, int64_t padding_idx) {
  const char *op = "srt_cpu_op_embedding_grad";
  int64_t index, size;
  SRT_RETURN_IF_ERROR(srt_op_axis(e, op, vocab_axis, &index, &size));
  ops_zero(ops_f32(e, dw), local_vocab * hidden);
  srt_cpu_embedding_backward(ops_f32(e, dw), ops_f32(e, dy), ops_i64(e, ids), n, hidden,
                             index * local_vocab, local_vocab, (float)scale, padding_idx);
  return NULL;
}
