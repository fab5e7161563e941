// The load-balanced layout of a sequence split over the cp mesh axis
// (shardrt/cp.h): each row's seq tokens cut into 2 x cp equal chunks, cp
// rank c holding chunks c and 2cp - 1 - c, in that order (Megatron-LM's
// get_batch_on_this_cp_rank, torch's context_parallel head-tail load
// balancer): under a causal mask every rank then does the same attention
// work.
#include <stdbool.h>
#include <string.h>

#include "shardrt/cp.h"

srt_status srt_cp_check(int64_t seq, int cp, int c) {
  if (cp < 1 || c < 0 || c >= cp)
    return SRT_ERROR(SRT_INVALID_ARGUMENT,
                     "context parallelism: cp rank %d of cp %d (cp must be >= 1 and the rank "
                     "in [0, cp))",
                     c, cp);
  if (seq < 1)
    return SRT_ERROR(SRT_INVALID_ARGUMENT, "context parallelism: seq %lld (must be >= 1)",
                     (long long)seq);
  if (cp > 1 && seq % (2 * (int64_t)cp) != 0)
    return SRT_ERROR(SRT_INVALID_ARGUMENT,
                     "context parallelism: seq %lld is not a multiple of 2 x cp = %lld (cp %d "
                     "splits each row into 2 x cp equal chunks)",
                     (long long)seq, 2 * (long long)cp, cp);
  return NULL;
}

int64_t srt_cp_global_token(int64_t seq, int cp, int c, int64_t j) {
  if (cp == 1)
    return j;
  int64_t chunk = seq / (2 * (int64_t)cp);
  if (j < chunk)
    return c * chunk + j;
  return (2 * (int64_t)cp - 1 - c) * chunk + (j - chunk);
}

void srt_cp_kv_chunk_order(int cp, int64_t *src) {
  for (int64_t k = 0; k < 2 * (int64_t)cp; ++k)
    src[k] = k < cp ? 2 * k : 2 * (2 * (int64_t)cp - 1 - k) + 1;
}

// Checks the arguments common to srt_cp_take and srt_cp_gather.
static srt_status check_copy(int64_t rows, int64_t seq, int cp, int c, size_t token_bytes) {
  SRT_RETURN_IF_ERROR(srt_cp_check(seq, cp, c));
  if (rows < 0 || token_bytes == 0)
    return SRT_ERROR(SRT_INVALID_ARGUMENT,
                     "context parallelism: %lld rows of %zu bytes per token (rows must be >= 0, "
                     "bytes >= 1)",
                     (long long)rows, token_bytes);
  return NULL;
}

// Copies rank c's tokens between global [rows, seq, token_bytes] and local
// [rows, seq/cp, token_bytes]: from `src` (global when `to_local`, else
// local) to `dst` (the other side).
static void copy_tokens(const uint8_t *src, uint8_t *dst, int64_t rows, int64_t seq, int cp,
                        int c, size_t token_bytes, bool to_local) {
  int64_t width = seq / cp;
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t j = 0; j < width; ++j) {
      size_t g = (size_t)(r * seq + srt_cp_global_token(seq, cp, c, j)) * token_bytes;
      size_t l = (size_t)(r * width + j) * token_bytes;
      memcpy(dst + (to_local ? l : g), src + (to_local ? g : l), token_bytes);
    }
}

srt_status srt_cp_take(const void *global, int64_t rows, int64_t seq, int cp, int c,
                         size_t token_bytes, void *local) {
  SRT_RETURN_IF_ERROR(check_copy(rows, seq, cp, c, token_bytes));
  copy_tokens(global, local, rows, seq, cp, c, token_bytes, true);
  return NULL;
}

srt_status srt_cp_gather(const void *const *local, int64_t rows, int64_t seq, int cp,
                           size_t token_bytes, void *global) {
  SRT_RETURN_IF_ERROR(check_copy(rows, seq, cp, 0, token_bytes));
  for (int c = 0; c < cp; ++c)
    copy_tokens(local[c], global, rows, seq, cp, c, token_bytes, false);
  return NULL;
}

