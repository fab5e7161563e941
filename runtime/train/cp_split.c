// The split of a batch over the cp mesh axis (docs/runtime.md, "Context
// parallelism") in shardrt/cp.h's load-balanced layout. Labels are shifted
// over the global row before the split, since a rank's loss cannot see the
// token after its chunk.
#include <string.h>

#include "train_internal.h"

// Rank c's labels at cp > 1: the global labels shifted left by one token
// over each row (-100 after the row's last token), then split.
static void split_shifted_labels(const int64_t *labels, int64_t rows, int64_t seq, int cp, int c,
                                 int64_t *local) {
  int64_t width = seq / cp;
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t j = 0; j < width; ++j) {
      int64_t t = srt_cp_global_token(seq, cp, c, j);
      local[r * width + j] = t + 1 < seq ? labels[r * seq + t + 1] : -100;
    }
}

srt_status train_cp_split(const train_rows_view *global, int64_t rows, int64_t seq, int cp,
                          int c, const train_pack_rows *local) {
  if ((local->positions && !global->positions) || (local->segments && !global->segments))
    return SRT_ERROR(SRT_INVALID_ARGUMENT,
                     "context parallelism: the local %s are asked for but the batch has none",
                     local->positions && !global->positions ? "positions" : "segments");
  SRT_RETURN_IF_ERROR(srt_cp_take(global->ids, rows, seq, cp, c, sizeof(int64_t), local->ids));
  if (local->positions)
    SRT_RETURN_IF_ERROR(
        srt_cp_take(global->positions, rows, seq, cp, c, sizeof(int64_t), local->positions));
  if (local->segments)
    SRT_RETURN_IF_ERROR(
        srt_cp_take(global->segments, rows, seq, cp, c, sizeof(int64_t), local->segments));
  if (cp == 1) // today's step: its loss shifts the labels itself
    return srt_cp_take(global->labels, rows, seq, cp, c, sizeof(int64_t), local->labels);
  split_shifted_labels(global->labels, rows, seq, cp, c, local->labels);
  return NULL;
}
