// The TCP mesh (shardrt/tcp_mesh.h): after the rendezvous every rank
// connects to rank 0's mesh listener (whose port the rendezvous handed
// out) with its own listening port, rank 0 answers with the table of
// addresses and ports, and rank j connects to each rank 1..j-1. Every
// connection starts with a hello naming its rank, so the acceptor knows
// whose socket it holds. Wire format, unsigned 32-bit little-endian:
//   hello (connecting rank -> acceptor): magic, rank, listening port
//   table (rank 0 -> every rank): per rank, its IPv4 address (as seen by
//     rank 0, network order, 4 raw bytes) and port
#include "shardrt/tcp_mesh.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "rendezvous_internal.h"

#define MESH_MAGIC 0x4D524853u // "SHRM"
#define MESH_HELLO_BYTES 12
#define MESH_ROW_BYTES 8

typedef struct mesh_build {
  srt_tcp_mesh *m;
  double deadline;
  int lfd;
  unsigned char *table; // size rows of MESH_ROW_BYTES
} mesh_build;

// A listening socket on an ephemeral port of every address of this host.
static srt_status open_listener(mesh_build *b, int *port) {
  b->lfd = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr = {.s_addr = htonl(INADDR_ANY)}};
  socklen_t len = sizeof a;
  if (b->lfd < 0 || rdv_set_flags(b->lfd) || bind(b->lfd, (struct sockaddr *)&a, sizeof a) ||
      listen(b->lfd, b->m->size) || getsockname(b->lfd, (struct sockaddr *)&a, &len))
    return SRT_ERROR(SRT_UNAVAILABLE, "tcp mesh: rank %d cannot listen on an ephemeral port: %s",
                     b->m->rank, strerror(errno));
  *port = ntohs(a.sin_port);
  return NULL;
}

// A link's options: no Nagle delay (the collectives' small messages).
static void link_options(int fd) {
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

static srt_status io_error(const mesh_build *b, int peer, const char *doing, int err) {
  return SRT_ERROR(err == ETIMEDOUT ? SRT_DEADLINE_EXCEEDED : SRT_UNAVAILABLE,
                   "tcp mesh: rank %d %s rank %d: %s (timeout %g s)", b->m->rank, doing, peer,
                   rdv_io_error_text(err), b->m->timeout_s);
}

// The ranks above this one that have not connected, for a timeout's message.
static srt_status missing(const mesh_build *b) {
  char list[512] = "";
  size_t n = 0;
  for (int r = b->m->rank + 1; r < b->m->size && n < sizeof list - 16; ++r)
    if (b->m->fd[r] < 0)
      n += (size_t)snprintf(list + n, sizeof list - n, "%s%d", n ? ", " : "", r);
  return SRT_ERROR(SRT_DEADLINE_EXCEEDED, "tcp mesh: rank %d: rank(s) %s did not connect "
                   "within %g s", b->m->rank, list, b->m->timeout_s);
}

// Takes one connection from the listener and reads its hello; a stranger
// (wrong magic, a rank not above this one or there already) is dropped.
static srt_status accept_one(mesh_build *b) {
  struct sockaddr_in a;
  socklen_t len = sizeof a;
  int fd = accept(b->lfd, (struct sockaddr *)&a, &len);
  if (fd < 0)
    return NULL; // EAGAIN, or a connection gone before accept
  unsigned char h[MESH_HELLO_BYTES];
  uint32_t rank = 0;
  if (rdv_set_flags(fd) || rdv_recv_all(fd, h, sizeof h, b->deadline) ||
      rdv_get_u32(h) != MESH_MAGIC || (rank = rdv_get_u32(h + 4)) <= (uint32_t)b->m->rank ||
      rank >= (uint32_t)b->m->size || b->m->fd[rank] >= 0) {
    close(fd);
    return NULL;
  }
  link_options(fd);
  b->m->fd[rank] = fd;
  if (b->table) { // rank 0: the address and port the others will use
    memcpy(b->table + rank * MESH_ROW_BYTES, &a.sin_addr.s_addr, 4);
    memcpy(b->table + rank * MESH_ROW_BYTES + 4, h + 8, 4);
  }
  return NULL;
}

// Accepts every rank above this one.
static srt_status accept_higher(mesh_build *b) {
  for (;;) {
    int left = 0;
    for (int r = b->m->rank + 1; r < b->m->size; ++r)
      left += b->m->fd[r] < 0;
    if (!left)
      return NULL;
    struct pollfd q = {.fd = b->lfd, .events = POLLIN};
    int n = poll(&q, 1, rdv_ms_left(b->deadline));
    if (n == 0 || rdv_ms_left(b->deadline) == 0)
      return missing(b);
    if (n > 0)
      SRT_RETURN_IF_ERROR(accept_one(b));
    else if (errno != EINTR)
      return io_error(b, -1, "polls its listener for", errno);
  }
}

static srt_status send_hello(mesh_build *b, int fd, int peer, int port) {
  unsigned char h[MESH_HELLO_BYTES];
  rdv_put_u32(h, MESH_MAGIC);
  rdv_put_u32(h + 4, (uint32_t)b->m->rank);
  rdv_put_u32(h + 8, (uint32_t)port);
  int err = rdv_send_all(fd, h, sizeof h, b->deadline);
  return err ? io_error(b, peer, "cannot greet", err) : NULL;
}

// Connects to rank `peer` at `a` and greets it.
static srt_status connect_to(mesh_build *b, int peer, const struct sockaddr_in *a, int port) {
  int err = 0;
  int fd = rdv_connect(a, b->deadline, &err);
  if (fd < 0)
    return io_error(b, peer, "cannot connect to", err);
  link_options(fd);
  b->m->fd[peer] = fd;
  return send_hello(b, fd, peer, port);
}

// Rank 0: every rank's hello, then the table to each.
static srt_status rank0_side(mesh_build *b) {
  b->table = calloc((size_t)b->m->size, MESH_ROW_BYTES);
  if (!b->table)
    return SRT_ERROR(SRT_RESOURCE_EXHAUSTED, "tcp mesh: no memory for the table");
  SRT_RETURN_IF_ERROR(accept_higher(b));
  for (int r = 1; r < b->m->size; ++r) {
    int err = rdv_send_all(b->m->fd[r], b->table, (size_t)b->m->size * MESH_ROW_BYTES,
                           b->deadline);
    if (err)
      return io_error(b, r, "cannot send the table to", err);
  }
  return NULL;
}

// Rank > 0: to rank 0's listener (`port0`, at MASTER_ADDR), the table,
// then to every rank 1..rank-1 and from every rank above.
static srt_status peer_side(mesh_build *b, const srt_launch_env *env, int port0, int port) {
  struct sockaddr_in a;
  SRT_RETURN_IF_ERROR(rdv_resolve(env, port0, &a));
  SRT_RETURN_IF_ERROR(connect_to(b, 0, &a, port));
  size_t bytes = (size_t)b->m->size * MESH_ROW_BYTES;
  unsigned char *t = malloc(bytes);
  if (!t)
    return SRT_ERROR(SRT_RESOURCE_EXHAUSTED, "tcp mesh: no memory for the table");
  int err = rdv_recv_all(b->m->fd[0], t, bytes, b->deadline);
  srt_status st = err ? io_error(b, 0, "had no table from", err) : NULL;
  for (int r = 1; r < b->m->rank && !st; ++r) {
    a.sin_port = htons((uint16_t)rdv_get_u32(t + r * MESH_ROW_BYTES + 4));
    memcpy(&a.sin_addr.s_addr, t + r * MESH_ROW_BYTES, 4);
    st = connect_to(b, r, &a, port);
  }
  free(t);
  return st ? st : accept_higher(b);
}

// The rendezvous (rank 0's mesh port as its payload), then the links.
static srt_status build(mesh_build *b, const srt_launch_env *env) {
  int port = 0;
  SRT_RETURN_IF_ERROR(open_listener(b, &port));
  unsigned char mine[4];
  rdv_put_u32(mine, (uint32_t)port);
  srt_rendezvous_options o = {.env = *env, .timeout_s = b->m->timeout_s, .payload = mine,
                              .payload_bytes = env->rank == 0 ? sizeof mine : 0};
  srt_rendezvous_result r = {0};
  SRT_RETURN_IF_ERROR(srt_rendezvous(&o, &r));
  int port0 = r.payload_bytes == 4 ? (int)rdv_get_u32(r.payload) : 0;
  b->m->local_size = 0;
  for (int k = 0; k < r.world_size; ++k)
    b->m->local_size += !strcmp(r.hosts[k], r.hosts[env->rank]);
  srt_rendezvous_result_free(&r);
  if (port0 < 1 || port0 > 65535)
    return SRT_ERROR(SRT_UNAVAILABLE, "tcp mesh: rank %d got no mesh port from rank 0 (a rank "
                     "0 that is not a shard driver?)", env->rank);
  return env->rank == 0 ? rank0_side(b) : peer_side(b, env, port0, port);
}

srt_status srt_tcp_mesh_connect(const srt_launch_env *env, double timeout_s,
                                srt_tcp_mesh **out) {
  *out = NULL;
  if (!(timeout_s > 0) || env->world_size < 1 || env->rank < 0 || env->rank >= env->world_size)
    return SRT_ERROR(SRT_INVALID_ARGUMENT, "tcp mesh: rank %d of %d with timeout %g s",
                     env->rank, env->world_size, timeout_s);
  srt_tcp_mesh *m = calloc(1, sizeof *m);
  int *fd = malloc((size_t)env->world_size * sizeof *fd);
  if (!m || !fd) {
    free(m);
    free(fd);
    return SRT_ERROR(SRT_RESOURCE_EXHAUSTED, "tcp mesh: no memory");
  }
  *m = (srt_tcp_mesh){.rank = env->rank, .size = env->world_size, .fd = fd,
                      .timeout_s = timeout_s, .local_size = 1};
  for (int r = 0; r < m->size; ++r)
    fd[r] = -1;
  mesh_build b = {.m = m, .deadline = rdv_now() + timeout_s, .lfd = -1};
  srt_status st = m->size > 1 ? build(&b, env) : NULL;
  if (b.lfd >= 0)
    close(b.lfd);
  free(b.table);
  if (st) {
    srt_tcp_mesh_free(m);
    return st;
  }
  *out = m;
  return NULL;
}

void srt_tcp_mesh_free(srt_tcp_mesh *m) {
  if (!m)
    return;
  for (int r = 0; r < m->size; ++r)
    if (m->fd[r] >= 0)
      close(m->fd[r]);
  free(m->fd);
  free(m);
}

// The deadline of a star exchange (timeout_s <= 0: none) and its errors.
static mesh_build star_of(const srt_tcp_mesh *m, double timeout_s) {
  return (mesh_build){.m = (srt_tcp_mesh *)m,
                      .deadline = rdv_now() + (timeout_s > 0 ? timeout_s : 1e9), .lfd = -1};
}

srt_status srt_tcp_mesh_bcast(const srt_tcp_mesh *m, void *buf, size_t bytes, double timeout_s) {
  mesh_build b = star_of(m, timeout_s);
  if (m->rank != 0) {
    int err = rdv_recv_all(m->fd[0], buf, bytes, b.deadline);
    return err ? io_error(&b, 0, "had no broadcast from", err) : NULL;
  }
  for (int r = 1; r < m->size; ++r) {
    int err = rdv_send_all(m->fd[r], buf, bytes, b.deadline);
    if (err)
      return io_error(&b, r, "could not broadcast to", err);
  }
  return NULL;
}

srt_status srt_tcp_mesh_allgather(const srt_tcp_mesh *m, const void *mine, void *all,
                                  size_t bytes, double timeout_s) {
  mesh_build b = star_of(m, timeout_s);
  unsigned char *out = all;
  memcpy(out + (size_t)m->rank * bytes, mine, bytes);
  if (m->rank != 0) {
    int err = rdv_send_all(m->fd[0], mine, bytes, b.deadline);
    if (err)
      return io_error(&b, 0, "could not send its values to", err);
  }
  for (int r = 1; r < m->size && m->rank == 0; ++r) {
    int err = rdv_recv_all(m->fd[r], out + (size_t)r * bytes, bytes, b.deadline);
    if (err)
      return io_error(&b, r, "had no values from", err);
  }
  return srt_tcp_mesh_bcast(m, all, (size_t)m->size * bytes, timeout_s);
}
