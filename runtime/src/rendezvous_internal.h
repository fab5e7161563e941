// The rendezvous's wire format and its deadline-bounded socket I/O, shared
// by rank 0's side (rendezvous.c) and the other ranks' (rendezvous_peer.c).
//
// All integers are unsigned 32-bit little-endian.
//   hello (rank > 0 -> rank 0): magic, version, rank, world size, local
//     rank, host name (SRT_RENDEZVOUS_HOST_LEN bytes, NUL-padded).
//   reply (rank 0 -> rank > 0): magic, version, kind (RDV_OK or
//     RDV_REFUSED), length, world size; then for RDV_OK `length` payload
//     bytes and world size host names; for RDV_REFUSED `length` bytes of
//     the reason (no NUL).
#ifndef SHARDRT_RENDEZVOUS_INTERNAL_H
#define SHARDRT_RENDEZVOUS_INTERNAL_H

#include <stddef.h>
#include <stdint.h>
#include <netinet/in.h>

#include "shardrt/rendezvous.h"

#define RDV_MAGIC 0x56524853u // "SHRV"
#define RDV_HELLO_BYTES (5 * 4 + SRT_RENDEZVOUS_HOST_LEN)
#define RDV_REPLY_HEADER_BYTES (5 * 4)
#define RDV_MAX_REASON 1024 // a refusal's text, bytes
enum { RDV_OK = 0, RDV_REFUSED = 1 };
/// rdv_send_all / rdv_recv_all: the peer closed the connection.
#define RDV_EOF (-1)

/// CLOCK_MONOTONIC now, in seconds.
double rdv_now(void);

/// Milliseconds left until `deadline` (rdv_now's clock), >= 0, for poll.
int rdv_ms_left(double deadline);

void rdv_put_u32(unsigned char *p, uint32_t v);
uint32_t rdv_get_u32(const unsigned char *p);

/// Sends or receives exactly `n` bytes on the non-blocking socket `fd`,
/// waiting in poll() no later than `deadline`. Returns 0, ETIMEDOUT at the
/// deadline, RDV_EOF when the peer closed (receive), or the errno of the
/// failed call (ECONNRESET, EPIPE, ...). Never raises SIGPIPE.
int rdv_send_all(int fd, const void *buf, size_t n, double deadline);
int rdv_recv_all(int fd, void *buf, size_t n, double deadline);

/// Sends a RDV_REFUSED reply carrying `reason` (best effort: a peer that
/// is gone already is not an error, so nothing is returned).
void rdv_send_refusal(int fd, int world_size, const char *reason, double deadline);

/// Makes `fd` non-blocking and close-on-exec; 0 or the errno.
int rdv_set_flags(int fd);

/// This process's host name (`name`, when not NULL, else gethostname()),
/// cut to fit, into `out` (SRT_RENDEZVOUS_HOST_LEN bytes, NUL-padded).
void rdv_host_name(const char *name, char out[SRT_RENDEZVOUS_HOST_LEN]);

/// "RDV_EOF" reads "closed by the peer"; ETIMEDOUT and errno values their
/// strerror text.
const char *rdv_io_error_text(int err);

/// Allocates out's payload (a copy of `payload`) and a host table of
/// `world` rows; SRT_RESOURCE_EXHAUSTED on failure (out is then freed).
srt_status rdv_result_alloc(srt_rendezvous_result *out, int world, const void *payload,
                            size_t bytes);

/// MASTER_ADDR of `e` as an IPv4 address with port `port`.
/// Errors: SRT_UNAVAILABLE naming the rank and the name that does not
/// resolve.
srt_status rdv_resolve(const srt_launch_env *e, int port, struct sockaddr_in *a);

/// One connection attempt to `a`, waiting no later than `deadline`: the
/// connected socket (non-blocking, close-on-exec), or -1 and the errno in
/// *err (ETIMEDOUT at the deadline).
int rdv_connect(const struct sockaddr_in *a, double deadline, int *err);

/// The side of every rank but 0 (rendezvous_peer.c): connects to rank 0
/// until `deadline`, sends the hello and reads the reply into `out`.
srt_status rdv_peer(const srt_rendezvous_options *o, srt_rendezvous_result *out,
                    double deadline);

#endif // SHARDRT_RENDEZVOUS_INTERNAL_H
