// Context parallelism's token moves on the device (cp_layout.h): every
// chunk of the head-tail layout is one strided 2-D copy over the rows
// (cudaMemcpy2DAsync), 2 x cp copies per tensor: chunk h (0: first, 1:
// second) of cp rank c holds the row's global chunk c (h = 0) or 2cp - 1 -
// c (h = 1), as srt_cp_global_token.
#include "cp_layout.h"

#include <stdbool.h>
#include <stdint.h>

// Copies every chunk between rank order and token order (to_tokens picks
// the direction).
static cudaError_t move_chunks(uint8_t *tokens, uint8_t *ranks, int64_t rows, int64_t seq,
                               int cp, size_t token_bytes, bool to_tokens,
                               cudaStream_t stream) {
  int64_t local = seq / cp, chunk = seq / (2 * (int64_t)cp);
  size_t width = (size_t)chunk * token_bytes, token_pitch = (size_t)seq * token_bytes;
  size_t rank_pitch = (size_t)local * token_bytes;
  for (int c = 0; c < cp; ++c)
    for (int h = 0; h < 2; ++h) {
      int64_t global = h == 0 ? c : 2 * (int64_t)cp - 1 - c;
      uint8_t *t = tokens + (size_t)(global * chunk) * token_bytes;
      uint8_t *r = ranks + ((size_t)c * (size_t)(rows * local) + (size_t)(h * chunk)) * token_bytes;
      cudaError_t e =
          to_tokens ? cudaMemcpy2DAsync(t, token_pitch, r, rank_pitch, width, (size_t)rows,
                                        cudaMemcpyDeviceToDevice, stream)
                    : cudaMemcpy2DAsync(r, rank_pitch, t, token_pitch, width, (size_t)rows,
                                        cudaMemcpyDeviceToDevice, stream);
      if (e != cudaSuccess)
        return e;
    }
  return cudaSuccess;
}

cudaError_t srt_cuda_cp_to_tokens(void *tokens, const void *ranks, int64_t rows, int64_t seq,
                                  int cp, size_t token_bytes, cudaStream_t stream) {
  return move_chunks(tokens, (uint8_t *)(uintptr_t)ranks, rows, seq, cp, token_bytes, true,
                     stream);
}

cudaError_t srt_cuda_cp_to_ranks(void *ranks, const void *tokens, int64_t rows, int64_t seq,
                                 int cp, size_t token_bytes, cudaStream_t stream) {
  return move_chunks((uint8_t *)(uintptr_t)tokens, ranks, rows, seq, cp, token_bytes, false,
                     stream);
}
