// Token batches into the arena: this dp rank's rows of a step's global
// batch (docs/data.md), for training steps and evaluations, and their copy
// to a device arena.
#include <string.h>

#include "shardrt/cpu.h"
#include "train_internal.h"

int64_t train_first_row(srt_context *ctx, const srt_program *p, int64_t micro) {
  int coord[SRT_MESH_NDIMS];
  srt_context_coord(ctx, coord);
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
    // TODO(integrator): positions and segments into the program's
    // position_ids_offset and segment_ids_offset buffers once program.h has
    // them (train_packed_supported refuses version 2 files until then).
    train_pack_rows out = {.ids = ids, .labels = (int64_t *)(void *)(arena + p->labels_offset)};
    return train_load_packed(ctx, p, plan, tokens, step, micro, &out);
  }
  SRT_RETURN_IF_ERROR(srt_tokens_batch(tokens, step, p->batch, p->seq,
                                       train_first_row(ctx, p, micro), p->local_batch, ids));
  // Labels are the inputs: the loss shifts them.
  memcpy(arena + p->labels_offset, ids, (size_t)(p->local_batch * p->seq) * sizeof *ids);
  return NULL;
}

const srt_backend *train_backend_of(const srt_program *p) {
  // The program table's convention (lower-to-runtime): no backend is the cpu.
  return p->backend ? p->backend : &srt_cpu_backend;
}

srt_status train_upload_batch(const srt_backend *backend, void *device, const srt_program *p,
                              const uint8_t *arena) {
  int64_t bytes = p->local_batch * p->seq * (int64_t)sizeof(int64_t);
  SRT_RETURN_IF_ERROR(backend->to_device(device, p, arena, p->input_ids_offset, bytes));
  return backend->to_device(device, p, arena, p->labels_offset, bytes);
}
