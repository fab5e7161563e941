// Shared plumbing of the graph-level ops: argument checks, the rank's mesh
// index on an axis, and the context-owned scratch buffer.
#include "ops_internal.h"

#include "../context_internal.h"

int ops_rank(const srt_exec *e) {
  return e && e->ctx ? srt_context_rank(e->ctx) : -1;
}

srt_status ops_check(const srt_exec *e, const char *op, int n, const int64_t *offsets,
                     int n_sizes, const int64_t *sizes) {
  if (!e || !e->ctx || !e->arena)
    return SRT_ERROR(SRT_INVALID_ARGUMENT, "%s: exec, its context or its arena is NULL",
                     op);
  for (int i = 0; i < n; ++i)
    if (offsets[i] < 0)
      return SRT_ERROR(SRT_INVALID_ARGUMENT,
                       "%s: buffer argument %d has negative arena offset %lld (rank %d)",
                       op, i, (long long)offsets[i], ops_rank(e));
  for (int i = 0; i < n_sizes; ++i)
    if (sizes[i] < 0)
      return SRT_ERROR(SRT_INVALID_ARGUMENT,
                       "%s: size argument %d is negative (%lld) (rank %d)", op, i,
                       (long long)sizes[i], ops_rank(e));
  return NULL;
}

srt_status ops_axis(srt_exec *e, const char *op, int64_t axis, int64_t *index,
                    int64_t *size) {
  if (axis < 0) {
    *index = 0;
    *size = 1;
    return NULL;
  }
  if (axis >= SRT_MESH_NDIMS)
    return SRT_ERROR(SRT_INVALID_ARGUMENT,
                     "%s: mesh axis %lld is not 0 (dp), 1 (tp) or -1 (none) (rank %d)", op,
                     (long long)axis, ops_rank(e));
  int coord[SRT_MESH_NDIMS];
  srt_context_coord(e->ctx, coord);
  *index = coord[axis];
  *size = srt_context_mesh(e->ctx)->shape[axis];
  return NULL;
}

srt_status ops_scratch(srt_exec *e, int64_t floats, float **out) {
  void *p;
  SRT_RETURN_IF_ERROR(srt_context_op_scratch(
      e->ctx, (size_t)(floats > 0 ? floats : 1) * sizeof(float), &p));
  *out = p;
  return NULL;
}

srt_status ops_rope_config(const char *op, int64_t head_dim, double theta, int64_t rope_type,
                           double factor, double low_freq_factor, double high_freq_factor,
                           int64_t original_max_positions, srt_rope_config *config) {
  if (rope_type != SRT_ROPE_DEFAULT && rope_type != SRT_ROPE_LLAMA3)
    return SRT_ERROR(SRT_INVALID_ARGUMENT, "%s: rope_type %lld is not 0 (default) or 1 (llama3)",
                     op, (long long)rope_type);
  *config = (srt_rope_config){.head_dim = head_dim,
                              .theta = theta,
                              .type = (srt_rope_type)rope_type,
                              .factor = factor,
                              .low_freq_factor = low_freq_factor,
                              .high_freq_factor = high_freq_factor,
                              .original_max_position_embeddings = (double)original_max_positions};
  return NULL;
}

srt_status ops_glu_activation(srt_exec *e, const char *op, int64_t activation,
                              srt_glu_activation *act) {
  if (activation != 0 && activation != 1)
    return SRT_ERROR(SRT_INVALID_ARGUMENT,
                     "%s: activation %lld is not 0 (silu) or 1 (gelu tanh) (rank %d)", op,
                     (long long)activation, ops_rank(e));
  *act = activation == 0 ? SRT_GLU_SILU : SRT_GLU_GELU_TANH;
  return NULL;
}
