// Collective ops of the cpu backend (shardrt/cpu.h): all-reduce, all-gather,
// reduce-scatter, all-to-all and the local all-slice on one mesh axis, out
// of place, over the context's dp or tp group. Shapes arrive as the LOCAL
// input's rank and up to four dims. The srt_cpu_op_* entry points take
// fp32 only; the ops_* forms (ops_internal.h) take the element type too,
// for the bf16 backend, whose bf16 buffers move and reduce as bf16.
#include <stdbool.h>
#include <string.h>

#include "ops_internal.h"
#include "shardrt/collectives.h"

// The byte at offset `off` of the rank's arena.
static void *at(srt_exec *e, int64_t off) { return e->arena + off; }

// The group of mesh `axis` (0 = dp, 1 = tp) of a collective (the
// dispatcher checked its shape).
static srt_status begin(srt_exec *e, const char *op, int64_t axis, srt_group **g) {
  if (axis != SRT_MESH_DP && axis != SRT_MESH_TP)
    return SRT_ERROR(SRT_INVALID_ARGUMENT,
                     "%s: mesh axis %lld is not 0 (dp) or 1 (tp)", op,
                     (long long)axis);
  *g = srt_context_group(e->ctx, axis == SRT_MESH_DP ? SRT_GROUP_DP_CP : SRT_GROUP_TP);
  return NULL;
}

srt_status ops_all_reduce(srt_exec *e, const char *op, int64_t in, int64_t out, int64_t count,
                          int64_t axis, int64_t is_max, srt_dtype dtype, int64_t slot) {
  srt_group *g = NULL; // set by begin() on success (GCC -O3 cannot tell)
  SRT_RETURN_IF_ERROR(begin(e, op, axis, &g));
  if (in != out)
    memmove(at(e, out), at(e, in), (size_t)count * srt_dtype_size(dtype));
  srt_reduce_op red = is_max ? SRT_REDUCE_MAX : SRT_REDUCE_SUM;
  return slot < 0 ? srt_all_reduce(g, at(e, out), count, dtype, red)
                  : srt_all_reduce_start(g, at(e, out), count, dtype, red, (int)slot);
}

// An all-reduce out of place (copied, then in place): blocking (slot < 0)
// or started into `slot`.
static srt_status all_reduce(srt_exec *e, const char *op, int64_t in, int64_t out,
                             int64_t count, int64_t axis, int64_t is_max, int64_t dtype,
                             int64_t slot) {
  SRT_RETURN_IF_ERROR(ops_f32_only(e, op, dtype));
  return ops_all_reduce(e, op, in, out, count, axis, is_max, SRT_F32, slot);
}

srt_status srt_cpu_op_all_reduce(srt_exec *e, int64_t in, int64_t out, int64_t count,
                                 int64_t axis, int64_t is_max, int64_t dtype) {
  return all_reduce(e, "srt_cpu_op_all_reduce", in, out, count, axis, is_max, dtype, -1);
}

srt_status ops_gather_scatter(srt_exec *e, const char *op, bool scatter, int64_t in,
                              int64_t out, int64_t axis, int64_t dim, int64_t rank,
                              const int64_t shape[4], srt_dtype dtype, int64_t slot) {
  srt_group *g = NULL; // set by begin() on success (GCC -O3 cannot tell)
  SRT_RETURN_IF_ERROR(begin(e, op, axis, &g));
  const void *x = at(e, in);
  void *y = at(e, out);
  if (scatter)
    return slot < 0 ? srt_reduce_scatter(g, x, y, dtype, (int)rank, shape, (int)dim,
                                         SRT_REDUCE_SUM)
                    : srt_reduce_scatter_start(g, x, y, dtype, (int)rank, shape, (int)dim,
                                               SRT_REDUCE_SUM, (int)slot);
  return slot < 0 ? srt_all_gather(g, x, y, dtype, (int)rank, shape, (int)dim)
                  : srt_all_gather_start(g, x, y, dtype, (int)rank, shape, (int)dim,
                                         (int)slot);
}

// ops_gather_scatter of fp32 buffers.
static srt_status gather_scatter(srt_exec *e, const char *op, bool scatter, int64_t in,
                                 int64_t out, int64_t axis, int64_t dim, int64_t rank,
                                 const int64_t shape[4], int64_t dtype, int64_t slot) {
  SRT_RETURN_IF_ERROR(ops_f32_only(e, op, dtype));
  return ops_gather_scatter(e, op, scatter, in, out, axis, dim, rank, shape, SRT_F32, slot);
}

srt_status srt_cpu_op_all_gather(srt_exec *e, int64_t in, int64_t out, int64_t axis,
                                 int64_t dim, int64_t rank, int64_t d0, int64_t d1, int64_t d2,
                                 int64_t d3, int64_t dtype) {
  const int64_t shape[4] = {d0, d1, d2, d3};
  return gather_scatter(e, "srt_cpu_op_all_gather", false, in, out, axis, dim, rank, shape,
                        dtype, -1);
}

srt_status srt_cpu_op_reduce_scatter(srt_exec *e, int64_t in, int64_t out, int64_t axis,
                                     int64_t dim, int64_t rank, int64_t d0, int64_t d1,
                                     int64_t d2, int64_t d3, int64_t dtype) {
  const int64_t shape[4] = {d0, d1, d2, d3};
  return gather_scatter(e, "srt_cpu_op_reduce_scatter", true, in, out, axis, dim, rank, shape,
                        dtype, -1);
}

srt_status ops_all_to_all(srt_exec *e, const char *op, int64_t in, int64_t out, int64_t axis,
                          int64_t split_dim, int64_t concat_dim, int64_t rank,
                          const int64_t shape[4], srt_dtype dtype) {
  srt_group *g = NULL; // set by begin() on success (GCC -O3 cannot tell)
  SRT_RETURN_IF_ERROR(begin(e, op, axis, &g));
  // split_dim becomes sharded, concat_dim whole: Shard(concat) -> Shard(split).
  return srt_all_to_all(g, at(e, in), at(e, out), dtype, (int)rank, shape, (int)concat_dim,
                        (int)split_dim);
}

srt_status srt_cpu_op_all_to_all(srt_exec *e, int64_t in, int64_t out, int64_t axis,
                                 int64_t split_dim, int64_t concat_dim, int64_t rank,
                                 int64_t d0, int64_t d1, int64_t d2, int64_t d3,
                                 int64_t dtype) {
  const char *op = "srt_cpu_op_all_to_all";
  SRT_RETURN_IF_ERROR(ops_f32_only(e, op, dtype));
  const int64_t shape[4] = {d0, d1, d2, d3};
  return ops_all_to_all(e, op, in, out, axis, split_dim, concat_dim, rank, shape, SRT_F32);
}

srt_status ops_all_slice(srt_exec *e, const char *op, int64_t in, int64_t out, int64_t axis,
                         int64_t dim, int64_t rank, const int64_t shape[4], srt_dtype dtype) {
  srt_group *g = NULL; // set by begin() on success (GCC -O3 cannot tell)
  SRT_RETURN_IF_ERROR(begin(e, op, axis, &g));
  int64_t parts = srt_group_size(g), index = srt_group_rank(g);
  if (shape[dim] % parts != 0)
    return SRT_ERROR(SRT_INVALID_ARGUMENT,
                     "%s: dim %lld of size %lld does not split into %lld parts over %s",
                     op, (long long)dim, (long long)shape[dim], (long long)parts,
                     srt_group_name(g));
  size_t elem = srt_dtype_size(dtype);
  int64_t outer = 1, inner = 1;
  for (int64_t i = 0; i < dim; ++i)
    outer *= shape[i];
  for (int64_t i = dim + 1; i < rank; ++i)
    inner *= shape[i];
  int64_t chunk = shape[dim] / parts * inner;
  const unsigned char *src = at(e, in);
  unsigned char *dst = at(e, out);
  for (int64_t o = 0; o < outer; ++o)
    memmove(dst + (size_t)(o * chunk) * elem,
            src + (size_t)(o * shape[dim] * inner + index * chunk) * elem,
            (size_t)chunk * elem);
  return NULL;
}

srt_status srt_cpu_op_all_slice(srt_exec *e, int64_t in, int64_t out, int64_t axis, int64_t dim,
                                int64_t rank, int64_t d0, int64_t d1, int64_t d2, int64_t d3,
                                int64_t dtype) {
  const char *op = "srt_cpu_op_all_slice";
  SRT_RETURN_IF_ERROR(ops_f32_only(e, op, dtype));
  const int64_t shape[4] = {d0, d1, d2, d3};
  return ops_all_slice(e, op, in, out, axis, dim, rank, shape, SRT_F32);
}

//===----------------------------------------------------------------------===//
// Non-blocking forms: started into the context's slot, completed by
// srt_cpu_op_collective_wait
//===----------------------------------------------------------------------===//

srt_status srt_cpu_op_all_reduce_start(srt_exec *e, int64_t in, int64_t out, int64_t count,
                                       int64_t axis, int64_t is_max, int64_t dtype,
                                       int64_t slot) {
  return all_reduce(e, "srt_cpu_op_all_reduce_start", in, out, count, axis, is_max, dtype,
                    slot);
}

srt_status srt_cpu_op_all_gather_start(srt_exec *e, int64_t in, int64_t out, int64_t axis,
                                       int64_t dim, int64_t rank, int64_t d0, int64_t d1,
                                       int64_t d2, int64_t d3, int64_t dtype, int64_t slot) {
  const int64_t shape[4] = {d0, d1, d2, d3};
  return gather_scatter(e, "srt_cpu_op_all_gather_start", false, in, out, axis, dim, rank,
                        shape, dtype, slot);
}

srt_status srt_cpu_op_reduce_scatter_start(srt_exec *e, int64_t in, int64_t out, int64_t axis,
                                           int64_t dim, int64_t rank, int64_t d0, int64_t d1,
                                           int64_t d2, int64_t d3, int64_t dtype,
                                           int64_t slot) {
  const int64_t shape[4] = {d0, d1, d2, d3};
  return gather_scatter(e, "srt_cpu_op_reduce_scatter_start", true, in, out, axis, dim, rank,
                        shape, dtype, slot);
}

srt_status srt_cpu_op_collective_wait(srt_exec *e, int64_t slot) {
  return srt_collective_wait(e->ctx, (int)slot);
}

// A bucket's table as members over the arena (srt_check_bucket checked it).
static int bucket_members(srt_exec *e, const int64_t *table, srt_bucket_member *m) {
  int n = (int)table[0];
  for (int j = 0; j < n; ++j)
    m[j] = (srt_bucket_member){at(e, table[1 + 3 * j]), at(e, table[2 + 3 * j]),
                               table[3 + 3 * j]};
  return n;
}

srt_status ops_bucket_start(srt_exec *e, const char *op, const int64_t *members, int64_t kind,
                            int64_t axis, srt_dtype dtype, int64_t slot) {
  srt_group *g = NULL; // set by begin() on success (GCC -O3 cannot tell)
  SRT_RETURN_IF_ERROR(begin(e, op, axis, &g));
  srt_bucket_member m[SRT_MAX_BUCKET];
  int n = bucket_members(e, members, m);
  return srt_bucket_start(g, (srt_bucket_kind)kind, m, n, dtype, (int)slot);
}

srt_status srt_cpu_op_bucket_start(srt_exec *e, const int64_t *members, int64_t kind,
                                   int64_t axis, int64_t dtype, int64_t slot) {
  const char *op = "srt_cpu_op_bucket_start";
  SRT_RETURN_IF_ERROR(ops_f32_only(e, op, dtype));
  return ops_bucket_start(e, op, members, kind, axis, SRT_F32, slot);
}

srt_status srt_cpu_op_bucket_wait(srt_exec *e, const int64_t *members, int64_t slot) {
  srt_bucket_member m[SRT_MAX_BUCKET];
  int n = bucket_members(e, members, m);
  return srt_bucket_wait(e->ctx, m, n, (int)slot);
}
