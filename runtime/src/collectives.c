// Collectives over MPI: all-reduce, all-gather / reduce-scatter along any
// dim (pack/unpack through the context's scratch), all-to-all, broadcast.
#include "shardrt/collectives.h"

#include <limits.h>
#include <string.h>

#include "context_internal.h"
#include "shardrt/tensor.h"

// The MPI datatype of `dtype`; for_reduce restricts it to types MPI can sum.
static MPI_Datatype mpi_type(srt_dtype dtype, int for_reduce) {
  switch (dtype) {
  case SRT_F32: return MPI_FLOAT;
  case SRT_F64: return MPI_DOUBLE;
  case SRT_I32: return MPI_INT32_T;
  case SRT_I64: return MPI_INT64_T;
  default: break;
  }
  if (for_reduce)
    return MPI_DATATYPE_NULL;
  switch (dtype) {
  case SRT_F16:
  case SRT_BF16:
  case SRT_I16: return MPI_UINT16_T;
  case SRT_I8:
  case SRT_U8:
  case SRT_BOOL: return MPI_UINT8_T;
  default: return MPI_DATATYPE_NULL;
  }
}

static srt_status bad_arg(const srt_group *g, const char *what, const char *msg,
                          long long a, long long b) {
  return SRT_ERROR(SRT_INVALID_ARGUMENT,
                   "%s on group '%s' (rank %d of %d, world rank %d): %s (%lld, %lld)",
                   what, g->name, g->rank, g->size, g->world_rank, msg, a, b);
}

static srt_status check_dtype(const srt_group *g, const char *what, srt_dtype dtype,
                              int for_reduce, MPI_Datatype *t) {
  *t = mpi_type(dtype, for_reduce);
  if (*t == MPI_DATATYPE_NULL)
    return SRT_ERROR(SRT_INVALID_ARGUMENT,
                     "%s on group '%s' (world rank %d): dtype %s is not supported%s",
                     what, g->name, g->world_rank, srt_dtype_name(dtype),
                     for_reduce ? " for reductions (F32, F64, I32, I64 are)" : "");
  return NULL;
}

static srt_status check_count(const srt_group *g, const char *what, int64_t count) {
  if (count < 0 || count > INT_MAX)
    return SRT_ERROR(SRT_OUT_OF_RANGE,
                     "%s on group '%s' (world rank %d): %lld elements per rank; "
                     "MPI counts are int (at most %d)",
                     what, g->name, g->world_rank, (long long)count, INT_MAX);
  return NULL;
}

static srt_status check_op(const srt_group *g, const char *what, srt_reduce_op op,
                           MPI_Op *mop) {
  if (op == SRT_REDUCE_SUM)
    *mop = MPI_SUM;
  else if (op == SRT_REDUCE_MAX)
    *mop = MPI_MAX;
  else
    return bad_arg(g, what, "unknown reduce op (op, 0)", (long long)op, 0);
  return NULL;
}

static srt_status check_shape(const srt_group *g, const char *what, int ndim,
                              const int64_t *shape, int dim) {
  if (ndim < 1 || ndim > SRT_MAX_RANK)
    return bad_arg(g, what, "rank outside [1, SRT_MAX_RANK] (ndim, max)", ndim,
                   SRT_MAX_RANK);
  if (dim < 0 || dim >= ndim)
    return bad_arg(g, what, "dim outside [0, ndim) (dim, ndim)", dim, ndim);
  for (int d = 0; d < ndim; ++d)
    if (shape[d] < 0)
      return bad_arg(g, what, "negative size (dim, size)", d, (long long)shape[d]);
  return NULL;
}

//===----------------------------------------------------------------------===//
// Packing: a row-major tensor viewed as [outer, size(dim), inner]
//===----------------------------------------------------------------------===//

typedef struct layout {
  int64_t outer;      // product of the dims before `dim`
  int64_t extent;     // size of `dim`
  size_t inner_bytes; // bytes of one index step along `dim`
} layout;

static layout layout_of(int ndim, const int64_t *shape, int dim, size_t elem) {
  layout l = {1, shape[dim], elem};
  for (int d = 0; d < dim; ++d)
    l.outer *= shape[d];
  for (int d = dim + 1; d < ndim; ++d)
    l.inner_bytes *= (size_t)shape[d];
  return l;
}

// Splits `in` (layout l) into n chunks along the dim and writes them one
// after the other to `out`: chunk k (every outer row's k-th piece) first.
static void pack_chunks(const unsigned char *in, layout l, int n, unsigned char *out) {
  size_t piece = (size_t)(l.extent / n) * l.inner_bytes;
  size_t row = (size_t)l.extent * l.inner_bytes;
  for (int k = 0; k < n; ++k)
    for (int64_t o = 0; o < l.outer; ++o, out += piece)
      memcpy(out, in + (size_t)o * row + (size_t)k * piece, piece);
}

// Inverse of pack_chunks: n consecutive blocks of layout `b` become one
// tensor whose dim is n * b.extent.
static void unpack_chunks(const unsigned char *in, layout b, int n, unsigned char *out) {
  size_t piece = (size_t)b.extent * b.inner_bytes;
  for (int k = 0; k < n; ++k)
    for (int64_t o = 0; o < b.outer; ++o, in += piece)
      memcpy(out + ((size_t)o * n + (size_t)k) * piece, in, piece);
}

//===----------------------------------------------------------------------===//
// Collectives
//===----------------------------------------------------------------------===//

srt_status srt_all_reduce(srt_group *g, void *data, int64_t count, srt_dtype dtype,
                          srt_reduce_op op) {
  static const char what[] = "all_reduce";
  MPI_Datatype t;
  MPI_Op mop = MPI_OP_NULL;
  SRT_RETURN_IF_ERROR(check_dtype(g, what, dtype, 1, &t));
  SRT_RETURN_IF_ERROR(check_op(g, what, op, &mop));
  SRT_RETURN_IF_ERROR(check_count(g, what, count));
  if (count == 0 || g->size == 1)
    return NULL;
  SRT_MPI(g, MPI_Allreduce(MPI_IN_PLACE, data, (int)count, t, mop, g->comm));
  return NULL;
}

srt_status srt_all_gather(srt_group *g, const void *in, void *out, srt_dtype dtype,
                          int ndim, const int64_t *local_shape, int dim) {
  static const char what[] = "all_gather";
  MPI_Datatype t;
  SRT_RETURN_IF_ERROR(check_dtype(g, what, dtype, 0, &t));
  SRT_RETURN_IF_ERROR(check_shape(g, what, ndim, local_shape, dim));
  int64_t count = srt_shape_numel(ndim, local_shape);
  SRT_RETURN_IF_ERROR(check_count(g, what, count));
  size_t elem = srt_dtype_size(dtype), bytes = (size_t)count * elem;
  if (count == 0)
    return NULL;
  if (g->size == 1) {
    memcpy(out, in, bytes);
    return NULL;
  }
  layout l = layout_of(ndim, local_shape, dim, elem);
  if (l.outer == 1) { // chunks are already contiguous in the output
    SRT_MPI(g, MPI_Allgather(in, (int)count, t, out, (int)count, t, g->comm));
    return NULL;
  }
  void *scratch;
  SRT_RETURN_IF_ERROR(srt_context_scratch(g->ctx, bytes * (size_t)g->size, &scratch));
  SRT_MPI(g, MPI_Allgather(in, (int)count, t, scratch, (int)count, t, g->comm));
  unpack_chunks(scratch, l, g->size, out);
  return NULL;
}

srt_status srt_reduce_scatter(srt_group *g, const void *in, void *out,
                              srt_dtype dtype, int ndim, const int64_t *full_shape,
                              int dim, srt_reduce_op op) {
  static const char what[] = "reduce_scatter";
  MPI_Datatype t;
  MPI_Op mop = MPI_OP_NULL;
  SRT_RETURN_IF_ERROR(check_dtype(g, what, dtype, 1, &t));
  SRT_RETURN_IF_ERROR(check_op(g, what, op, &mop));
  SRT_RETURN_IF_ERROR(check_shape(g, what, ndim, full_shape, dim));
  if (full_shape[dim] % g->size != 0)
    return bad_arg(g, what, "dim size not divisible by the group size (size, group)",
                   (long long)full_shape[dim], g->size);
  int64_t total = srt_shape_numel(ndim, full_shape), count = total / g->size;
  SRT_RETURN_IF_ERROR(check_count(g, what, count));
  size_t elem = srt_dtype_size(dtype);
  if (count == 0)
    return NULL;
  if (g->size == 1) {
    memcpy(out, in, (size_t)count * elem);
    return NULL;
  }
  layout l = layout_of(ndim, full_shape, dim, elem);
  const void *send = in;
  if (l.outer != 1) { // gather each rank's chunk into one contiguous block
    void *scratch;
    SRT_RETURN_IF_ERROR(srt_context_scratch(g->ctx, (size_t)total * elem, &scratch));
    pack_chunks(in, l, g->size, scratch);
    send = scratch;
  }
  SRT_MPI(g, MPI_Reduce_scatter_block(send, out, (int)count, t, mop, g->comm));
  return NULL;
}

srt_status srt_all_to_all(srt_group *g, const void *in, void *out, srt_dtype dtype,
                          int ndim, const int64_t *in_shape, int from_dim,
                          int to_dim) {
  static const char what[] = "all_to_all";
  MPI_Datatype t;
  SRT_RETURN_IF_ERROR(check_dtype(g, what, dtype, 0, &t));
  SRT_RETURN_IF_ERROR(check_shape(g, what, ndim, in_shape, from_dim));
  SRT_RETURN_IF_ERROR(check_shape(g, what, ndim, in_shape, to_dim));
  int64_t total = srt_shape_numel(ndim, in_shape), count = total / g->size;
  SRT_RETURN_IF_ERROR(check_count(g, what, total));
  size_t elem = srt_dtype_size(dtype), bytes = (size_t)total * elem;
  int same = g->size == 1 || from_dim == to_dim; // the shard stays as it is
  if (!same && in_shape[to_dim] % g->size != 0)
    return bad_arg(g, what,
                   "to_dim size not divisible by the group size (size, group)",
                   (long long)in_shape[to_dim], g->size);
  if (total == 0)
    return NULL;
  if (same) {
    memcpy(out, in, bytes);
    return NULL;
  }
  // Send: this rank's input split along to_dim, chunk k to rank k.
  // Receive: from rank k its piece of from_dim (shape in_shape with to_dim
  // divided); concatenating them along from_dim in rank order is the output.
  layout send_l = layout_of(ndim, in_shape, to_dim, elem);
  int64_t block_shape[SRT_MAX_RANK];
  memcpy(block_shape, in_shape, (size_t)ndim * sizeof *in_shape);
  block_shape[to_dim] /= g->size;
  layout recv_l = layout_of(ndim, block_shape, from_dim, elem);
  size_t need = (send_l.outer != 1 ? bytes : 0) + (recv_l.outer != 1 ? bytes : 0);
  unsigned char *scratch = NULL;
  if (need)
    SRT_RETURN_IF_ERROR(srt_context_scratch(g->ctx, need, (void **)&scratch));
  const void *send = in;
  if (send_l.outer != 1) {
    pack_chunks(in, send_l, g->size, scratch);
    send = scratch;
    scratch += bytes;
  }
  void *recv = recv_l.outer != 1 ? (void *)scratch : out;
  SRT_MPI(g, MPI_Alltoall(send, (int)count, t, recv, (int)count, t, g->comm));
  if (recv != out)
    unpack_chunks(recv, recv_l, g->size, out);
  return NULL;
}

srt_status srt_broadcast(srt_group *g, void *data, int64_t count, srt_dtype dtype,
                         int root) {
  static const char what[] = "broadcast";
  MPI_Datatype t;
  SRT_RETURN_IF_ERROR(check_dtype(g, what, dtype, 0, &t));
  SRT_RETURN_IF_ERROR(check_count(g, what, count));
  if (root < 0 || root >= g->size)
    return bad_arg(g, what, "root outside the group (root, size)", root, g->size);
  if (count == 0 || g->size == 1)
    return NULL;
  SRT_MPI(g, MPI_Bcast(data, (int)count, t, root, g->comm));
  return NULL;
}

srt_status srt_allreduce_f32(void *group, float *data, int64_t count,
                             srt_reduce_op op) {
  return srt_all_reduce(group, data, count, SRT_F32, op);
}
