// Collective ops of a cuda step (shardrt/cuda.h): NCCL on the
// communicator of the mesh axis, on the comm stream (ordered after the ops
// before and before the ops after by events). NCCL gathers and scatters
// contiguous rank-major chunks; along an inner dim the chunks are packed
// into or unpacked from scratch with 2-D copies (a tensor is viewed as
// [outer, dim, inner]).
#include "ops_internal.h"

/// A tensor viewed around one dim: [outer, dim, inner] elements of `elem`
/// bytes.
typedef struct view {
  int64_t outer, dim, inner;
  size_t elem;
} view;

/// One collective call: the device, the input viewed around the dim, the
/// NCCL type, the axis's communicator, its size and this rank's index.
typedef struct collective {
  srt_cuda_device *d;
  view v;
  ncclDataType_t type;
  ncclComm_t comm;
  int parts, index;
} collective;

static view view_of(const int64_t dims[4], int64_t rank, int64_t dim, size_t elem) {
  view v = {1, dims[dim], 1, elem};
  for (int64_t i = 0; i < dim; ++i)
    v.outer *= dims[i];
  for (int64_t i = dim + 1; i < rank; ++i)
    v.inner *= dims[i];
  return v;
}

// Fills *c (the view around `dim` of the rank-`rank` input d0..d3; the
// dispatcher checked the shape and the dtype) for a collective over `axis`.
static srt_status begin(srt_exec *e, const char *op, int64_t in, int64_t out, int64_t axis,
                        int64_t dtype, int64_t dim, int64_t rank, const int64_t dims[4],
                        collective *c) {
  SRT_RETURN_IF_ERROR(srt_cuda_device_of(e, op, &c->d));
  if (axis < 0 || axis >= SRT_MESH_NDIMS)
    return SRT_ERROR(SRT_INVALID_ARGUMENT, "%s: mesh axis %lld is not 0 (dp) or 1 (tp)", op,
                     (long long)axis);
  if (!c->d->has_comms[axis])
    return SRT_ERROR(SRT_UNAVAILABLE, "%s: the NCCL communicators were aborted after an "
                     "earlier failure", op);
  c->type = dtype == SRT_OP_F32 ? ncclFloat32 : ncclBfloat16;
  c->v = view_of(dims, rank, dim, dtype == SRT_OP_F32 ? 4 : 2);
  c->comm = c->d->comms[axis];
  c->d->last_collective[axis] = op;
  int64_t index, size;
  SRT_RETURN_IF_ERROR(srt_op_axis(e, op, axis, &index, &size));
  c->parts = (int)size;
  c->index = (int)index;
  return NULL;
}

// A non-blocking start's slot must be free (checked before anything is
// enqueued or its staging touched); slot < 0 is a blocking call.
static srt_status slot_free(srt_exec *e, const char *op, int64_t slot) {
  srt_cuda_device *d;
  SRT_RETURN_IF_ERROR(srt_cuda_device_of(e, op, &d));
  if (slot >= 0 && d->pending_live[slot])
    return SRT_ERROR(SRT_INVALID_ARGUMENT, "%s: slot %lld is still in flight", op,
                     (long long)slot);
  return NULL;
}

// The view's dim must split into the axis's parts.
static srt_status divisible(const char *op, const collective *c, int64_t dim) {
  if (c->v.dim % c->parts)
    return SRT_ERROR(SRT_INVALID_ARGUMENT, "%s: dim %lld of size %lld is not divisible by %d",
                     op, (long long)dim, (long long)c->v.dim, c->parts);
  return NULL;
}

// dst [outer, parts * dim, inner] from `parts` contiguous chunks
// [outer, dim, inner] (or the reverse with `to_chunks`).
static srt_status repack(void *dst, const void *src, view v, int parts, bool to_chunks,
                         cudaStream_t stream) {
  size_t row = (size_t)(v.dim * v.inner) * v.elem, chunk = row * (size_t)v.outer;
  for (int p = 0; p < parts; ++p) {
    uint8_t *full = (uint8_t *)(to_chunks ? src : dst) + (size_t)p * row;
    uint8_t *part = (uint8_t *)(to_chunks ? dst : src) + (size_t)p * chunk;
    if (to_chunks)
      SRT_CUDA_CHECK(cudaMemcpy2DAsync(part, row, full, row * (size_t)parts, row,
                                       (size_t)v.outer, cudaMemcpyDeviceToDevice, stream));
    else
      SRT_CUDA_CHECK(cudaMemcpy2DAsync(full, row * (size_t)parts, part, row, row,
                                       (size_t)v.outer, cudaMemcpyDeviceToDevice, stream));
  }
  return NULL;
}

// The end of a collective enqueued on the comm stream: with `slot` < 0 the
// compute stream waits for it now; else its completion is recorded in the
// slot's event, which srt_cuda_op_collective_wait makes the compute stream
// wait for.
static srt_status finish(srt_cuda_device *d, int64_t slot) {
  if (slot < 0)
    return srt_cuda_comm_end(d);
  if (!d->pending[slot])
    SRT_CUDA_CHECK(cudaEventCreateWithFlags(&d->pending[slot], cudaEventDisableTiming));
  SRT_CUDA_CHECK(cudaEventRecord(d->pending[slot], d->comm));
  d->pending_live[slot] = true;
  return NULL;
}

static srt_status all_reduce(srt_exec *e, const char *op, int64_t in, int64_t out,
                             int64_t count, int64_t axis, int64_t is_max, int64_t dtype,
                             int64_t slot) {
  collective c;
  const int64_t dims[4] = {count, 1, 1, 1};
  SRT_RETURN_IF_ERROR(slot_free(e, op, slot));
  SRT_RETURN_IF_ERROR(begin(e, op, in, out, axis, dtype, 0, 1, dims, &c));
  SRT_RETURN_IF_ERROR(srt_cuda_comm_begin(c.d));
  SRT_NCCL_CHECK(ncclAllReduce(srt_cuda_at(e, in), srt_cuda_at(e, out), (size_t)count, c.type,
                               is_max ? ncclMax : ncclSum, c.comm, c.d->comm));
  return finish(c.d, slot);
}

srt_status srt_cuda_op_all_reduce(srt_exec *e, int64_t in, int64_t out, int64_t count,
                                  int64_t axis, int64_t is_max, int64_t dtype) {
  return all_reduce(e, "srt_cuda_op_all_reduce", in, out, count, axis, is_max, dtype, -1);
}

srt_status srt_cuda_op_all_reduce_start(srt_exec *e, int64_t in, int64_t out, int64_t count,
                                        int64_t axis, int64_t is_max, int64_t dtype,
                                        int64_t slot) {
  return all_reduce(e, "srt_cuda_op_all_reduce_start", in, out, count, axis, is_max, dtype,
                    slot);
}

static srt_status all_gather(srt_exec *e, const char *op, int64_t in, int64_t out,
                             int64_t axis, int64_t dim, int64_t rank, const int64_t dims[4],
                             int64_t dtype, int64_t slot) {
  collective c;
  SRT_RETURN_IF_ERROR(slot_free(e, op, slot));
  SRT_RETURN_IF_ERROR(begin(e, op, in, out, axis, dtype, dim, rank, dims, &c));
  size_t local = (size_t)(c.v.outer * c.v.dim * c.v.inner);
  void *recv = srt_cuda_at(e, out);
  if (c.v.outer > 1) { // chunks land in scratch, then interleave along the dim
    SRT_RETURN_IF_ERROR(srt_cuda_scratch(c.d, local * (size_t)c.parts * c.v.elem, &recv));
    slot = -1; // the scratch is shared: done before the next op
  }
  SRT_RETURN_IF_ERROR(srt_cuda_comm_begin(c.d));
  SRT_NCCL_CHECK(ncclAllGather(srt_cuda_at(e, in), recv, local, c.type, c.comm, c.d->comm));
  if (c.v.outer > 1)
    SRT_RETURN_IF_ERROR(repack(srt_cuda_at(e, out), recv, c.v, c.parts, false, c.d->comm));
  return finish(c.d, slot);
}

srt_status srt_cuda_op_all_gather(srt_exec *e, int64_t in, int64_t out, int64_t axis,
                                  int64_t dim, int64_t rank, int64_t d0, int64_t d1,
                                  int64_t d2, int64_t d3, int64_t dtype) {
  const int64_t dims[4] = {d0, d1, d2, d3};
  return all_gather(e, "srt_cuda_op_all_gather", in, out, axis, dim, rank, dims, dtype, -1);
}

srt_status srt_cuda_op_all_gather_start(srt_exec *e, int64_t in, int64_t out, int64_t axis,
                                        int64_t dim, int64_t rank, int64_t d0, int64_t d1,
                                        int64_t d2, int64_t d3, int64_t dtype, int64_t slot) {
  const int64_t dims[4] = {d0, d1, d2, d3};
  return all_gather(e, "srt_cuda_op_all_gather_start", in, out, axis, dim, rank, dims, dtype,
                    slot);
}

static srt_status reduce_scatter(srt_exec *e, const char *op, int64_t in, int64_t out,
                                 int64_t axis, int64_t dim, int64_t rank,
                                 const int64_t dims[4], int64_t dtype, int64_t slot) {
  collective c;
  SRT_RETURN_IF_ERROR(slot_free(e, op, slot));
  SRT_RETURN_IF_ERROR(begin(e, op, in, out, axis, dtype, dim, rank, dims, &c));
  SRT_RETURN_IF_ERROR(divisible(op, &c, dim));
  c.v.dim /= c.parts; // the local chunk's size
  size_t local = (size_t)(c.v.outer * c.v.dim * c.v.inner);
  const void *send = srt_cuda_at(e, in);
  void *packed = NULL;
  if (c.v.outer > 1) { // each rank's chunk made contiguous first
    SRT_RETURN_IF_ERROR(srt_cuda_scratch(c.d, local * (size_t)c.parts * c.v.elem, &packed));
    slot = -1; // the scratch is shared: done before the next op
  }
  SRT_RETURN_IF_ERROR(srt_cuda_comm_begin(c.d));
  if (packed) {
    SRT_RETURN_IF_ERROR(repack(packed, send, c.v, c.parts, true, c.d->comm));
    send = packed;
  }
  SRT_NCCL_CHECK(ncclReduceScatter(send, srt_cuda_at(e, out), local, c.type, ncclSum, c.comm,
                                   c.d->comm));
  return finish(c.d, slot);
}

srt_status srt_cuda_op_reduce_scatter(srt_exec *e, int64_t in, int64_t out, int64_t axis,
                                      int64_t dim, int64_t rank, int64_t d0, int64_t d1,
                                      int64_t d2, int64_t d3, int64_t dtype) {
  const int64_t dims[4] = {d0, d1, d2, d3};
  return reduce_scatter(e, "srt_cuda_op_reduce_scatter", in, out, axis, dim, rank, dims, dtype,
                        -1);
}

srt_status srt_cuda_op_reduce_scatter_start(srt_exec *e, int64_t in, int64_t out, int64_t axis,
                                            int64_t dim, int64_t rank, int64_t d0, int64_t d1,
                                            int64_t d2, int64_t d3, int64_t dtype,
                                            int64_t slot) {
  const int64_t dims[4] = {d0, d1, d2, d3};
  return reduce_scatter(e, "srt_cuda_op_reduce_scatter_start", in, out, axis, dim, rank, dims,
                        dtype, slot);
}

// The compute stream waits for the collective in flight in `slot` (none:
// nothing to wait for).
srt_status srt_cuda_op_collective_wait(srt_exec *e, int64_t slot) {
  srt_cuda_device *d;
  SRT_RETURN_IF_ERROR(srt_cuda_device_of(e, "srt_cuda_op_collective_wait", &d));
  if (!d->pending_live[slot])
    return NULL;
  d->pending_live[slot] = false;
  SRT_CUDA_CHECK(cudaStreamWaitEvent(d->compute, d->pending[slot], 0));
  return NULL;
}

// This rank's slice along the dim: a strided copy, no communication.
srt_status srt_cuda_op_all_slice(srt_exec *e, int64_t in, int64_t out, int64_t axis,
                                 int64_t dim, int64_t rank, int64_t d0, int64_t d1,
                                 int64_t d2, int64_t d3, int64_t dtype) {
  const char *op = "srt_cuda_op_all_slice";
  collective c;
  const int64_t dims[4] = {d0, d1, d2, d3};
  SRT_RETURN_IF_ERROR(begin(e, op, in, out, axis, dtype, dim, rank, dims, &c));
  SRT_RETURN_IF_ERROR(divisible(op, &c, dim));
  size_t full_row = (size_t)(c.v.dim * c.v.inner) * c.v.elem, row = full_row / (size_t)c.parts;
  SRT_CUDA_CHECK(cudaMemcpy2DAsync(srt_cuda_at(e, out), row,
                                   (uint8_t *)srt_cuda_at(e, in) + (size_t)c.index * row,
                                   full_row, row, (size_t)c.v.outer, cudaMemcpyDeviceToDevice,
                                   c.d->compute));
  return NULL;
}

// Sends chunk p of `send` to rank p and receives rank p's into chunk p of
// `recv` (chunks of `count` elements of `bytes` each).
static srt_status exchange(const collective *c, const uint8_t *send, uint8_t *recv,
                           size_t count, size_t bytes) {
  for (int p = 0; p < c->parts; ++p) {
    SRT_NCCL_CHECK(ncclSend(send + (size_t)p * bytes, count, c->type, p, c->comm, c->d->comm));
    SRT_NCCL_CHECK(ncclRecv(recv + (size_t)p * bytes, count, c->type, p, c->comm, c->d->comm));
  }
  return NULL;
}

// Shard(split_dim) -> Shard(concat_dim): the input's split dim is cut into
// one chunk per rank (packed contiguously), chunk p goes to rank p, and the
// chunks received (in rank order) are concatenated along concat_dim.
srt_status srt_cuda_op_all_to_all(srt_exec *e, int64_t in, int64_t out, int64_t axis,
                                  int64_t split_dim, int64_t concat_dim, int64_t rank,
                                  int64_t d0, int64_t d1, int64_t d2, int64_t d3,
                                  int64_t dtype) {
  const char *op = "srt_cuda_op_all_to_all";
  collective c;
  int64_t dims[4] = {d0, d1, d2, d3};
  SRT_RETURN_IF_ERROR(begin(e, op, in, out, axis, dtype, split_dim, rank, dims, &c));
  if (concat_dim < 0 || concat_dim >= rank)
    return SRT_ERROR(SRT_INVALID_ARGUMENT, "%s: concat dim %lld of a rank-%lld tensor", op,
                     (long long)concat_dim, (long long)rank);
  if (concat_dim == split_dim) { // Shard(d) -> Shard(d): nothing moves
    size_t bytes = (size_t)(c.v.outer * c.v.dim * c.v.inner) * c.v.elem;
    SRT_CUDA_CHECK(cudaMemcpyAsync(srt_cuda_at(e, out), srt_cuda_at(e, in), bytes,
                                   cudaMemcpyDeviceToDevice, c.d->compute));
    return NULL;
  }
  SRT_RETURN_IF_ERROR(divisible(op, &c, split_dim));
  view split = c.v;
  split.dim /= c.parts;
  dims[split_dim] /= c.parts; // each chunk's shape, viewed along concat_dim
  view concat = view_of(dims, rank, concat_dim, c.v.elem);
  size_t chunk = (size_t)(split.outer * split.dim * split.inner);
  size_t bytes = chunk * (size_t)c.parts * split.elem;
  void *scratch;
  SRT_RETURN_IF_ERROR(srt_cuda_scratch(c.d, 2 * bytes, &scratch));
  uint8_t *send = scratch, *recv = send + bytes;
  SRT_RETURN_IF_ERROR(srt_cuda_comm_begin(c.d));
  SRT_RETURN_IF_ERROR(repack(send, srt_cuda_at(e, in), split, c.parts, true, c.d->comm));
  SRT_NCCL_GROUP(exchange(&c, send, recv, chunk, chunk * split.elem));
  SRT_RETURN_IF_ERROR(repack(srt_cuda_at(e, out), recv, concat, c.parts, false, c.d->comm));
  return srt_cuda_comm_end(c.d);
}

//===----------------------------------------------------------------------===//
// Buckets: a layer's small tensors in one collective (shardrt/collectives.h)
//===----------------------------------------------------------------------===//

// Copies every member's data between its buffer and the packed staging
// (to the staging with `pack`): `rounds` rank-major rounds of every member
// after the other (a reduce-scatter's send side and a gather's receive side
// are one round per rank).
static srt_status copy_bucket(srt_exec *e, const int64_t *members, uint8_t *stage, int rounds,
                              int64_t total, size_t elem, bool pack, cudaStream_t stream) {
  for (int r = 0; r < rounds; ++r)
    for (int64_t j = 0, at = 0; j < members[0]; at += members[3 + 3 * j], ++j) {
      size_t count = (size_t)members[3 + 3 * j];
      uint8_t *packed = stage + ((size_t)r * (size_t)total + (size_t)at) * elem;
      uint8_t *own = (uint8_t *)srt_cuda_at(e, members[(pack ? 1 : 2) + 3 * j]) +
                     (size_t)r * count * elem;
      SRT_CUDA_CHECK(cudaMemcpyAsync(pack ? packed : own, pack ? own : packed, count * elem,
                                     cudaMemcpyDeviceToDevice, stream));
    }
  return NULL;
}

srt_status srt_cuda_op_bucket_start(srt_exec *e, const int64_t *members, int64_t kind,
                                    int64_t axis, int64_t dtype, int64_t slot) {
  const char *op = "srt_cuda_op_bucket_start";
  int64_t total = 0;
  for (int64_t j = 0; j < members[0]; ++j)
    total += members[3 + 3 * j];
  collective c;
  const int64_t dims[4] = {total, 1, 1, 1};
  SRT_RETURN_IF_ERROR(slot_free(e, op, slot));
  SRT_RETURN_IF_ERROR(begin(e, op, 0, 0, axis, dtype, 0, 1, dims, &c));
  if (kind != SRT_BUCKET_ALL_GATHER && dtype != SRT_OP_F32)
    return SRT_ERROR(SRT_INVALID_ARGUMENT, "%s: a reducing bucket must be fp32", op);
  size_t elem = c.v.elem, parts = (size_t)c.parts;
  size_t send = kind == SRT_BUCKET_REDUCE_SCATTER ? parts : 1;
  size_t recv = kind == SRT_BUCKET_ALL_GATHER ? parts : 1;
  void *stage;
  SRT_RETURN_IF_ERROR(srt_cuda_stage(c.d, (int)slot, (send + recv) * (size_t)total * elem,
                                     &stage));
  uint8_t *in = stage, *out = in + send * (size_t)total * elem;
  SRT_RETURN_IF_ERROR(srt_cuda_comm_begin(c.d));
  SRT_RETURN_IF_ERROR(copy_bucket(e, members, in, (int)send, total, elem, true, c.d->comm));
  if (kind == SRT_BUCKET_ALL_GATHER)
    SRT_NCCL_CHECK(ncclAllGather(in, out, (size_t)total, c.type, c.comm, c.d->comm));
  else if (kind == SRT_BUCKET_REDUCE_SCATTER)
    SRT_NCCL_CHECK(
        ncclReduceScatter(in, out, (size_t)total, c.type, ncclSum, c.comm, c.d->comm));
  else
    SRT_NCCL_CHECK(ncclAllReduce(in, out, (size_t)total, c.type, ncclSum, c.comm, c.d->comm));
  c.d->bucket[slot].kind = (int)kind;
  c.d->bucket[slot].parts = c.parts;
  c.d->bucket[slot].total = total;
  c.d->bucket[slot].elem = elem;
  return finish(c.d, slot);
}

// The compute stream waits for the bucket, then unpacks it into the
// members' outputs.
srt_status srt_cuda_op_bucket_wait(srt_exec *e, const int64_t *members, int64_t slot) {
  srt_cuda_device *d;
  SRT_RETURN_IF_ERROR(srt_cuda_device_of(e, "srt_cuda_op_bucket_wait", &d));
  if (!d->pending_live[slot])
    return NULL;
  SRT_RETURN_IF_ERROR(srt_cuda_op_collective_wait(e, slot));
  int kind = d->bucket[slot].kind, parts = d->bucket[slot].parts;
  int64_t total = d->bucket[slot].total;
  size_t elem = d->bucket[slot].elem;
  size_t send = kind == SRT_BUCKET_REDUCE_SCATTER ? (size_t)parts : 1;
  uint8_t *out = (uint8_t *)d->bucket[slot].stage + send * (size_t)total * elem;
  return copy_bucket(e, members, out, kind == SRT_BUCKET_ALL_GATHER ? parts : 1, total, elem,
                     false, d->compute);
}
