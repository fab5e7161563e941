// The collectives over TCP (collectives_tcp.h). Data moves in the shift
// schedule: in round s = 1..size-1 rank r sends to r + s and receives from
// r - s (mod size), both in one poll() loop, so no two ranks ever wait on
// each other's send and a round's messages all flow at once. Reductions
// are a reduce-scatter in that schedule (each rank sums its range of every
// rank's contribution in group-rank order) followed, for an all-reduce, by
// an all-gather of the reduced ranges.
#include "collectives_tcp.h"

#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

#include "shardrt/tensor.h"

// CLOCK_MONOTONIC seconds.
static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

// A collective's deadline: now + the context's timeout; 0: none.
static double deadline_of(const srt_group *g) {
  return g->ctx->timeout_s > 0 ? now_s() + g->ctx->timeout_s : 0;
}

static int ms_left(double deadline) {
  if (deadline == 0)
    return -1;
  double ms = (deadline - now_s()) * 1e3;
  return ms <= 0 ? 0 : ms > 1e9 ? 1000000000 : (int)ms + 1;
}

static srt_status lost(const srt_group *g, const char *what, int peer, int err) {
  int world = g->tcp->members[peer];
  if (err == ETIMEDOUT)
    return srt_group_annotate(
        g, SRT_ERROR(SRT_DEADLINE_EXCEEDED, "%s on group '%s' over TCP did not complete in "
                     "%.0f s at step %lld: world rank %d never answered (stalled, dead, or "
                     "waiting in another collective)", what, g->name, g->ctx->timeout_s,
                     (long long)g->ctx->step, world));
  return srt_group_annotate(
      g, SRT_ERROR(SRT_UNAVAILABLE, "%s on group '%s' over TCP lost world rank %d at step "
                   "%lld: %s (the process died or its link is down)", what, g->name, world,
                   (long long)g->ctx->step, err ? strerror(err) : "connection closed by the peer"));
}

static int fd_of(const srt_group *g, int peer) {
  return g->tcp->mesh->fd[g->tcp->members[peer]];
}

// One transfer direction of a round: a buffer and how far it got.
typedef struct leg {
  int peer, fd;
  unsigned char *buf;
  size_t n, done;
} leg;

// Moves what the socket takes (send) or holds (receive); 0, or the errno
// (0 from a receive of nothing: the peer closed, reported as -1).
static int step_leg(leg *l, int sending) {
  ssize_t k = sending ? send(l->fd, l->buf + l->done, l->n - l->done, MSG_NOSIGNAL)
                      : recv(l->fd, l->buf + l->done, l->n - l->done, 0);
  if (k < 0)
    return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR ? 0 : errno;
  if (k == 0 && !sending)
    return -1;
  l->done += (size_t)k;
  return 0;
}

// Sends `sn` bytes to group rank `to` while receiving `rn` bytes from
// `from` (either may be 0 bytes), until both are done or the deadline.
static srt_status exchange(srt_group *g, const char *what, int to, const void *sbuf, size_t sn,
                           int from, void *rbuf, size_t rn, double deadline) {
  leg s = {.peer = to, .fd = sn ? fd_of(g, to) : -1, .buf = (unsigned char *)sbuf, .n = sn};
  leg r = {.peer = from, .fd = rn ? fd_of(g, from) : -1, .buf = rbuf, .n = rn};
  while (s.done < s.n || r.done < r.n) {
    struct pollfd q[2] = {{.fd = s.done < s.n ? s.fd : -1, .events = POLLOUT},
                          {.fd = r.done < r.n ? r.fd : -1, .events = POLLIN}};
    int n = poll(q, 2, ms_left(deadline));
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0)
      return lost(g, what, r.done < r.n ? from : to, n == 0 ? ETIMEDOUT : errno);
    int err = q[0].revents ? step_leg(&s, 1) : 0;
    if (err)
      return lost(g, what, to, err);
    err = q[1].revents ? step_leg(&r, 0) : 0;
    if (err)
      return lost(g, what, from, err < 0 ? 0 : err);
  }
  return NULL;
}

// The first element of group rank r's range when `count` elements are
// split over n ranks (ranges differ by at most one element).
static int64_t range_lo(int64_t count, int n, int r) { return count * r / n; }

// acc[i] = acc[i] op x[i] for n elements; 0, or -1 for a dtype not handled.
#define SRT_TCP_COMBINE(T, U)                                                                  \
  do {                                                                                         \
    T *a_ = acc;                                                                               \
    const T *x_ = x;                                                                           \
    for (int64_t i = 0; i < n; ++i)                                                            \
      a_[i] = op == SRT_REDUCE_MAX ? (x_[i] > a_[i] ? x_[i] : a_[i]) : (T)((U)a_[i] + (U)x_[i]); \
  } while (0)
static int combine(void *acc, const void *x, int64_t n, srt_dtype dtype, srt_reduce_op op) {
  switch (dtype) {
  case SRT_F32: SRT_TCP_COMBINE(float, float); return 0;
  case SRT_F64: SRT_TCP_COMBINE(double, double); return 0;
  case SRT_I32: SRT_TCP_COMBINE(int32_t, uint32_t); return 0; // wraps as MPI's does
  case SRT_I64: SRT_TCP_COMBINE(int64_t, uint64_t); return 0;
  case SRT_BF16: // as the MPI path's bf16 ops: each partial sum rounded
    (op == SRT_REDUCE_MAX ? srt_bf16_max_into : srt_bf16_sum_into)(acc, x, n);
    return 0;
  default: return -1;
  }
}
#undef SRT_TCP_COMBINE

static srt_status tmp_of(srt_group *g, size_t bytes, unsigned char **out) {
  struct srt_tcp_group *t = g->tcp;
  if (bytes > t->tmp_bytes) {
    free(t->tmp);
    t->tmp = malloc(bytes);
    t->tmp_bytes = t->tmp ? bytes : 0;
    if (!t->tmp)
      return srt_group_annotate(g, SRT_ERROR(SRT_RESOURCE_EXHAUSTED,
                                             "TCP reduction: cannot allocate %zu bytes", bytes));
  }
  *out = t->tmp;
  return NULL;
}

// Every rank's range lo(r)..lo(r+1) of `in` (count elements) is reduced
// on rank r, in group-rank order, into `mine` (this rank's range).
static srt_status reduce_ranges(srt_group *g, const char *what, const void *in, void *mine,
                                int64_t count, srt_dtype dtype, srt_reduce_op op,
                                double deadline) {
  int n = g->size, me = g->rank;
  size_t elem = srt_dtype_size(dtype);
  int64_t lo = range_lo(count, n, me), len = range_lo(count, n, me + 1) - lo;
  unsigned char *parts = NULL;
  SRT_RETURN_IF_ERROR(tmp_of(g, (size_t)n * (size_t)len * elem + 1, &parts));
  const unsigned char *src = in;
  memcpy(parts + (size_t)me * (size_t)len * elem, src + (size_t)lo * elem, (size_t)len * elem);
  for (int s = 1; s < n; ++s) {
    int to = (me + s) % n, from = (me - s + n) % n;
    int64_t tlo = range_lo(count, n, to), tlen = range_lo(count, n, to + 1) - tlo;
    SRT_RETURN_IF_ERROR(exchange(g, what, to, src + (size_t)tlo * elem, (size_t)tlen * elem,
                                 from, parts + (size_t)from * (size_t)len * elem,
                                 (size_t)len * elem, deadline));
  }
  memcpy(mine, parts, (size_t)len * elem);
  for (int r = 1; r < n; ++r)
    if (combine(mine, parts + (size_t)r * (size_t)len * elem, len, dtype, op))
      return srt_group_annotate(g, SRT_ERROR(SRT_INVALID_ARGUMENT, "%s over TCP: dtype %s "
                                             "cannot be reduced", what, srt_dtype_name(dtype)));
  return NULL;
}

srt_status srt_tcp_all_reduce(srt_group *g, const char *what, void *data, int64_t count,
                              srt_dtype dtype, srt_reduce_op op) {
  int n = g->size, me = g->rank;
  size_t elem = srt_dtype_size(dtype);
  unsigned char *d = data;
  double deadline = deadline_of(g);
  SRT_RETURN_IF_ERROR(reduce_ranges(g, what, data, d + (size_t)range_lo(count, n, me) * elem,
                                    count, dtype, op, deadline));
  int64_t lo = range_lo(count, n, me), len = range_lo(count, n, me + 1) - lo;
  for (int s = 1; s < n; ++s) {
    int to = (me + s) % n, from = (me - s + n) % n;
    int64_t flo = range_lo(count, n, from), flen = range_lo(count, n, from + 1) - flo;
    SRT_RETURN_IF_ERROR(exchange(g, what, to, d + (size_t)lo * elem, (size_t)len * elem, from,
                                 d + (size_t)flo * elem, (size_t)flen * elem, deadline));
  }
  return NULL;
}

srt_status srt_tcp_reduce_scatter(srt_group *g, const char *what, const void *in, void *out,
                                  int64_t count, srt_dtype dtype, srt_reduce_op op) {
  return reduce_ranges(g, what, in, out, count * g->size, dtype, op, deadline_of(g));
}

// Block exchange of the shift schedule: block `to` of `in` (or all of
// `in` when in_step is 0) to each rank, block `from` of `out` from each.
static srt_status shift_blocks(srt_group *g, const char *what, const void *in, size_t in_step,
                               void *out, size_t bytes) {
  int n = g->size, me = g->rank;
  const unsigned char *src = in;
  unsigned char *dst = out;
  double deadline = deadline_of(g);
  memcpy(dst + (size_t)me * bytes, src + (size_t)me * in_step, bytes);
  for (int s = 1; s < n; ++s) {
    int to = (me + s) % n, from = (me - s + n) % n;
    SRT_RETURN_IF_ERROR(exchange(g, what, to, src + (size_t)to * in_step, bytes, from,
                                 dst + (size_t)from * bytes, bytes, deadline));
  }
  return NULL;
}

srt_status srt_tcp_all_gather(srt_group *g, const char *what, const void *in, void *out,
                              size_t bytes) {
  return shift_blocks(g, what, in, 0, out, bytes);
}

srt_status srt_tcp_all_to_all(srt_group *g, const char *what, const void *in, void *out,
                              size_t bytes) {
  return shift_blocks(g, what, in, bytes, out, bytes);
}

srt_status srt_tcp_broadcast(srt_group *g, const char *what, void *data, size_t bytes,
                             int root) {
  double deadline = deadline_of(g);
  if (g->rank != root)
    return exchange(g, what, root, NULL, 0, root, data, bytes, deadline);
  for (int r = 0; r < g->size; ++r)
    if (r != root)
      SRT_RETURN_IF_ERROR(exchange(g, what, r, data, bytes, r, NULL, 0, deadline));
  return NULL;
}

srt_status srt_tcp_bucket(srt_group *g, int slot, srt_bucket_kind kind, int64_t total,
                          srt_dtype dtype) {
  srt_pending *p = &g->ctx->pending[slot];
  size_t elem = srt_dtype_size(dtype), bytes = (size_t)total * elem;
  unsigned char *out = p->stage + (kind == SRT_BUCKET_REDUCE_SCATTER ? (size_t)g->size : 1) *
                                      bytes;
  if (kind == SRT_BUCKET_ALL_GATHER)
    SRT_RETURN_IF_ERROR(srt_tcp_all_gather(g, "bucket all-gather", p->stage, out, bytes));
  else if (kind == SRT_BUCKET_REDUCE_SCATTER)
    SRT_RETURN_IF_ERROR(srt_tcp_reduce_scatter(g, "bucket reduce-scatter", p->stage, out,
                                               total, dtype, SRT_REDUCE_SUM));
  else {
    memcpy(out, p->stage, bytes);
    SRT_RETURN_IF_ERROR(srt_tcp_all_reduce(g, "bucket all-reduce", out, total, dtype,
                                           SRT_REDUCE_SUM));
  }
  p->req = MPI_REQUEST_NULL; // done: the wait only unpacks
  p->group = g;
  p->what = "bucket";
  p->rc = MPI_SUCCESS;
  return NULL;
}
