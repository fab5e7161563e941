// The TCP rendezvous (shardrt/rendezvous.h): the entry point and rank 0's
// side, one poll() loop over the listening socket and the connections whose
// hello is not complete yet; the other ranks' side is rendezvous_peer.c.
#include "rendezvous_internal.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

// Connections beyond the world's that rank 0 keeps open at once: strangers
// (a port scanner) must not crowd out the ranks, nor be kept forever.
#define RDV_SPARE_CONNS 16

typedef struct rdv_conn {
  int fd;
  int rank;         // -1 until its hello was accepted
  size_t got;       // hello bytes read so far
  unsigned char hello[RDV_HELLO_BYTES];
  char peer[64];    // "address:port"
} rdv_conn;

// conn_of_rank's mark of a rank whose connection closed after its hello
// was accepted (it may arrive again); -1 marks one never seen.
enum { kLeft = -2 };

typedef struct rdv_server {
  const srt_rendezvous_options *o;
  int world;
  double deadline;
  int lfd;
  rdv_conn *conns;  // cap slots, nconns used
  int nconns, cap;
  int *conn_of_rank; // world entries: the index in conns, -1 or kLeft
  int arrived;      // ranks > 0 whose hello was accepted
  srt_rendezvous_result *out;
} rdv_server;

// "A:P": MASTER_ADDR and MASTER_PORT as messages name them.
static void where(const srt_launch_env *e, char *buf, size_t len) {
  snprintf(buf, len, "%s:%d", e->master_addr, e->master_port);
}

static srt_status listen_on(rdv_server *s) {
  char at[300];
  where(&s->o->env, at, sizeof at);
  s->lfd = socket(AF_INET, SOCK_STREAM, 0);
  if (s->lfd < 0 || rdv_set_flags(s->lfd))
    return SRT_ERROR(SRT_UNAVAILABLE, "rank 0: no socket for MASTER_ADDR:MASTER_PORT %s: %s",
                     at, strerror(errno));
  int one = 1; // a port left in TIME_WAIT by the last job is free; a listener's is not
  setsockopt(s->lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  // Every address of this host: MASTER_ADDR may resolve here to another
  // of its addresses (a host name mapped to 127.0.1.1) than the others use.
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)s->o->env.master_port),
                          .sin_addr = {.s_addr = htonl(INADDR_ANY)}};
  if (bind(s->lfd, (struct sockaddr *)&a, sizeof a) != 0 || listen(s->lfd, s->world) != 0)
    return SRT_ERROR(SRT_UNAVAILABLE,
                     "rank 0 cannot listen on MASTER_ADDR:MASTER_PORT %s: %s%s", at,
                     strerror(errno),
                     errno == EADDRINUSE ? " (another process holds the port on this host: "
                                           "choose another MASTER_PORT)" : "");
  return NULL;
}

static void drop_conn(rdv_server *s, int i) {
  close(s->conns[i].fd);
  s->conns[i] = s->conns[--s->nconns];
  if (i < s->nconns && s->conns[i].rank >= 0)
    s->conn_of_rank[s->conns[i].rank] = i;
}

static void accept_new(rdv_server *s) {
  for (;;) {
    struct sockaddr_in a;
    socklen_t alen = sizeof a;
    int fd = accept(s->lfd, (struct sockaddr *)&a, &alen);
    if (fd < 0)
      return; // EAGAIN (none left), or a connection that failed before accept
    if (s->nconns == s->cap || rdv_set_flags(fd)) {
      close(fd);
      continue;
    }
    rdv_conn *c = &s->conns[s->nconns++];
    *c = (rdv_conn){.fd = fd, .rank = -1};
    char ip[INET_ADDRSTRLEN] = "?";
    inet_ntop(AF_INET, &a.sin_addr, ip, sizeof ip);
    snprintf(c->peer, sizeof c->peer, "%s:%u", ip, (unsigned)ntohs(a.sin_port));
  }
}

// The reason to refuse the complete hello of conns[i], or NULL; an
// accepted one is entered into the table.
static srt_status check_hello(rdv_server *s, int i) {
  rdv_conn *c = &s->conns[i];
  const unsigned char *h = c->hello;
  uint32_t version = rdv_get_u32(h + 4), rank = rdv_get_u32(h + 8);
  uint32_t world = rdv_get_u32(h + 12), local = rdv_get_u32(h + 16);
  if (version != SRT_RENDEZVOUS_VERSION)
    return SRT_ERROR(SRT_UNAVAILABLE, "the process at %s speaks rendezvous protocol version "
                     "%u, rank 0 version %d (another shard build?)", c->peer, version,
                     SRT_RENDEZVOUS_VERSION);
  if (world != (uint32_t)s->world)
    return SRT_ERROR(SRT_UNAVAILABLE, "rank %u says WORLD_SIZE=%u, rank 0 has %d", rank,
                     world, s->world);
  if (rank == 0 || rank >= world)
    return SRT_ERROR(SRT_UNAVAILABLE, "the process at %s says RANK=%u, but rank 0 expects "
                     "ranks 1..%d (WORLD_SIZE=%d)", c->peer, rank, s->world - 1, s->world);
  if (local >= world)
    return SRT_ERROR(SRT_UNAVAILABLE, "rank %u says LOCAL_RANK=%u, not below WORLD_SIZE=%d",
                     rank, local, s->world);
  if (s->conn_of_rank[rank] >= 0)
    return SRT_ERROR(SRT_UNAVAILABLE, "rank %u arrived twice (from %s and %s)", rank,
                     s->conns[s->conn_of_rank[rank]].peer, c->peer);
  c->rank = (int)rank;
  s->conn_of_rank[rank] = i;
  memcpy(s->out->hosts[rank], h + 20, SRT_RENDEZVOUS_HOST_LEN);
  s->out->hosts[rank][SRT_RENDEZVOUS_HOST_LEN - 1] = '\0';
  s->arrived++;
  return NULL;
}

// conns[i], a rank already in, became readable: it sends nothing after its
// hello, so it closed (died, or was killed) or broke the protocol. Either
// way it leaves the table, as if it had never arrived (a restarted rank may
// take its place before the deadline).
static srt_status forget_rank(rdv_server *s, int i) {
  unsigned char byte;
  ssize_t k = recv(s->conns[i].fd, &byte, 1, 0);
  if (k < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
    return NULL;
  int rank = s->conns[i].rank;
  s->conn_of_rank[rank] = kLeft;
  s->out->hosts[rank][0] = '\0';
  s->arrived--;
  drop_conn(s, i);
  return NULL;
}

// Reads what conns[i] has sent; a complete hello is checked. A stranger (a
// wrong magic) or a connection closed before its hello is dropped.
static srt_status read_hello(rdv_server *s, int i) {
  rdv_conn *c = &s->conns[i];
  if (c->rank >= 0)
    return forget_rank(s, i);
  ssize_t k = recv(c->fd, c->hello + c->got, RDV_HELLO_BYTES - c->got, 0);
  if (k < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
    return NULL;
  if (k <= 0) {
    drop_conn(s, i);
    return NULL;
  }
  c->got += (size_t)k;
  if (c->got >= 4 && rdv_get_u32(c->hello) != RDV_MAGIC) {
    drop_conn(s, i);
    return NULL;
  }
  return c->got == RDV_HELLO_BYTES ? check_hello(s, i) : NULL;
}

// Refuses conns[bad] with `reason` (NULL: none is to blame) and tells every
// other connection that rank 0 ended the rendezvous.
static void refuse_all(rdv_server *s, int bad, const char *reason) {
  char ended[RDV_MAX_REASON];
  snprintf(ended, sizeof ended, "rank 0 ended the rendezvous: %s", reason);
  for (int i = 0; i < s->nconns; ++i)
    rdv_send_refusal(s->conns[i].fd, s->world, i == bad ? reason : ended,
                     rdv_now() + 1.0); // a second each: the peer reads it at once
}

// The error after the deadline: which ranks did not arrive.
// The ranks r whose conn_of_rank is `mark` (-1: never arrived; kLeft)
// as "rank 2" or "ranks 1, 3, ..." into list; their number.
static int rank_list(const rdv_server *s, int mark, char *list, size_t len) {
  size_t n = 0;
  int count = 0, shown = 0;
  for (int r = 1; r < s->world; ++r) {
    if (s->conn_of_rank[r] != mark)
      continue;
    if (n < len - 16)
      n += (size_t)snprintf(list + n, len - n, "%s%d", shown++ ? ", " : "", r);
    ++count;
  }
  if (shown < count)
    snprintf(list + n, len - n, ", ...");
  return count;
}

static srt_status missing_ranks(rdv_server *s) {
  char list[512] = "", left[512] = "", what[1100];
  int missing = rank_list(s, -1, list, sizeof list);
  int n_left = rank_list(s, kLeft, left, sizeof left);
  size_t n = 0;
  if (missing)
    n = (size_t)snprintf(what, sizeof what, "%d of %d ranks did not arrive: %s %s", missing,
                         s->world, missing > 1 ? "ranks" : "rank", list);
  if (n_left)
    snprintf(what + n, sizeof what - n, "%s%s %s arrived, then closed %s connection (gave "
             "up or died)", missing ? "; " : "", n_left > 1 ? "ranks" : "rank", left,
             n_left > 1 ? "their" : "its");
  char at[300];
  where(&s->o->env, at, sizeof at);
  srt_status st = SRT_ERROR(SRT_DEADLINE_EXCEEDED, "rank 0 timed out after %g s at "
                            "MASTER_ADDR:MASTER_PORT %s: %s", s->o->timeout_s, at, what);
  refuse_all(s, -1, srt_status_message(st));
  return st;
}

// Waits for every rank's hello until the deadline.
static srt_status gather_hellos(rdv_server *s) {
  struct pollfd *p = calloc((size_t)s->cap + 1, sizeof *p);
  int *idx = calloc((size_t)s->cap + 1, sizeof *idx);
  srt_status st = p && idx ? NULL : SRT_ERROR(SRT_RESOURCE_EXHAUSTED, "rendezvous: no memory");
  while (!st && s->arrived < s->world - 1) {
    int ms = rdv_ms_left(s->deadline), n = 1;
    if (ms == 0) {
      st = missing_ranks(s);
      break;
    }
    p[0] = (struct pollfd){.fd = s->lfd, .events = POLLIN};
    // Ranks already in are watched too: one that dies before the payload
    // (its socket reads EOF) leaves the table and may come back.
    for (int i = 0; i < s->nconns; ++i)
      idx[n] = i, p[n++] = (struct pollfd){.fd = s->conns[i].fd, .events = POLLIN};
    if (poll(p, (nfds_t)n, ms) < 0 && errno != EINTR)
      st = SRT_ERROR(SRT_UNAVAILABLE, "rank 0: poll: %s", strerror(errno));
    // Highest index first: drop_conn moves the last connection into the
    // dropped one's slot, which the loop has then already visited.
    for (int j = n - 1; !st && j >= 1; --j)
      if (p[j].revents)
        st = read_hello(s, idx[j]);
    if (!st && (p[0].revents & POLLIN))
      accept_new(s);
  }
  free(p);
  free(idx);
  return st;
}

// Sends every rank the payload and the host table.
static srt_status send_payload(rdv_server *s) {
  size_t bytes = s->out->payload_bytes;
  size_t len = RDV_REPLY_HEADER_BYTES + bytes + (size_t)s->world * SRT_RENDEZVOUS_HOST_LEN;
  unsigned char *msg = malloc(len);
  if (!msg)
    return SRT_ERROR(SRT_RESOURCE_EXHAUSTED, "rendezvous: no memory for %zu bytes", len);
  rdv_put_u32(msg, RDV_MAGIC);
  rdv_put_u32(msg + 4, SRT_RENDEZVOUS_VERSION);
  rdv_put_u32(msg + 8, RDV_OK);
  rdv_put_u32(msg + 12, (uint32_t)bytes);
  rdv_put_u32(msg + 16, (uint32_t)s->world);
  memcpy(msg + RDV_REPLY_HEADER_BYTES, s->out->payload, bytes);
  memcpy(msg + RDV_REPLY_HEADER_BYTES + bytes, s->out->hosts,
         (size_t)s->world * SRT_RENDEZVOUS_HOST_LEN);
  srt_status st = NULL;
  for (int r = 1; r < s->world && !st; ++r) {
    const rdv_conn *c = &s->conns[s->conn_of_rank[r]];
    int err = rdv_send_all(c->fd, msg, len, s->deadline);
    if (err)
      st = SRT_ERROR(SRT_UNAVAILABLE, "rank 0 could not send the payload to rank %d at %s: %s",
                     r, c->peer, rdv_io_error_text(err));
  }
  free(msg);
  return st;
}

static srt_status serve(rdv_server *s) {
  SRT_RETURN_IF_ERROR(listen_on(s));
  srt_status st = gather_hellos(s);
  if (st) {
    if (srt_status_code(st) == SRT_DEADLINE_EXCEEDED)
      return st; // missing_ranks told the peers already
    // A refused hello: the connection it came from is the last one read.
    int bad = -1;
    for (int i = 0; i < s->nconns; ++i)
      if (s->conns[i].got == RDV_HELLO_BYTES && s->conns[i].rank < 0)
        bad = i;
    refuse_all(s, bad, srt_status_message(st));
    char at[300];
    where(&s->o->env, at, sizeof at);
    return srt_status_annotate(st, -1, "rank 0 refused the rendezvous at "
                               "MASTER_ADDR:MASTER_PORT %s", at);
  }
  return send_payload(s);
}

static srt_status rank0(const srt_rendezvous_options *o, srt_rendezvous_result *out,
                        double deadline) {
  int world = o->env.world_size;
  rdv_server s = {.o = o, .world = world, .deadline = deadline, .lfd = -1, .out = out,
                  .cap = world - 1 + RDV_SPARE_CONNS};
  s.conns = calloc((size_t)s.cap, sizeof *s.conns);
  s.conn_of_rank = malloc((size_t)world * sizeof *s.conn_of_rank);
  srt_status st = s.conns && s.conn_of_rank
                      ? NULL
                      : SRT_ERROR(SRT_RESOURCE_EXHAUSTED, "rendezvous: no memory");
  for (int r = 0; !st && r < world; ++r)
    s.conn_of_rank[r] = -1;
  if (!st)
    st = serve(&s);
  for (int i = 0; i < s.nconns; ++i)
    close(s.conns[i].fd);
  if (s.lfd >= 0)
    close(s.lfd);
  free(s.conns);
  free(s.conn_of_rank);
  return st;
}

static srt_status check_options(const srt_rendezvous_options *o) {
  const srt_launch_env *e = &o->env;
  if (!(o->timeout_s > 0) || o->payload_bytes > SRT_RENDEZVOUS_MAX_PAYLOAD ||
      (o->payload_bytes && !o->payload && e->rank == 0))
    return SRT_ERROR(SRT_INVALID_ARGUMENT, "rendezvous: timeout %g s (must be > 0), payload "
                     "of %zu bytes (at most %d)", o->timeout_s, o->payload_bytes,
                     SRT_RENDEZVOUS_MAX_PAYLOAD);
  if (e->world_size < 1 || e->rank < 0 || e->rank >= e->world_size ||
      (e->world_size > 1 && (e->master_port < 1 || e->master_port > 65535 || !e->master_addr[0])))
    return SRT_ERROR(SRT_INVALID_ARGUMENT, "rendezvous: rank %d of WORLD_SIZE=%d at "
                     "MASTER_ADDR:MASTER_PORT '%s':%d is impossible", e->rank, e->world_size,
                     e->master_addr, e->master_port);
  return NULL;
}

srt_status srt_rendezvous(const srt_rendezvous_options *o, srt_rendezvous_result *out) {
  SRT_RETURN_IF_ERROR(check_options(o));
  double deadline = rdv_now() + o->timeout_s;
  if (o->env.rank != 0)
    return rdv_peer(o, out, deadline);
  SRT_RETURN_IF_ERROR(rdv_result_alloc(out, o->env.world_size, o->payload, o->payload_bytes));
  rdv_host_name(o->host_name, out->hosts[0]);
  srt_status st = o->env.world_size > 1 ? rank0(o, out, deadline) : NULL;
  if (st)
    srt_rendezvous_result_free(out);
  return st;
}
