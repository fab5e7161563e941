// Token batches into the arena: this dp rank's rows of a step's global
// batch (docs/data.md), for training steps and evaluations, and their copy
// to a device arena.
#include <string.h>

#include "train_internal.h"

int64_t train_first_row(srt_context *ctx, const srt_program *p, int64_t micro) {
  int coord[SRT_MESH_NDIMS];
  srt_context_coord(ctx, coord);
  return (micro * p->dp + coord[SRT_MESH_DP]) * p->local_batch;
}

srt_status train_load_batch(srt_context *ctx, const srt_program *p, uint8_t *arena,
                            const srt_tokens *tokens, int64_t step, int64_t micro) {
  int64_t *ids = (int64_t *)(void *)(arena + p->input_ids_offset);
  SRT_RETURN_IF_ERROR(srt_tokens_batch(tokens, step, p->batch, p->seq,
                                       train_first_row(ctx, p, micro), p->local_batch, ids));
  // Labels are the inputs: the loss shifts them.
  memcpy(arena + p->labels_offset, ids, (size_t)(p->local_batch * p->seq) * sizeof *ids);
  return NULL;
}

srt_status train_upload_batch(const srt_backend *backend, void *device, const srt_program *p,
                              const uint8_t *arena) {
  int64_t bytes = p->local_batch * p->seq * (int64_t)sizeof(int64_t);
  SRT_RETURN_IF_ERROR(backend->to_device(device, p, arena, p->input_ids_offset, bytes));
  return backend->to_device(device, p, arena, p->labels_offset, bytes);
}
