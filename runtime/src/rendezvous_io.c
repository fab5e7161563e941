// The rendezvous's socket I/O with one deadline (rendezvous_internal.h).
#include "rendezvous_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

double rdv_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

int rdv_ms_left(double deadline) {
  double ms = (deadline - rdv_now()) * 1e3;
  return ms <= 0 ? 0 : ms > 1e9 ? 1000000000 : (int)ms + 1;
}

void rdv_put_u32(unsigned char *p, uint32_t v) {
  for (int i = 0; i < 4; ++i)
    p[i] = (unsigned char)(v >> (8 * i));
}

uint32_t rdv_get_u32(const unsigned char *p) {
  return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

// Waits until fd is ready for `events` or the deadline: 0, ETIMEDOUT or errno.
static int wait_ready(int fd, short events, double deadline) {
  for (;;) {
    int ms = rdv_ms_left(deadline);
    if (ms == 0)
      return ETIMEDOUT;
    struct pollfd p = {.fd = fd, .events = events};
    int n = poll(&p, 1, ms);
    if (n > 0)
      return 0; // ready, or an error the next send/recv reports
    if (n < 0 && errno != EINTR)
      return errno;
  }
}

int rdv_send_all(int fd, const void *buf, size_t n, double deadline) {
  const unsigned char *p = buf;
  while (n > 0) {
    ssize_t k = send(fd, p, n, MSG_NOSIGNAL);
    if (k > 0) {
      p += k, n -= (size_t)k;
      continue;
    }
    if (k < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
      return errno;
    int w = wait_ready(fd, POLLOUT, deadline);
    if (w)
      return w;
  }
  return 0;
}

int rdv_recv_all(int fd, void *buf, size_t n, double deadline) {
  unsigned char *p = buf;
  while (n > 0) {
    ssize_t k = recv(fd, p, n, 0);
    if (k > 0) {
      p += k, n -= (size_t)k;
      continue;
    }
    if (k == 0)
      return RDV_EOF;
    if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
      return errno;
    int w = wait_ready(fd, POLLIN, deadline);
    if (w)
      return w;
  }
  return 0;
}

void rdv_send_refusal(int fd, int world_size, const char *reason, double deadline) {
  size_t len = strnlen(reason, RDV_MAX_REASON);
  unsigned char msg[RDV_REPLY_HEADER_BYTES + RDV_MAX_REASON];
  rdv_put_u32(msg, RDV_MAGIC);
  rdv_put_u32(msg + 4, SRT_RENDEZVOUS_VERSION);
  rdv_put_u32(msg + 8, RDV_REFUSED);
  rdv_put_u32(msg + 12, (uint32_t)len);
  rdv_put_u32(msg + 16, (uint32_t)world_size);
  memcpy(msg + RDV_REPLY_HEADER_BYTES, reason, len);
  (void)rdv_send_all(fd, msg, RDV_REPLY_HEADER_BYTES + len, deadline);
}

int rdv_set_flags(int fd) {
  int fl = fcntl(fd, F_GETFL);
  if (fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) < 0 || fcntl(fd, F_SETFD, FD_CLOEXEC) < 0)
    return errno;
  return 0;
}

void rdv_host_name(const char *name, char out[SRT_RENDEZVOUS_HOST_LEN]) {
  char buf[256] = "";
  if (!name) {
    if (gethostname(buf, sizeof buf - 1) != 0)
      strcpy(buf, "(unknown host)");
    name = buf;
  }
  memset(out, 0, SRT_RENDEZVOUS_HOST_LEN);
  memcpy(out, name, strnlen(name, SRT_RENDEZVOUS_HOST_LEN - 1));
}

const char *rdv_io_error_text(int err) {
  return err == RDV_EOF ? "closed by the peer" : strerror(err);
}

srt_status rdv_result_alloc(srt_rendezvous_result *out, int world, const void *payload,
                            size_t bytes) {
  *out = (srt_rendezvous_result){.world_size = world, .payload_bytes = bytes};
  out->payload = malloc(bytes ? bytes : 1);
  out->hosts = calloc((size_t)world, sizeof *out->hosts);
  if (!out->payload || !out->hosts) {
    srt_rendezvous_result_free(out);
    return SRT_ERROR(SRT_RESOURCE_EXHAUSTED, "rendezvous: no memory for %zu payload bytes "
                     "and %d host names", bytes, world);
  }
  if (payload && bytes)
    memcpy(out->payload, payload, bytes);
  return NULL;
}

void srt_rendezvous_result_free(srt_rendezvous_result *r) {
  if (!r)
    return;
  free(r->payload);
  free(r->hosts);
  *r = (srt_rendezvous_result){0};
}
