// The TCP mesh of an env launch (shardrt/launch_env.h): one connected
// socket between every two processes of the job, for the host plane's TCP
// transport (srt_context_options.tcp_mesh: the context's groups then run
// their collectives over it and never call MPI). Built after the TCP
// rendezvous (shardrt/rendezvous.h), which checks the world and hands out
// rank 0's listening port; the addresses are those rank 0 saw its peers
// connect from, so a rank is reached on the interface it used to reach
// rank 0.
#ifndef SHARDRT_TCP_MESH_H
#define SHARDRT_TCP_MESH_H

#include "shardrt/launch_env.h"
#include "shardrt/status.h"

typedef struct srt_tcp_mesh {
  int rank;        // this process's rank in the job, 0 <= rank < size
  int size;        // the world size
  int *fd;         // fd[r]: the socket to rank r (non-blocking); fd[rank] = -1
  double timeout_s; // the deadline the mesh was built with
  int local_size;  // ranks on this host (the same host name in the rendezvous), >= 1
} srt_tcp_mesh;

/// Builds the mesh as `env->rank` of `env->world_size` (an env launch's
/// fields): every rank listens on an ephemeral port, meets the others in
/// the rendezvous at MASTER_ADDR:MASTER_PORT (which checks the world size
/// and the ranks, see srt_rendezvous), then sends rank 0 its port, gets the
/// table of every rank's address and port, and connects to every lower
/// rank but 0 (rank 0's link is the one it sent its port on), accepting the
/// higher ones. One deadline, `timeout_s` (> 0), for all of it; every
/// socket wait is poll(). A world of one opens no socket. Free with
/// srt_tcp_mesh_free.
///
/// Errors: those of srt_rendezvous; SRT_DEADLINE_EXCEEDED naming the ranks
/// not connected in time; SRT_UNAVAILABLE naming the peer rank and the
/// socket error; SRT_RESOURCE_EXHAUSTED for memory.
srt_status srt_tcp_mesh_connect(const srt_launch_env *env, double timeout_s,
                                srt_tcp_mesh **out);

// Two exchanges through rank 0 (a star), for the host's small agreements
// before or beside the context's groups (the context's check of the mesh
// shape, the driver's options and metrics). Every rank calls them in the
// same order with the same sizes. Deadline `timeout_s` from the call (<= 0:
// none). Errors: SRT_UNAVAILABLE (the peer closed, the link failed) or
// SRT_DEADLINE_EXCEEDED naming this rank and the peer rank.

/// Every rank's `buf` (bytes) becomes rank 0's.
srt_status srt_tcp_mesh_bcast(const srt_tcp_mesh *m, void *buf, size_t bytes, double timeout_s);

/// `all` (size x bytes) gets every rank's `mine` (bytes) in rank order.
srt_status srt_tcp_mesh_allgather(const srt_tcp_mesh *m, const void *mine, void *all,
                                  size_t bytes, double timeout_s);

/// Closes every socket and frees the mesh; NULL is fine.
void srt_tcp_mesh_free(srt_tcp_mesh *m);

#endif // SHARDRT_TCP_MESH_H
