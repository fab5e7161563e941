// Collective ops of a cuda step (shardrt/cuda.h): NCCL on the
// communicator of the mesh axis, on the comm stream (ordered after the ops
// before and before the ops after by events). NCCL gathers and scatters
// contiguous rank-major chunks; along an inner dim the chunks are packed
// into or unpacked from scratch with 2-D copies (a tensor is viewed as
// [outer, dim, inner]).
#include "ops_internal.h"

typedef struct view {
  int64_t outer, dim, inner; // elements; `dim` is the local size of the dim
  size_t elem;               // bytes per element
} view;

static srt_status collective_args(srt_exec *e, const char *op, int64_t axis, int64_t dtype,
                                  int64_t dim, int64_t rank, const int64_t dims[4],
                                  srt_cuda_device *d, view *v, ncclDataType_t *type,
                                  int *parts, int *index) {
  if (axis < 0 || axis >= SRT_MESH_NDIMS || !d->has_comms[axis])
    return SRT_ERROR(SRT_INVALID_ARGUMENT, "%s: mesh axis %lld is not 0 (dp) or 1 (tp)", op,
                     (long long)axis);
  if (dtype != 0 && dtype != 1)
    return SRT_ERROR(SRT_INVALID_ARGUMENT, "%s: dtype %lld is not 0 (fp32) or 1 (bf16)", op,
                     (long long)dtype);
  if (rank < 1 || rank > 4 || dim < 0 || dim >= rank)
    return SRT_ERROR(SRT_INVALID_ARGUMENT, "%s: dim %lld of a rank-%lld tensor (rank 1..4)", op,
                     (long long)dim, (long long)rank);
  *type = dtype == 0 ? ncclFloat32 : ncclBfloat16;
  *v = (view){1, dims[dim], 1, dtype == 0 ? 4 : 2};
  for (int64_t i = 0; i < dim; ++i)
    v->outer *= dims[i];
  for (int64_t i = dim + 1; i < rank; ++i)
    v->inner *= dims[i];
  int64_t idx, size;
  SRT_RETURN_IF_ERROR(ops_axis(e, op, axis, &idx, &size));
  *parts = (int)size;
  *index = (int)idx;
  return NULL;
}

// dst [outer, parts * dim, inner] from `parts` contiguous chunks
// [outer, dim, inner] (or the reverse with `to_chunks`).
static srt_status repack(void *dst, const void *src, view v, int parts,
                         bool to_chunks, cudaStream_t stream) {
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

srt_status srt_cuda_op_all_reduce(srt_exec *e, int64_t in, int64_t out, int64_t count,
                                  int64_t axis, int64_t is_max, int64_t dtype) {
  const char *op = "srt_cuda_op_all_reduce";
  srt_cuda_device *d;
  SRT_RETURN_IF_ERROR(cu_begin(e, op, OPS_LIST(in, out), OPS_LIST(count), &d));
  view v;
  ncclDataType_t type;
  int parts, index;
  const int64_t dims[4] = {count, 1, 1, 1};
  SRT_RETURN_IF_ERROR(collective_args(e, op, axis, dtype, 0, 1, dims, d, &v, &type, &parts, &index));
  SRT_RETURN_IF_ERROR(srt_cuda_comm_begin(d));
  SRT_NCCL_CHECK(ncclAllReduce(srt_cuda_at(e, in), srt_cuda_at(e, out), (size_t)count, type,
                               is_max ? ncclMax : ncclSum, d->comms[axis], d->comm));
  return srt_cuda_comm_end(d);
}

srt_status srt_cuda_op_all_gather(srt_exec *e, int64_t in, int64_t out, int64_t axis,
                                  int64_t dim, int64_t rank, int64_t d0, int64_t d1,
                                  int64_t d2, int64_t d3, int64_t dtype) {
  const char *op = "srt_cuda_op_all_gather";
  srt_cuda_device *d;
  SRT_RETURN_IF_ERROR(cu_begin(e, op, OPS_LIST(in, out), OPS_LIST(d0, d1, d2, d3), &d));
  view v;
  ncclDataType_t type;
  int parts, index;
  const int64_t dims[4] = {d0, d1, d2, d3};
  SRT_RETURN_IF_ERROR(collective_args(e, op, axis, dtype, dim, rank, dims, d, &v, &type, &parts, &index));
  size_t local = (size_t)(v.outer * v.dim * v.inner);
  void *recv = srt_cuda_at(e, out);
  if (v.outer > 1) // chunks land in scratch, then interleave along the dim
    SRT_RETURN_IF_ERROR(srt_cuda_scratch(d, local * (size_t)parts * v.elem, &recv));
  SRT_RETURN_IF_ERROR(srt_cuda_comm_begin(d));
  SRT_NCCL_CHECK(ncclAllGather(srt_cuda_at(e, in), recv, local, type, d->comms[axis], d->comm));
  if (v.outer > 1)
    SRT_RETURN_IF_ERROR(repack(srt_cuda_at(e, out), recv, v, parts, false, d->comm));
  return srt_cuda_comm_end(d);
}

srt_status srt_cuda_op_reduce_scatter(srt_exec *e, int64_t in, int64_t out, int64_t axis,
                                      int64_t dim, int64_t rank, int64_t d0, int64_t d1,
                                      int64_t d2, int64_t d3, int64_t dtype) {
  const char *op = "srt_cuda_op_reduce_scatter";
  srt_cuda_device *d;
  SRT_RETURN_IF_ERROR(cu_begin(e, op, OPS_LIST(in, out), OPS_LIST(d0, d1, d2, d3), &d));
  view v;
  ncclDataType_t type;
  int parts, index;
  const int64_t dims[4] = {d0, d1, d2, d3};
  SRT_RETURN_IF_ERROR(collective_args(e, op, axis, dtype, dim, rank, dims, d, &v, &type, &parts, &index));
  if (v.dim % parts)
    return SRT_ERROR(SRT_INVALID_ARGUMENT, "%s: dim %lld of size %lld is not divisible by %d",
                     op, (long long)dim, (long long)v.dim, parts);
  v.dim /= parts; // the local chunk's size
  size_t local = (size_t)(v.outer * v.dim * v.inner);
  const void *send = srt_cuda_at(e, in);
  SRT_RETURN_IF_ERROR(srt_cuda_comm_begin(d));
  if (v.outer > 1) { // gather each rank's chunk into contiguous scratch first
    void *packed;
    SRT_RETURN_IF_ERROR(srt_cuda_scratch(d, local * (size_t)parts * v.elem, &packed));
    SRT_RETURN_IF_ERROR(repack(packed, send, v, parts, true, d->comm));
    send = packed;
  }
  SRT_NCCL_CHECK(ncclReduceScatter(send, srt_cuda_at(e, out), local, type, ncclSum,
                                   d->comms[axis], d->comm));
  return srt_cuda_comm_end(d);
}

// This rank's slice along the dim: a strided copy, no communication.
srt_status srt_cuda_op_all_slice(srt_exec *e, int64_t in, int64_t out, int64_t axis,
                                 int64_t dim, int64_t rank, int64_t d0, int64_t d1,
                                 int64_t d2, int64_t d3, int64_t dtype) {
  const char *op = "srt_cuda_op_all_slice";
  srt_cuda_device *d;
  SRT_RETURN_IF_ERROR(cu_begin(e, op, OPS_LIST(in, out), OPS_LIST(d0, d1, d2, d3), &d));
  view v;
  ncclDataType_t type;
  int parts, index;
  const int64_t dims[4] = {d0, d1, d2, d3};
  SRT_RETURN_IF_ERROR(collective_args(e, op, axis, dtype, dim, rank, dims, d, &v, &type, &parts, &index));
  if (v.dim % parts)
    return SRT_ERROR(SRT_INVALID_ARGUMENT, "%s: dim %lld of size %lld is not divisible by %d",
                     op, (long long)dim, (long long)v.dim, parts);
  size_t full_row = (size_t)(v.dim * v.inner) * v.elem, row = full_row / (size_t)parts;
  SRT_CUDA_CHECK(cudaMemcpy2DAsync(srt_cuda_at(e, out), row,
                                   (uint8_t *)srt_cuda_at(e, in) + (size_t)index * row, full_row,
                                   row, (size_t)v.outer, cudaMemcpyDeviceToDevice, d->compute));
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
  srt_cuda_device *d;
  SRT_RETURN_IF_ERROR(cu_begin(e, op, OPS_LIST(in, out), OPS_LIST(d0, d1, d2, d3), &d));
  view split, concat;
  ncclDataType_t type;
  int parts, index;
  int64_t dims[4] = {d0, d1, d2, d3};
  SRT_RETURN_IF_ERROR(
      collective_args(e, op, axis, dtype, split_dim, rank, dims, d, &split, &type, &parts, &index));
  if (split.dim % parts)
    return SRT_ERROR(SRT_INVALID_ARGUMENT, "%s: dim %lld of size %lld is not divisible by %d",
                     op, (long long)split_dim, (long long)split.dim, parts);
  split.dim /= parts;
  dims[split_dim] /= parts; // each chunk's shape, viewed along concat_dim
  SRT_RETURN_IF_ERROR(collective_args(e, op, axis, dtype, concat_dim, rank, dims, d, &concat,
                                      &type, &parts, &index));
  size_t chunk = (size_t)(split.outer * split.dim * split.inner);
  size_t bytes = chunk * (size_t)parts * split.elem;
  void *scratch;
  SRT_RETURN_IF_ERROR(srt_cuda_scratch(d, 2 * bytes, &scratch));
  uint8_t *send = scratch, *recv = send + bytes;
  SRT_RETURN_IF_ERROR(srt_cuda_comm_begin(d));
  SRT_RETURN_IF_ERROR(repack(send, srt_cuda_at(e, in), split, parts, true, d->comm));
  SRT_NCCL_CHECK(ncclGroupStart());
  for (int p = 0; p < parts; ++p) {
    SRT_NCCL_CHECK(ncclSend(send + (size_t)p * chunk * split.elem, chunk, type, p,
                            d->comms[axis], d->comm));
    SRT_NCCL_CHECK(ncclRecv(recv + (size_t)p * chunk * split.elem, chunk, type, p,
                            d->comms[axis], d->comm));
  }
  SRT_NCCL_CHECK(ncclGroupEnd());
  SRT_RETURN_IF_ERROR(repack(srt_cuda_at(e, out), recv, concat, parts, false, d->comm));
  return srt_cuda_comm_end(d);
}
