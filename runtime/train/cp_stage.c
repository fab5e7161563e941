// A context-parallel step's batch, staged whole: the loaders (token
// windows, packed documents, batch files) write this dp rank's rows
// [local_batch, seq] as for a step without cp, into a host buffer laid out
// like an arena's inputs, and train_cp_stage_split hands the step its cp
// rank's share (train_cp_split: chunks c and 2cp - 1 - c, labels shifted
// over the whole row). So nothing that reads batches knows about cp.
#include <stdlib.h>
#include <string.h>

#include "train_internal.h"

int64_t train_local_seq(const srt_program *p) { return p->cp > 1 ? p->seq / p->cp : p->seq; }

srt_status train_cp_stage_init(const srt_program *p, train_cp_stage *st) {
  *st = (train_cp_stage){.view = *p};
  if (p->cp <= 1)
    return NULL;
  int64_t n = p->local_batch * p->seq * (int64_t)sizeof(int64_t), at = 0;
  int64_t *offsets[4] = {&st->view.input_ids_offset, &st->view.labels_offset,
                         &st->view.position_ids_offset, &st->view.segment_ids_offset};
  for (int i = 0; i < 4; ++i)
    if (*offsets[i] >= 0) { // a step without documents has no position/segment ids
      *offsets[i] = at;
      at += n;
    }
  st->view.cp = 1;
  st->rows = malloc((size_t)(at > 0 ? at : 1));
  if (!st->rows)
    return SRT_ERROR(SRT_RESOURCE_EXHAUSTED,
                     "train: cannot allocate %lld bytes for the context-parallel batch",
                     (long long)at);
  return NULL;
}

void train_cp_stage_free(train_cp_stage *st) {
  free(st->rows);
  st->rows = NULL;
}

// The int64 input at `offset` of `base`, or NULL for offset -1.
static int64_t *input(uint8_t *base, int64_t offset) {
  return offset >= 0 ? (int64_t *)(void *)(base + offset) : NULL;
}

srt_status train_cp_stage_split(const train_cp_stage *st, srt_context *ctx,
                                const srt_program *p, uint8_t *arena) {
  const srt_program *v = &st->view;
  train_rows_view global = {input(st->rows, v->input_ids_offset),
                            input(st->rows, v->labels_offset),
                            input(st->rows, v->position_ids_offset),
                            input(st->rows, v->segment_ids_offset)};
  train_pack_rows local = {.ids = input(arena, p->input_ids_offset),
                           .labels = input(arena, p->labels_offset),
                           .positions = input(arena, p->position_ids_offset),
                           .segments = input(arena, p->segment_ids_offset)};
  int c = srt_group_rank(srt_context_group(ctx, SRT_GROUP_CP));
  return train_cp_split(&global, p->local_batch, p->seq, (int)p->cp, c, &local);
}
