// Token embedding over a local vocabulary range (vocabulary-parallel
// embedding): forward gathers rows, backward scatter-adds into them.
#include "shardrt/kernels.h"

#include <string.h>

void srt_cpu_embedding_forward(float *out, const int64_t *ids,
                               const float *weight, int64_t n, int64_t hidden,
                               int64_t vocab_start, int64_t local_vocab,
                               float scale) {
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

void srt_cpu_embedding_backward(float *dweight, const float *dout,
                                const int64_t *ids, int64_t n, int64_t hidden,
                                int64_t vocab_start, int64_t local_vocab,
                                float scale) {
  for (int64_t t = 0; t < n; t++) {
    uint64_t row = (uint64_t)ids[t] - (uint64_t)vocab_start;
    if (row >= (uint64_t)local_vocab)
      continue;
    float *dw = dweight + (int64_t)row * hidden;
    const float *g = dout + t * hidden;
    for (int64_t i = 0; i < hidden; i++)
      dw[i] += scale * g[i];
  }
}
