// The TCP transport of a group (an env launch's host plane, see
// shardrt/tcp_mesh.h): the collectives of collectives.c on contiguous
// buffers over the mesh's sockets between the group's members. collectives.c
// checks the arguments and packs along dims exactly as for MPI, then calls
// these in place of its MPI calls when the group has a TCP transport.
//
// Every reduction sums (or takes the max) in group-rank order, one rank
// reducing each element and sending it to the others, so every rank holds
// bit-identical results and a rerun gives the same bits. Each call
// completes before it returns (the non-blocking forms too); every socket
// wait is poll() against the context's deadline (timeout_s <= 0: none).
// Errors name the collective, the group and the peer's world rank:
// SRT_UNAVAILABLE when the peer closed its socket or the link failed (a
// dead process's sockets are closed by its kernel, so this comes at once),
// SRT_DEADLINE_EXCEEDED when it did not answer in time.
#ifndef SHARDRT_COLLECTIVES_TCP_H
#define SHARDRT_COLLECTIVES_TCP_H

#include <stddef.h>
#include <stdint.h>

#include "context_internal.h"

/// In place: data (count elements of dtype) = op over the group, reduced
/// in group-rank order. Dtypes F32, F64, I32, I64; ops SUM and MAX.
srt_status srt_tcp_all_reduce(srt_group *g, const char *what, void *data, int64_t count,
                              srt_dtype dtype, srt_reduce_op op);

/// `in` holds size blocks of `count` elements (block r for group rank r);
/// `out` (count elements) gets this rank's block reduced over the group
/// in group-rank order.
srt_status srt_tcp_reduce_scatter(srt_group *g, const char *what, const void *in, void *out,
                                  int64_t count, srt_dtype dtype, srt_reduce_op op);

/// `out` (size x bytes) gets every rank's `in` (bytes) in group-rank order.
srt_status srt_tcp_all_gather(srt_group *g, const char *what, const void *in, void *out,
                              size_t bytes);

/// Block r of `in` (bytes each) goes to group rank r; block r of `out`
/// comes from group rank r.
srt_status srt_tcp_all_to_all(srt_group *g, const char *what, const void *in, void *out,
                              size_t bytes);

/// Every rank's `data` (bytes) becomes group rank `root`'s.
srt_status srt_tcp_broadcast(srt_group *g, const char *what, void *data, size_t bytes,
                             int root);

/// A bucket (srt_bucket_start) over TCP: runs `kind` on the slot's staging
/// buffer (packed by the caller: send side first, `total` elements per
/// rank) into its receive side now, and leaves the slot taken so that
/// srt_bucket_wait unpacks it.
srt_status srt_tcp_bucket(srt_group *g, int slot, srt_bucket_kind kind, int64_t total,
                          srt_dtype dtype);

#endif // SHARDRT_COLLECTIVES_TCP_H
