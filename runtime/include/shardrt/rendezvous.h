// The TCP rendezvous of an env launch (shardrt/launch_env.h): the
// processes of a job find each other without MPI, the way torchrun's TCP
// store or llm.c's tcp init method hand out NCCL's unique id. Rank 0
// listens on MASTER_PORT; every other rank connects to MASTER_ADDR:
// MASTER_PORT (retrying until the deadline: rank 0 may start later) and
// sends a hello (magic, protocol version, rank, world size, local rank,
// host name). Rank 0 checks them all (the same world size, each rank in
// range and there once) and then sends every rank the same payload (an
// opaque byte blob: for the cuda backend an ncclUniqueId, so the
// rendezvous itself needs no NCCL) and the table of every rank's host.
// A refused hello is answered with the reason, printed by both sides, and
// rank 0 then ends the rendezvous for every rank connected so far.
//
// Single-threaded, poll() with one deadline for the whole call: it never
// waits longer than `timeout_s` (plus the time of a name lookup), and
// closes every socket it opened on every path. The sockets are closed
// when it returns: the payload is all the ranks share.
#ifndef SHARDRT_RENDEZVOUS_H
#define SHARDRT_RENDEZVOUS_H

#include <stddef.h>

#include "shardrt/launch_env.h"
#include "shardrt/status.h"

/// The wire protocol's version: a hello of another version is refused.
#define SRT_RENDEZVOUS_VERSION 1
/// The largest payload rank 0 may hand out (bytes).
#define SRT_RENDEZVOUS_MAX_PAYLOAD 65536
/// The host names in the table, with their NUL (longer ones are cut).
#define SRT_RENDEZVOUS_HOST_LEN 64

typedef struct srt_rendezvous_options {
  srt_launch_env env;      // rank, world size, local rank, MASTER_ADDR, MASTER_PORT
  double timeout_s;        // > 0: the whole rendezvous's deadline (seconds)
  const void *payload;     // rank 0 only: what every rank receives
  size_t payload_bytes;    // rank 0 only: <= SRT_RENDEZVOUS_MAX_PAYLOAD
  const char *host_name;   // this process's name in the table; NULL: gethostname()
} srt_rendezvous_options;

typedef struct srt_rendezvous_result {
  unsigned char *payload;  // rank 0's payload (malloc'd; also on rank 0)
  size_t payload_bytes;
  int world_size;
  char (*hosts)[SRT_RENDEZVOUS_HOST_LEN]; // hosts[r]: rank r's host name (malloc'd)
  int connect_attempts;    // ranks > 0: connections tried until rank 0 answered (>= 1)
} srt_rendezvous_result;

/// Runs the rendezvous as `o->env.rank` of `o->env.world_size` and fills
/// `out` (free with srt_rendezvous_result_free). A world of one returns
/// rank 0's payload and host without any socket.
///
/// Errors (the messages of the network ones name the rank and
/// MASTER_ADDR:MASTER_PORT):
///   SRT_UNAVAILABLE: rank 0 cannot listen on the port (in use: the errno
///     text), or the name MASTER_ADDR does not resolve; rank 0 refused a
///     hello (a wrong world size "rank 3 says WORLD_SIZE=4, rank 0 has 2",
///     a rank out of range or there twice, another protocol version), on
///     the refused rank with rank 0's reason and on rank 0 and the others
///     connected so far with the same text; rank 0 closed the connection
///     before answering.
///   SRT_DEADLINE_EXCEEDED: on rank 0, not every rank arrived in time (the
///     message lists the ranks missing); on another rank, rank 0 could not
///     be reached, or did not answer, in time.
///   SRT_INVALID_ARGUMENT: timeout_s <= 0, a payload over the maximum, or
///     a rank or world size out of range.
srt_status srt_rendezvous(const srt_rendezvous_options *o, srt_rendezvous_result *out);

/// Frees what srt_rendezvous allocated in `r` (zeroes it); NULL is fine.
void srt_rendezvous_result_free(srt_rendezvous_result *r);

#endif // SHARDRT_RENDEZVOUS_H
