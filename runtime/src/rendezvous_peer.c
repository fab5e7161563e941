// The rendezvous as a rank other than 0 (shardrt/rendezvous.h): connect to
// MASTER_ADDR:MASTER_PORT until rank 0 listens or the deadline passes,
// send the hello, read rank 0's answer: the payload and host table, or the
// reason it refused.
#include "rendezvous_internal.h"

#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

// The pause between two connection attempts while rank 0 is not listening.
#define RDV_RETRY_MS 200

typedef struct rdv_peer_state {
  const srt_rendezvous_options *o;
  double deadline;
  char at[300]; // "MASTER_ADDR:MASTER_PORT", as messages name it
  int fd;
} rdv_peer_state;

srt_status rdv_resolve(const srt_launch_env *e, int port, struct sockaddr_in *a) {
  struct addrinfo hints = {.ai_family = AF_INET, .ai_socktype = SOCK_STREAM}, *res = NULL;
  int rc = getaddrinfo(e->master_addr, NULL, &hints, &res);
  if (rc != 0 || !res)
    return SRT_ERROR(SRT_UNAVAILABLE, "rank %d cannot resolve MASTER_ADDR '%s': %s", e->rank,
                     e->master_addr, rc ? gai_strerror(rc) : "no IPv4 address");
  memcpy(a, res->ai_addr, sizeof *a);
  a->sin_port = htons((uint16_t)port);
  freeaddrinfo(res);
  return NULL;
}

int rdv_connect(const struct sockaddr_in *a, double deadline, int *err) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) {
    *err = errno;
    return -1;
  }
  *err = rdv_set_flags(fd);
  if (!*err && connect(fd, (const struct sockaddr *)a, sizeof *a) != 0) {
    *err = errno;
    if (*err == EINPROGRESS) {
      struct pollfd q = {.fd = fd, .events = POLLOUT};
      int n = poll(&q, 1, rdv_ms_left(deadline));
      socklen_t len = sizeof *err;
      if (n <= 0)
        *err = n == 0 ? ETIMEDOUT : errno;
      else if (getsockopt(fd, SOL_SOCKET, SO_ERROR, err, &len) != 0)
        *err = errno;
    }
  }
  if (*err) {
    close(fd);
    return -1;
  }
  return fd;
}

static srt_status connect_rank0(rdv_peer_state *p, int *attempts) {
  struct sockaddr_in a;
  SRT_RETURN_IF_ERROR(rdv_resolve(&p->o->env, p->o->env.master_port, &a));
  int err = ETIMEDOUT;
  while (rdv_ms_left(p->deadline) > 0) {
    ++*attempts;
    p->fd = rdv_connect(&a, p->deadline, &err);
    if (p->fd >= 0)
      return NULL;
    int ms = rdv_ms_left(p->deadline);
    poll(NULL, 0, ms < RDV_RETRY_MS ? ms : RDV_RETRY_MS);
  }
  return SRT_ERROR(SRT_DEADLINE_EXCEEDED, "rank %d could not reach rank 0 at "
                   "MASTER_ADDR:MASTER_PORT %s within %g s (%d attempts, the last: %s)",
                   p->o->env.rank, p->at, p->o->timeout_s, *attempts, strerror(err));
}

static srt_status send_hello(rdv_peer_state *p) {
  const srt_launch_env *e = &p->o->env;
  unsigned char h[RDV_HELLO_BYTES];
  rdv_put_u32(h, RDV_MAGIC);
  rdv_put_u32(h + 4, SRT_RENDEZVOUS_VERSION);
  rdv_put_u32(h + 8, (uint32_t)e->rank);
  rdv_put_u32(h + 12, (uint32_t)e->world_size);
  rdv_put_u32(h + 16, (uint32_t)e->local_rank);
  rdv_host_name(p->o->host_name, (char *)h + 20);
  int err = rdv_send_all(p->fd, h, sizeof h, p->deadline);
  if (err)
    return SRT_ERROR(SRT_UNAVAILABLE, "rank %d lost rank 0 at MASTER_ADDR:MASTER_PORT %s "
                     "sending its hello: %s", e->rank, p->at, rdv_io_error_text(err));
  return NULL;
}

// The error of a failed read of rank 0's answer.
static srt_status answer_error(const rdv_peer_state *p, int err) {
  if (err == ETIMEDOUT)
    return SRT_ERROR(SRT_DEADLINE_EXCEEDED, "rank %d reached rank 0 at MASTER_ADDR:MASTER_PORT "
                     "%s but had no answer within %g s (rank 0 answers once all WORLD_SIZE=%d "
                     "ranks arrived: is one missing?)", p->o->env.rank, p->at,
                     p->o->timeout_s, p->o->env.world_size);
  return SRT_ERROR(SRT_UNAVAILABLE, "rank %d lost rank 0 at MASTER_ADDR:MASTER_PORT %s before "
                   "its answer: %s", p->o->env.rank, p->at, rdv_io_error_text(err));
}

static srt_status read_refusal(const rdv_peer_state *p, uint32_t len) {
  char reason[RDV_MAX_REASON + 1] = "";
  if (len > RDV_MAX_REASON)
    len = 0; // not from a rank 0 of ours: say nothing more than "refused"
  int err = rdv_recv_all(p->fd, reason, len, p->deadline);
  if (err)
    return answer_error(p, err);
  reason[len] = '\0';
  return SRT_ERROR(SRT_UNAVAILABLE, "rank %d: rank 0 at MASTER_ADDR:MASTER_PORT %s refused: %s",
                   p->o->env.rank, p->at, reason);
}

static srt_status read_answer(rdv_peer_state *p, srt_rendezvous_result *out) {
  unsigned char h[RDV_REPLY_HEADER_BYTES];
  int err = rdv_recv_all(p->fd, h, sizeof h, p->deadline);
  if (err)
    return answer_error(p, err);
  uint32_t kind = rdv_get_u32(h + 8), len = rdv_get_u32(h + 12), world = rdv_get_u32(h + 16);
  if (rdv_get_u32(h) != RDV_MAGIC || rdv_get_u32(h + 4) != SRT_RENDEZVOUS_VERSION ||
      (kind != RDV_OK && kind != RDV_REFUSED))
    return SRT_ERROR(SRT_UNAVAILABLE, "rank %d: the process at MASTER_ADDR:MASTER_PORT %s is "
                     "not a rank 0 of rendezvous protocol version %d", p->o->env.rank, p->at,
                     SRT_RENDEZVOUS_VERSION);
  if (kind == RDV_REFUSED)
    return read_refusal(p, len);
  if (world != (uint32_t)p->o->env.world_size || len > SRT_RENDEZVOUS_MAX_PAYLOAD)
    return SRT_ERROR(SRT_UNAVAILABLE, "rank %d: rank 0 at MASTER_ADDR:MASTER_PORT %s answered "
                     "for WORLD_SIZE=%u with %u payload bytes (expected WORLD_SIZE=%d, at "
                     "most %d bytes)", p->o->env.rank, p->at, world, len,
                     p->o->env.world_size, SRT_RENDEZVOUS_MAX_PAYLOAD);
  SRT_RETURN_IF_ERROR(rdv_result_alloc(out, (int)world, NULL, len));
  err = rdv_recv_all(p->fd, out->payload, len, p->deadline);
  if (!err)
    err = rdv_recv_all(p->fd, out->hosts, world * SRT_RENDEZVOUS_HOST_LEN, p->deadline);
  if (err) {
    srt_rendezvous_result_free(out);
    return answer_error(p, err);
  }
  for (uint32_t r = 0; r < world; ++r)
    out->hosts[r][SRT_RENDEZVOUS_HOST_LEN - 1] = '\0';
  return NULL;
}

srt_status rdv_peer(const srt_rendezvous_options *o, srt_rendezvous_result *out,
                    double deadline) {
  rdv_peer_state p = {.o = o, .deadline = deadline, .fd = -1};
  snprintf(p.at, sizeof p.at, "%s:%d", o->env.master_addr, o->env.master_port);
  int attempts = 0;
  srt_status st = connect_rank0(&p, &attempts);
  if (!st)
    st = send_hello(&p);
  if (!st)
    st = read_answer(&p, out);
  if (p.fd >= 0)
    close(p.fd);
  if (!st)
    out->connect_attempts = attempts;
  return st;
}
