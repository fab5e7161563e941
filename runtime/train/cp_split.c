// The load-balanced sequence split of a batch over the cp mesh axis
// (docs/runtime.md, "Context parallelism"): each row's seq tokens are cut
// into 2 x cp equal chunks and cp rank c holds chunks c and 2cp - 1 - c,
// in that order. Under a causal mask the work of a query grows with its
// position, so a rank holding one early and one late chunk does the same
// attention work as every other (Megatron-LM's get_batch_on_this_cp_rank,
// torch's context_parallel head-tail load balancer). Labels are shifted
// over the global row before the split, since a rank's loss cannot see
// the token after its chunk.
#include <string.h>

#include "train_internal.h"

srt_status train_cp_check(int64_t seq, int cp, int c) {
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

int64_t train_cp_global_token(int64_t seq, int cp, int c, int64_t j) {
  if (cp == 1)
    return j;
  int64_t chunk = seq / (2 * (int64_t)cp);
  if (j < chunk)
    return c * chunk + j;
  return (2 * (int64_t)cp - 1 - c) * chunk + (j - chunk);
}

void train_cp_kv_chunk_order(int cp, int64_t *src) {
  for (int64_t k = 0; k < 2 * (int64_t)cp; ++k)
    src[k] = k < cp ? 2 * k : 2 * (2 * (int64_t)cp - 1 - k) + 1;
}

// Checks the arguments common to train_cp_take and train_cp_gather.
static srt_status check_copy(int64_t rows, int64_t seq, int cp, int c, size_t token_bytes) {
  SRT_RETURN_IF_ERROR(train_cp_check(seq, cp, c));
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
      size_t g = (size_t)(r * seq + train_cp_global_token(seq, cp, c, j)) * token_bytes;
      size_t l = (size_t)(r * width + j) * token_bytes;
      memcpy(dst + (to_local ? l : g), src + (to_local ? g : l), token_bytes);
    }
}

srt_status train_cp_take(const void *global, int64_t rows, int64_t seq, int cp, int c,
                         size_t token_bytes, void *local) {
  SRT_RETURN_IF_ERROR(check_copy(rows, seq, cp, c, token_bytes));
  copy_tokens(global, local, rows, seq, cp, c, token_bytes, true);
  return NULL;
}

srt_status train_cp_gather(const void *const *local, int64_t rows, int64_t seq, int cp,
                           size_t token_bytes, void *global) {
  SRT_RETURN_IF_ERROR(check_copy(rows, seq, cp, 0, token_bytes));
  for (int c = 0; c < cp; ++c)
    copy_tokens(local[c], global, rows, seq, cp, c, token_bytes, false);
  return NULL;
}

// Rank c's labels at cp > 1: the global labels shifted left by one token
// over each row (-100 after the row's last token), then split.
static void split_shifted_labels(const int64_t *labels, int64_t rows, int64_t seq, int cp, int c,
                                 int64_t *local) {
  int64_t width = seq / cp;
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t j = 0; j < width; ++j) {
      int64_t t = train_cp_global_token(seq, cp, c, j);
      local[r * width + j] = t + 1 < seq ? labels[r * seq + t + 1] : -100;
    }
}

srt_status train_cp_split(const train_rows_view *global, int64_t rows, int64_t seq, int cp,
                          int c, const train_pack_rows *local) {
  if ((local->positions && !global->positions) || (local->segments && !global->segments))
    return SRT_ERROR(SRT_INVALID_ARGUMENT,
                     "context parallelism: the local %s are asked for but the batch has none",
                     local->positions && !global->positions ? "positions" : "segments");
  SRT_RETURN_IF_ERROR(train_cp_take(global->ids, rows, seq, cp, c, sizeof(int64_t), local->ids));
  if (local->positions)
    SRT_RETURN_IF_ERROR(
        train_cp_take(global->positions, rows, seq, cp, c, sizeof(int64_t), local->positions));
  if (local->segments)
    SRT_RETURN_IF_ERROR(
        train_cp_take(global->segments, rows, seq, cp, c, sizeof(int64_t), local->segments));
  if (cp == 1) // today's step: its loss shifts the labels itself
    return train_cp_take(global->labels, rows, seq, cp, c, sizeof(int64_t), local->labels);
  split_shifted_labels(global->labels, rows, seq, cp, c, local->labels);
  return NULL;
}
