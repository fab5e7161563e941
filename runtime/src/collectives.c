// Collectives over MPI: all-reduce, all-gather / reduce-scatter along any
// dim (pack/unpack through the context's scratch), all-to-all, broadcast.
// bf16 buffers move as two-byte elements and reduce through the context's
// bf16 ops (reduce_bf16.c: fp32 adds, each partial sum rounded to bf16).
// Each is started non-blocking and waited for against the context's
// deadline (srt_context_options.timeout_s): a peer that stalled or died
// ends the wait with an error naming the collective, the step and the ranks
// that never arrived, instead of a hang; while it waits a rank sleeps
// between polls rather than spinning a core. A group with a TCP transport
// (an env launch, collectives_tcp.h) calls collectives_tcp.c in place of
// each MPI call, after the same checks and packing.
#include "shardrt/collectives.h"

#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "collectives_tcp.h"
#include "context_internal.h"
#include "shardrt/tensor.h"

// The MPI datatype of `dtype`; for_reduce restricts it to types the
// reductions take (MPI's own, and bf16 through the context's ops).
static MPI_Datatype mpi_type(srt_dtype dtype, int for_reduce) {
  switch (dtype) {
  case SRT_F32: return MPI_FLOAT;
  case SRT_F64: return MPI_DOUBLE;
  case SRT_I32: return MPI_INT32_T;
  case SRT_I64: return MPI_INT64_T;
  case SRT_BF16: return MPI_UINT16_T;
  default: break;
  }
  if (for_reduce)
    return MPI_DATATYPE_NULL;
  switch (dtype) {
  case SRT_F16:
  case SRT_I16: return MPI_UINT16_T;
  case SRT_I8:
  case SRT_U8:
  case SRT_BOOL: return MPI_UINT8_T;
  default: return MPI_DATATYPE_NULL;
  }
}

static srt_status bad_arg(const srt_group *g, const char *what, const char *msg,
                          long long a, long long b) {
  return srt_group_annotate(g, SRT_ERROR(SRT_INVALID_ARGUMENT, "%s: %s (%lld, %lld)", what,
                                         msg, a, b));
}

static srt_status check_dtype(const srt_group *g, const char *what, srt_dtype dtype,
                              int for_reduce, MPI_Datatype *t) {
  *t = mpi_type(dtype, for_reduce);
  if (*t == MPI_DATATYPE_NULL)
    return srt_group_annotate(
        g, SRT_ERROR(SRT_INVALID_ARGUMENT, "%s: dtype %s is not supported%s", what,
                     srt_dtype_name(dtype),
                     for_reduce ? " for reductions (F32, F64, I32, I64, BF16 are)" : ""));
  return NULL;
}

static srt_status check_count(const srt_group *g, const char *what, int64_t count) {
  if (count < 0 || count > INT_MAX)
    return srt_group_annotate(g, SRT_ERROR(SRT_OUT_OF_RANGE,
                                           "%s: %lld elements per rank; MPI counts are int "
                                           "(at most %d)",
                                           what, (long long)count, INT_MAX));
  return NULL;
}

// The MPI op of `op` on `dtype` elements: MPI's own, or for bf16 the
// context's user op (MPI_UINT16_T bits).
static srt_status check_op(const srt_group *g, const char *what, srt_reduce_op op,
                           srt_dtype dtype, MPI_Op *mop) {
  bool bf16 = dtype == SRT_BF16;
  if (op == SRT_REDUCE_SUM)
    *mop = bf16 ? g->ctx->bf16_sum : MPI_SUM;
  else if (op == SRT_REDUCE_MAX)
    *mop = bf16 ? g->ctx->bf16_max : MPI_MAX;
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
// Deadlines
//===----------------------------------------------------------------------===//

enum { kArrivalTag = 0x5EED };

// The message of a collective that timed out on `g`: which of the group's
// ranks arrived, found by an exchange on the side communicator (every rank
// that timed out tells every other; those not heard from within a grace
// period never arrived).
static srt_status timed_out(srt_group *g, const char *what, double waited) {
  int n = g->size;
  int *arrived = calloc((size_t)n, sizeof *arrived);
  int *world = calloc((size_t)n, sizeof *world);
  MPI_Request *sends = calloc((size_t)n, sizeof *sends);
  if (!arrived || !world || !sends) {
    free(arrived);
    free(world);
    free(sends);
    return SRT_ERROR(SRT_DEADLINE_EXCEEDED, "%s on group '%s' did not complete in %.0f s", what,
                     g->name, waited);
  }
  // Group rank -> world rank, for the message.
  MPI_Group gg, wg;
  MPI_Comm_group(g->comm, &gg);
  MPI_Comm_group(g->ctx->groups[SRT_GROUP_WORLD].comm, &wg);
  int *ranks = world;
  for (int r = 0; r < n; ++r)
    ranks[r] = r;
  int *mapped = calloc((size_t)n, sizeof *mapped);
  if (mapped && MPI_Group_translate_ranks(gg, n, ranks, wg, mapped) == MPI_SUCCESS)
    memcpy(world, mapped, (size_t)n * sizeof *world);
  free(mapped);
  MPI_Group_free(&gg);
  MPI_Group_free(&wg);
  int me = g->rank;
  arrived[me] = 1;
  for (int r = 0; r < n; ++r)
    sends[r] = MPI_REQUEST_NULL;
  for (int r = 0; r < n; ++r)
    if (r != me)
      MPI_Isend(&me, 1, MPI_INT, r, kArrivalTag, g->side, &sends[r]);
  double until = MPI_Wtime() + 2.0; // the others time out within this too
  while (MPI_Wtime() < until) {
    int flag = 0;
    MPI_Status st;
    MPI_Iprobe(MPI_ANY_SOURCE, kArrivalTag, g->side, &flag, &st);
    if (flag) {
      int who;
      MPI_Recv(&who, 1, MPI_INT, st.MPI_SOURCE, kArrivalTag, g->side, MPI_STATUS_IGNORE);
      if (who >= 0 && who < n)
        arrived[who] = 1;
    } else {
      struct timespec nap = {0, 1000000};
      nanosleep(&nap, NULL);
    }
  }
  char missing[512] = "";
  size_t len = 0;
  for (int r = 0; r < n && len < sizeof missing - 16; ++r)
    if (!arrived[r])
      len += (size_t)snprintf(missing + len, sizeof missing - len, "%s%d", len ? ", " : "",
                              world[r]);
  srt_status s = SRT_ERROR(SRT_DEADLINE_EXCEEDED,
                           "%s on group '%s' did not complete in %.0f s at step %lld: world "
                           "rank(s) %s never arrived (stalled, dead, or waiting in another "
                           "collective)",
                           what, g->name, waited, (long long)g->ctx->step,
                           len ? missing : "(none known)");
  free(arrived);
  free(world);
  free(sends); // the sends stay pending: the caller ends the job
  return s;
}

// Waits for the non-blocking collective `req` of `g`: polls it, spinning
// for the first 20 ms (the collectives of a running step finish within
// that, and sleeping would add latency to each), then sleeping between
// polls with a backoff up to 1 ms (a rank waiting on a stalled peer does not
// burn a core), until it completes or the context's deadline passes. No
// deadline (timeout <= 0): MPI's own blocking wait.
static srt_status wait_for(srt_group *g, const char *what, MPI_Request *req) {
  double timeout = g->ctx->timeout_s, start = MPI_Wtime();
  if (timeout <= 0) {
    int rc = MPI_Wait(req, MPI_STATUS_IGNORE);
    return rc == MPI_SUCCESS ? NULL : srt_mpi_error(rc, what, g, __FILE__, __LINE__);
  }
  long nap_ns = 0;
  for (unsigned polls = 1;; ++polls) {
    int done = 0;
    int rc = MPI_Test(req, &done, MPI_STATUS_IGNORE);
    if (rc != MPI_SUCCESS)
      return srt_mpi_error(rc, what, g, __FILE__, __LINE__);
    if (done)
      return NULL;
    if (!nap_ns && polls % 256)
      continue; // spinning: look at the clock now and then
    double waited = MPI_Wtime() - start;
    if (timeout > 0 && waited > timeout)
      return timed_out(g, what, waited);
    if (waited < 0.02)
      continue;
    nap_ns = nap_ns ? (nap_ns * 2 < 1000000 ? nap_ns * 2 : 1000000) : 10000;
    struct timespec nap = {0, nap_ns};
    nanosleep(&nap, NULL);
  }
}

// A started collective's request: with `slot` < 0 waited for now against
// the deadline, else left in flight in the context's slot (the caller
// checked it is free).
static srt_status issued(srt_group *g, const char *what, MPI_Request *req, int slot) {
  if (slot < 0)
    return wait_for(g, what, req);
  srt_pending *p = &g->ctx->pending[slot]; // its staging buffer stays
  p->req = *req;
  p->group = g;
  p->what = what;
  p->rc = MPI_SUCCESS;
  return NULL;
}

// Starts `call` (a non-blocking MPI collective writing &req_) on `g` and
// waits for it (slot < 0) or leaves it in flight in `slot`.
#define SRT_MPI_ISSUE(g, what, slot, call)                                              \
  do {                                                                                   \
    MPI_Request req_ = MPI_REQUEST_NULL;                                                 \
    SRT_MPI(g, call);                                                                    \
    SRT_RETURN_IF_ERROR(issued(g, what, &req_, slot));                                   \
  } while (0)
#define SRT_MPI_WAIT(g, what, call) SRT_MPI_ISSUE(g, what, -1, call)

// A slot of the _start functions: in range and free.
static srt_status check_slot(const srt_group *g, const char *what, int slot) {
  if (slot < 0 || slot >= SRT_MAX_PENDING)
    return bad_arg(g, what, "slot outside [0, SRT_MAX_PENDING) (slot, max)", slot,
                   SRT_MAX_PENDING);
  if (g->ctx->pending[slot].group)
    return bad_arg(g, what, "slot still in flight (slot, max)", slot, SRT_MAX_PENDING);
  return NULL;
}

void srt_collectives_progress(srt_context *ctx) {
  // One MPI_Test runs MPI's progress engine for every request, so the first
  // request still running is enough. A completed request becomes
  // MPI_REQUEST_NULL, which the wait's own MPI_Test reports done at once.
  for (int i = 0; i < SRT_MAX_PENDING; ++i)
    if (ctx->pending[i].group && ctx->pending[i].req != MPI_REQUEST_NULL) {
      int done = 0;
      int rc = MPI_Test(&ctx->pending[i].req, &done, MPI_STATUS_IGNORE);
      if (rc != MPI_SUCCESS) {
        ctx->pending[i].rc = rc;
        ctx->pending[i].req = MPI_REQUEST_NULL; // nothing more to wait for
      }
      if (!done && rc == MPI_SUCCESS)
        return;
    }
}

srt_status srt_collective_wait(srt_context *ctx, int slot) {
  if (slot < 0 || slot >= SRT_MAX_PENDING)
    return srt_status_annotate(SRT_ERROR(SRT_INVALID_ARGUMENT,
                                         "collective wait: slot %d outside [0, %d)", slot,
                                         SRT_MAX_PENDING),
                               srt_context_rank(ctx), "world rank %d", srt_context_rank(ctx));
  srt_pending *p = &ctx->pending[slot];
  if (!p->group)
    return NULL;
  srt_group *g = p->group;
  p->group = NULL; // freed whatever the outcome: a failed step ends the job
  if (g->tcp)
    return NULL; // completed by its start
  if (p->rc != MPI_SUCCESS)
    return srt_mpi_error(p->rc, p->what, g, __FILE__, __LINE__);
  return wait_for(g, p->what, &p->req);
}

//===----------------------------------------------------------------------===//
// Buckets: several small tensors in one collective
//===----------------------------------------------------------------------===//

// The staging buffer of `p`, at least `bytes` (grown, contents lost).
static srt_status stage_of(const srt_group *g, srt_pending *p, size_t bytes) {
  bytes = bytes ? bytes : 1; // a bucket of empty members still gets a buffer
  if (bytes <= p->stage_bytes)
    return NULL;
  free(p->stage);
  p->stage = malloc(bytes);
  p->stage_bytes = p->stage ? bytes : 0;
  if (!p->stage)
    return srt_group_annotate(g, SRT_ERROR(SRT_RESOURCE_EXHAUSTED,
                                           "bucket: cannot allocate %zu staging bytes", bytes));
  return NULL;
}

// The send side of a bucket in `stage`: every member's data, member after
// member; a reduce-scatter's rank-major (chunk r of every member, then
// chunk r + 1), so that rank r's chunk is one block.
static void pack_bucket(srt_bucket_kind kind, const srt_bucket_member *m, int n, int parts,
                        int64_t total, size_t elem, unsigned char *stage) {
  int rounds = kind == SRT_BUCKET_REDUCE_SCATTER ? parts : 1;
  for (int r = 0; r < rounds; ++r)
    for (int j = 0, at = 0; j < n; at += (int)m[j].count, ++j)
      memcpy(stage + ((size_t)r * (size_t)total + (size_t)at) * elem,
             (const unsigned char *)m[j].in + (size_t)r * (size_t)m[j].count * elem,
             (size_t)m[j].count * elem);
}

srt_status srt_bucket_start(srt_group *g, srt_bucket_kind kind, const srt_bucket_member *m,
                            int n, srt_dtype dtype, int slot) {
  static const char what[] = "bucket";
  SRT_RETURN_IF_ERROR(check_slot(g, what, slot));
  if ((unsigned)kind > SRT_BUCKET_ALL_REDUCE || n < 1 || n > SRT_MAX_BUCKET)
    return bad_arg(g, what, "unknown kind or member count outside [1, 64] (kind, n)", kind, n);
  MPI_Datatype t;
  MPI_Op sum = MPI_OP_NULL;
  SRT_RETURN_IF_ERROR(check_dtype(g, what, dtype, kind != SRT_BUCKET_ALL_GATHER, &t));
  SRT_RETURN_IF_ERROR(check_op(g, what, SRT_REDUCE_SUM, dtype, &sum));
  int64_t total = 0;
  for (int j = 0; j < n; ++j) {
    if (m[j].count < 0)
      return bad_arg(g, what, "negative member count (member, count)", j, (long long)m[j].count);
    total += m[j].count;
  }
  SRT_RETURN_IF_ERROR(check_count(g, what, total));
  size_t elem = srt_dtype_size(dtype), parts = (size_t)g->size;
  size_t send = kind == SRT_BUCKET_ALL_GATHER ? 1 : kind == SRT_BUCKET_ALL_REDUCE ? 1 : parts;
  size_t recv = kind == SRT_BUCKET_ALL_GATHER ? parts : 1;
  srt_pending *p = &g->ctx->pending[slot];
  SRT_RETURN_IF_ERROR(stage_of(g, p, (send + recv) * (size_t)total * elem));
  pack_bucket(kind, m, n, g->size, total, elem, p->stage);
  p->bucket_kind = kind;
  p->elem = elem;
  p->total = total;
  unsigned char *out = p->stage + send * (size_t)total * elem;
  if (g->tcp)
    return srt_tcp_bucket(g, slot, kind, total, dtype);
  if (kind == SRT_BUCKET_ALL_GATHER)
    SRT_MPI_ISSUE(g, "bucket all-gather", slot,
                  MPI_Iallgather(p->stage, (int)total, t, out, (int)total, t, g->comm, &req_));
  else if (kind == SRT_BUCKET_REDUCE_SCATTER)
    SRT_MPI_ISSUE(g, "bucket reduce-scatter", slot,
                  MPI_Ireduce_scatter_block(p->stage, out, (int)total, t, sum, g->comm,
                                            &req_));
  else
    SRT_MPI_ISSUE(g, "bucket all-reduce", slot,
                  MPI_Iallreduce(p->stage, out, (int)total, t, sum, g->comm, &req_));
  return NULL;
}

srt_status srt_bucket_wait(srt_context *ctx, const srt_bucket_member *m, int n, int slot) {
  if (slot < 0 || slot >= SRT_MAX_PENDING || !ctx->pending[slot].group)
    return srt_collective_wait(ctx, slot); // the range error, or a free slot
  srt_pending *p = &ctx->pending[slot];
  int parts = p->group->size;
  SRT_RETURN_IF_ERROR(srt_collective_wait(ctx, slot));
  size_t elem = p->elem, total = (size_t)p->total;
  int gather = p->bucket_kind == SRT_BUCKET_ALL_GATHER;
  const unsigned char *in = p->stage + (p->bucket_kind == SRT_BUCKET_REDUCE_SCATTER
                                            ? (size_t)parts : 1) * total * elem;
  for (int r = 0; r < (gather ? parts : 1); ++r)
    for (int j = 0, at = 0; j < n; at += (int)m[j].count, ++j)
      memcpy((unsigned char *)m[j].out + (size_t)r * (size_t)m[j].count * elem,
             in + ((size_t)r * total + (size_t)at) * elem, (size_t)m[j].count * elem);
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

static srt_status all_reduce(srt_group *g, void *data, int64_t count, srt_dtype dtype,
                             srt_reduce_op op, int slot) {
  static const char what[] = "all_reduce";
  MPI_Datatype t;
  MPI_Op mop = MPI_OP_NULL;
  SRT_RETURN_IF_ERROR(check_dtype(g, what, dtype, 1, &t));
  SRT_RETURN_IF_ERROR(check_op(g, what, op, dtype, &mop));
  SRT_RETURN_IF_ERROR(check_count(g, what, count));
  if (count == 0 || g->size == 1)
    return NULL;
  if (g->tcp)
    return srt_tcp_all_reduce(g, "all-reduce", data, count, dtype, op);
  SRT_MPI_ISSUE(g, "all-reduce", slot,
                MPI_Iallreduce(MPI_IN_PLACE, data, (int)count, t, mop, g->comm, &req_));
  return NULL;
}

srt_status srt_all_reduce(srt_group *g, void *data, int64_t count, srt_dtype dtype,
                          srt_reduce_op op) {
  return all_reduce(g, data, count, dtype, op, -1);
}

srt_status srt_all_reduce_start(srt_group *g, void *data, int64_t count, srt_dtype dtype,
                                srt_reduce_op op, int slot) {
  SRT_RETURN_IF_ERROR(check_slot(g, "all_reduce", slot));
  return all_reduce(g, data, count, dtype, op, slot);
}

static srt_status all_gather(srt_group *g, const void *in, void *out, srt_dtype dtype,
                             int ndim, const int64_t *local_shape, int dim, int slot) {
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
    if (g->tcp)
      return srt_tcp_all_gather(g, "all-gather", in, out, bytes);
    SRT_MPI_ISSUE(g, "all-gather", slot,
                  MPI_Iallgather(in, (int)count, t, out, (int)count, t, g->comm, &req_));
    return NULL;
  }
  void *scratch;
  SRT_RETURN_IF_ERROR(srt_context_scratch(g->ctx, bytes * (size_t)g->size, &scratch));
  if (g->tcp)
    SRT_RETURN_IF_ERROR(srt_tcp_all_gather(g, "all-gather", in, scratch, bytes));
  else
    SRT_MPI_WAIT(g, "all-gather",
                 MPI_Iallgather(in, (int)count, t, scratch, (int)count, t, g->comm, &req_));
  unpack_chunks(scratch, l, g->size, out);
  return NULL;
}

srt_status srt_all_gather(srt_group *g, const void *in, void *out, srt_dtype dtype,
                          int ndim, const int64_t *local_shape, int dim) {
  return all_gather(g, in, out, dtype, ndim, local_shape, dim, -1);
}

srt_status srt_all_gather_start(srt_group *g, const void *in, void *out, srt_dtype dtype,
                                int ndim, const int64_t *local_shape, int dim, int slot) {
  SRT_RETURN_IF_ERROR(check_slot(g, "all_gather", slot));
  return all_gather(g, in, out, dtype, ndim, local_shape, dim, slot);
}

static srt_status reduce_scatter(srt_group *g, const void *in, void *out, srt_dtype dtype,
                                 int ndim, const int64_t *full_shape, int dim,
                                 srt_reduce_op op, int slot) {
  static const char what[] = "reduce_scatter";
  MPI_Datatype t;
  MPI_Op mop = MPI_OP_NULL;
  SRT_RETURN_IF_ERROR(check_dtype(g, what, dtype, 1, &t));
  SRT_RETURN_IF_ERROR(check_op(g, what, op, dtype, &mop));
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
    slot = -1; // the scratch is shared: done before it is reused
  }
  if (g->tcp)
    return srt_tcp_reduce_scatter(g, "reduce-scatter", send, out, count, dtype, op);
  SRT_MPI_ISSUE(g, "reduce-scatter", slot,
                MPI_Ireduce_scatter_block(send, out, (int)count, t, mop, g->comm, &req_));
  return NULL;
}

srt_status srt_reduce_scatter(srt_group *g, const void *in, void *out, srt_dtype dtype,
                              int ndim, const int64_t *full_shape, int dim,
                              srt_reduce_op op) {
  return reduce_scatter(g, in, out, dtype, ndim, full_shape, dim, op, -1);
}

srt_status srt_reduce_scatter_start(srt_group *g, const void *in, void *out,
                                    srt_dtype dtype, int ndim, const int64_t *full_shape,
                                    int dim, srt_reduce_op op, int slot) {
  SRT_RETURN_IF_ERROR(check_slot(g, "reduce_scatter", slot));
  return reduce_scatter(g, in, out, dtype, ndim, full_shape, dim, op, slot);
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
  if (g->tcp)
    SRT_RETURN_IF_ERROR(srt_tcp_all_to_all(g, "all-to-all", send, recv, (size_t)count * elem));
  else
    SRT_MPI_WAIT(g, "all-to-all",
                 MPI_Ialltoall(send, (int)count, t, recv, (int)count, t, g->comm, &req_));
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
  if (g->tcp)
    return srt_tcp_broadcast(g, "broadcast", data, (size_t)count * srt_dtype_size(dtype), root);
  SRT_MPI_WAIT(g, "broadcast", MPI_Ibcast(data, (int)count, t, root, g->comm, &req_));
  return NULL;
}

srt_status srt_allreduce_f32(void *group, float *data, int64_t count,
                             srt_reduce_op op) {
  return srt_all_reduce(group, data, count, SRT_F32, op);
}
