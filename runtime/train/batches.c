// Token batches into the arena: this dp rank's rows of a step's global
// batch (docs/data.md), for training steps and evaluations, their document
// structure (position and segment ids), and their copy to a device arena.
#include <string.h>

#include "train_internal.h"

int64_t train_first_row(srt_context *ctx, const srt_program *p, int64_t micro) {
  // The dp index (placements' coordinate is dp x cp: srt_context_coord).
  int coord[SRT_MESH_NDIMS];
  srt_mesh_coord(srt_context_mesh(ctx), srt_context_rank(ctx), coord);
  return (micro * p->dp + coord[SRT_MESH_DP]) * p->local_batch;
}

// train_token_reader over a token file.
static srt_status read_tokens(const void *source, int64_t at, int64_t n, int64_t *ids) {
  return srt_tokens_read(source, at, n, ids);
}

srt_status train_load_packed(srt_context *ctx, const srt_program *p, const train_pack_plan *plan,
                             const srt_tokens *tokens, int64_t step, int64_t micro,
                             const train_pack_rows *out) {
  return train_pack_fill(plan, step, p->batch, train_first_row(ctx, p, micro), p->local_batch,
                         TRAIN_PAD_ID, read_tokens, tokens, out);
}

srt_status train_load_batch(srt_context *ctx, const srt_program *p, uint8_t *arena,
                            const srt_tokens *tokens, const train_pack_plan *plan, int64_t step,
                            int64_t micro) {
  int64_t *ids = (int64_t *)(void *)(arena + p->input_ids_offset);
  if (plan) {
    // train_packed_supported made sure the program takes both.
    train_pack_rows out = {.ids = ids,
                           .labels = (int64_t *)(void *)(arena + p->labels_offset),
                           .positions = (int64_t *)(void *)(arena + p->position_ids_offset),
                           .segments = (int64_t *)(void *)(arena + p->segment_ids_offset)};
    return train_load_packed(ctx, p, plan, tokens, step, micro, &out);
  }
  SRT_RETURN_IF_ERROR(srt_tokens_batch(tokens, step, p->batch, p->seq,
                                       train_first_row(ctx, p, micro), p->local_batch, ids));
  // Labels are the inputs: the loss shifts them.
  memcpy(arena + p->labels_offset, ids, (size_t)(p->local_batch * p->seq) * sizeof *ids);
  train_one_document(p, arena);
  return NULL;
}

void train_one_document(const srt_program *p, uint8_t *arena) {
  int64_t rows = p->local_batch;
  if (p->position_ids_offset >= 0) {
    int64_t *pos = (int64_t *)(void *)(arena + p->position_ids_offset);
    for (int64_t t = 0; t < rows * p->seq; ++t)
      pos[t] = t % p->seq;
  }
  if (p->segment_ids_offset >= 0)
    memset(arena + p->segment_ids_offset, 0, (size_t)(rows * p->seq) * sizeof(int64_t));
}

int32_t train_one_document_rows(const srt_program *p, const uint8_t *arena) {
  if (p->segment_ids_offset < 0)
    return 1;
  const int64_t *seg = (const int64_t *)(const void *)(arena + p->segment_ids_offset);
  for (int64_t t = 0; t < p->local_batch * p->seq; ++t)
    if (seg[t] != 0)
      return 0;
  return 1;
}

srt_status train_upload_batch(const srt_backend *backend, void *device, const srt_program *p,
                              const uint8_t *arena) {
  int64_t bytes = p->local_batch * train_local_seq(p) * (int64_t)sizeof(int64_t);
  const int64_t inputs[4] = {p->input_ids_offset, p->labels_offset, p->position_ids_offset,
                             p->segment_ids_offset};
  for (int i = 0; i < 4; ++i)
    if (inputs[i] >= 0) // a step without documents has no position/segment ids
      SRT_RETURN_IF_ERROR(backend->to_device(device, p, arena, inputs[i], bytes));
  return NULL;
}
