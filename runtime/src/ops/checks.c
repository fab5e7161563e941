// The backend-independent checks of the graph-level ops (shardrt/backend.h)
// and the rank arithmetic both backends share.

#include "../context_internal.h"
#include "shardrt/backend.h"

int srt_op_rank(const srt_exec *e) { return e && e->ctx ? srt_context_rank(e->ctx) : -1; }

srt_status srt_op_axis(const srt_exec *e, const char *op, int64_t axis, int64_t *index,
                       int64_t *size) {
  if (axis < 0) {
    *index = 0;
    *size = 1;
    return NULL;
  }
  SRT_RETURN_IF_ERROR(srt_check_axis(e, op, "axis", axis));
  int coord[SRT_MESH_NDIMS];
  srt_context_coord(e->ctx, coord);
  *index = coord[axis];
  *size = srt_context_placement_mesh(e->ctx)->shape[axis];
  return NULL;
}

srt_status srt_op_scratch(srt_exec *e, size_t bytes, void **out) {
  return srt_context_op_scratch(e->ctx, bytes > 0 ? bytes : 1, out);
}

//===----------------------------------------------------------------------===//
// Single arguments
//===----------------------------------------------------------------------===//

srt_status srt_check_exec(const srt_exec *e, const char *op) {
  if (!e || !e->ctx || !e->arena || !e->backend)
    return SRT_ERROR(SRT_INVALID_ARGUMENT,
                     "%s: exec, its context, its arena or its backend is NULL", op);
  return NULL;
}

srt_status srt_check_offset(const srt_exec *e, const char *op, const char *name, int64_t offset,
                            int optional) {
  if (offset < 0 && !(optional && offset == -1))
    return SRT_ERROR(SRT_INVALID_ARGUMENT,
                     "%s: buffer '%s' has negative arena offset %lld", op, name,
                     (long long)offset);
  return NULL;
}

srt_status srt_check_size(const srt_exec *e, const char *op, const char *name, int64_t size) {
  if (size < 0)
    return SRT_ERROR(SRT_INVALID_ARGUMENT, "%s: size '%s' is negative (%lld)", op,
                     name, (long long)size);
  return NULL;
}

srt_status srt_check_axis(const srt_exec *e, const char *op, const char *name, int64_t axis) {
  if (axis < -1 || axis >= SRT_MESH_NDIMS)
    return SRT_ERROR(SRT_INVALID_ARGUMENT,
                     "%s: mesh axis %lld (%s) is not 0 (dp), 1 (tp) or -1 (none)", op,
                     (long long)axis, name);
  return NULL;
}

srt_status srt_check_dtype(const srt_exec *e, const char *op, const char *name, int64_t dtype) {
  if (dtype != SRT_OP_F32 && dtype != SRT_OP_BF16)
    return SRT_ERROR(SRT_INVALID_ARGUMENT, "%s: %s %lld is not 0 (fp32) or 1 (bf16)",
                     op, name, (long long)dtype);
  return NULL;
}

srt_status srt_check_ptr(const srt_exec *e, const char *op, const char *name, const void *p) {
  if (!p)
    return SRT_ERROR(SRT_INVALID_ARGUMENT, "%s: %s is NULL", op, name);
  return NULL;
}

//===----------------------------------------------------------------------===//
// Ops
//===----------------------------------------------------------------------===//

srt_status srt_check_norm_group(const srt_exec *e, const char *op, int64_t features,
                                int64_t group) {
  if (group < 0 || (group > 0 && features % group != 0))
    return SRT_ERROR(SRT_INVALID_ARGUMENT,
                     "%s: group %lld does not divide features %lld", op,
                     (long long)group, (long long)features);
  return NULL;
}

srt_status srt_check_even_head_dim(const srt_exec *e, const char *op, int64_t head_dim) {
  if (head_dim <= 0 || head_dim % 2)
    return SRT_ERROR(SRT_INVALID_ARGUMENT,
                     "%s: head_dim %lld is not positive and even", op,
                     (long long)head_dim);
  return NULL;
}

srt_status srt_check_rope(const srt_exec *e, const char *op, int64_t head_dim,
                          int64_t rope_type) {
  SRT_RETURN_IF_ERROR(srt_check_even_head_dim(e, op, head_dim));
  return srt_check_code(e, op, "rope_type", rope_type, SRT_ROPE_TYPE_COUNT);
}

srt_status srt_check_code(const srt_exec *e, const char *op, const char *name, int64_t code,
                          int64_t count) {
  if (code < 0 || code >= count)
    return SRT_ERROR(SRT_INVALID_ARGUMENT, "%s: %s %lld is not a code in [0, %lld)", op, name,
                     (long long)code, (long long)count);
  return NULL;
}

srt_status srt_check_attention(const srt_exec *e, const char *op,
                               const srt_op_attention_config *c, srt_attention_heads *heads) {
  if (!c)
    return SRT_ERROR(SRT_INVALID_ARGUMENT, "%s: config is NULL", op);
  if (c->batch <= 0 || c->seq <= 0 || c->num_heads <= 0 || c->num_kv_heads <= 0 ||
      c->head_dim <= 0 || c->sliding_window < 0 || !(c->softcap >= 0) || !(c->scale > 0))
    return SRT_ERROR(
        SRT_INVALID_ARGUMENT,
        "%s: batch %lld, seq %lld, heads %lld, kv heads %lld and head_dim %lld "
        "must be positive, window %lld and softcap %g >= 0, scale %g > 0",
        op, (long long)c->batch, (long long)c->seq, (long long)c->num_heads,
        (long long)c->num_kv_heads, (long long)c->head_dim, (long long)c->sliding_window,
        c->softcap, c->scale);
  int64_t index = 0, parts = 1;
  SRT_RETURN_IF_ERROR(srt_op_axis(e, op, c->q_head_offset_axis, &index, &parts));
  int64_t global = c->q_head_offset_axis >= 0 ? c->global_num_heads : c->num_heads;
  if (global % c->num_kv_heads != 0 ||
      (c->q_head_offset_axis >= 0 && global != c->num_heads * parts))
    return SRT_ERROR(SRT_INVALID_ARGUMENT,
                     "%s: %lld query heads (%lld local, axis size %lld%s) cannot share %lld "
                     "KV heads",
                     op, (long long)global, (long long)c->num_heads, (long long)parts,
                     c->q_head_offset_axis >= 0 ? ", replicated KV" : "",
                     (long long)c->num_kv_heads);
  if (heads)
    *heads = (srt_attention_heads){.first_head = index * c->num_heads,
                                   .global_heads = global,
                                   .group = global / c->num_kv_heads};
  return NULL;
}

srt_status srt_check_collective_shape(const srt_exec *e, const char *op, int64_t rank,
                                      int64_t d0, int64_t d1, int64_t d2, int64_t d3,
                                      int64_t dim_a, int64_t dim_b, int64_t shape[4]) {
  if (rank < 1 || rank > 4)
    return SRT_ERROR(SRT_INVALID_ARGUMENT, "%s: rank %lld is not in 1..4", op,
                     (long long)rank);
  if (dim_a < 0 || dim_a >= rank || dim_b < 0 || dim_b >= rank)
    return SRT_ERROR(SRT_INVALID_ARGUMENT,
                     "%s: tensor dim %lld/%lld outside a rank-%lld shape", op,
                     (long long)dim_a, (long long)dim_b, (long long)rank);
  if (shape)
    shape[0] = d0, shape[1] = d1, shape[2] = d2, shape[3] = d3;
  return NULL;
}

srt_status srt_check_slot(const srt_exec *e, const char *op, int64_t slot) {
  if (slot < 0 || slot >= SRT_MAX_PENDING)
    return SRT_ERROR(SRT_INVALID_ARGUMENT,
                     "%s: collective slot %lld is not in [0, %d)", op,
                     (long long)slot, SRT_MAX_PENDING);
  return NULL;
}

srt_status srt_check_collective_start(const srt_exec *e, const char *op, int64_t rank,
                                      int64_t d0, int64_t d1, int64_t d2, int64_t d3,
                                      int64_t dim, int64_t slot) {
  SRT_RETURN_IF_ERROR(srt_check_collective_shape(e, op, rank, d0, d1, d2, d3, dim, dim, NULL));
  return srt_check_slot(e, op, slot);
}

srt_status srt_check_bucket(const srt_exec *e, const char *op, const int64_t *members,
                            int64_t kind, int64_t slot) {
  if (kind < SRT_BUCKET_ALL_GATHER || kind > SRT_BUCKET_ALL_REDUCE)
    return SRT_ERROR(SRT_INVALID_ARGUMENT, "%s: bucket kind %lld is not 0, 1 or 2", op,
                     (long long)kind);
  if (members[0] < 1 || members[0] > SRT_MAX_BUCKET)
    return SRT_ERROR(SRT_INVALID_ARGUMENT, "%s: %lld bucket members, not 1..%d", op,
                     (long long)members[0], SRT_MAX_BUCKET);
  for (int64_t j = 0; j < members[0]; ++j) {
    const int64_t *m = members + 1 + 3 * j;
    if (m[0] < 0 || m[1] < 0 || m[2] < 0)
      return SRT_ERROR(SRT_INVALID_ARGUMENT,
                       "%s: bucket member %lld has offsets %lld, %lld and count %lld",
                       op, (long long)j, (long long)m[0], (long long)m[1], (long long)m[2]);
  }
  return srt_check_slot(e, op, slot);
}

int64_t srt_step_forward_only(const srt_step_options *options) {
  return options && options->forward_only ? 1 : 0;
}

srt_status srt_check_step_options(const srt_exec *e, const char *op,
                                  const srt_step_options *options) {
  if (options && options->step < 1)
    return SRT_ERROR(SRT_INVALID_ARGUMENT, "%s: AdamW step %lld must be >= 1", op,
                     (long long)options->step);
  return NULL;
}

//===----------------------------------------------------------------------===//
// Configurations
//===----------------------------------------------------------------------===//

srt_rope_config srt_op_rope_config(int64_t head_dim, double theta, int64_t rope_type,
                                   double factor, double low_freq_factor,
                                   double high_freq_factor, int64_t original_max_positions) {
  return (srt_rope_config){.head_dim = head_dim,
                           .theta = theta,
                           .type = (srt_rope_type)rope_type,
                           .factor = factor,
                           .low_freq_factor = low_freq_factor,
                           .high_freq_factor = high_freq_factor,
                           .original_max_position_embeddings = (double)original_max_positions};
}
