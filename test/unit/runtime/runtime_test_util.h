// Helpers shared by the runtime unit tests: a status assertion that prints
// the message, a deterministic random generator, and MPI start-up.
#ifndef SHARD_TEST_RUNTIME_TEST_UTIL_H
#define SHARD_TEST_RUNTIME_TEST_UTIL_H

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <string.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include "shardrt/status.h"

/// Fails the test with the status text unless `expr` returns OK.
#define ASSERT_OK(expr)                                                        \
  do {                                                                         \
    srt_status st_ = (expr);                                                   \
    if (st_) {                                                                 \
      char buf_[1024];                                                         \
      srt_status_format(st_, buf_, sizeof buf_);                               \
      srt_status_free(st_);                                                    \
      fail_msg("%s", buf_);                                                    \
    }                                                                          \
  } while (0)

/// Asserts that `expr` fails with `code` and a message containing `needle`.
#define ASSERT_ERROR(expr, code, needle)                                       \
  do {                                                                         \
    srt_status st_ = (expr);                                                   \
    assert_non_null(st_);                                                      \
    char buf_[1024];                                                           \
    srt_status_format(st_, buf_, sizeof buf_);                                 \
    int code_ok_ = srt_status_code(st_) == (code);                             \
    int text_ok_ = strstr(srt_status_message(st_), (needle)) != NULL;          \
    srt_status_free(st_);                                                      \
    if (!code_ok_ || !text_ok_)                                                \
      fail_msg("expected %s with \"%s\", got: %s", srt_code_name(code),        \
               (needle), buf_);                                                \
  } while (0)

/// Asserts that status `st` (consumed) has `code` and a message containing
/// every string of the NULL-terminated `needles`.
static inline void assert_refused(srt_status st, srt_code code, const char *const *needles) {
  assert_non_null(st);
  if (srt_status_code(st) != code)
    fail_msg("expected %s, got: %s", srt_code_name(code), srt_status_message(st));
  for (const char *const *n = needles; *n; ++n)
    if (!strstr(srt_status_message(st), *n))
      fail_msg("'%s' not in: %s", *n, srt_status_message(st));
  srt_status_free(st);
}

/// splitmix64: a small, seedable generator so every rank can regenerate
/// the same "global" data independently.
static inline uint64_t test_rng_next(uint64_t *s) {
  uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

/// Uniform in [0, 1).
static inline double test_rng_uniform(uint64_t *s) {
  return (double)(test_rng_next(s) >> 11) * 0x1.0p-53;
}

/// A TCP port nothing listens on now on 127.0.0.1 (the kernel's pick for
/// port 0), for the tests of the rendezvous and the TCP mesh.
static inline int test_free_port(void) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr = {.s_addr = htonl(INADDR_LOOPBACK)}};
  socklen_t len = sizeof a;
  assert_int_equal(bind(fd, (struct sockaddr *)&a, sizeof a), 0);
  assert_int_equal(getsockname(fd, (struct sockaddr *)&a, &len), 0);
  close(fd);
  return ntohs(a.sin_port);
}

#endif // SHARD_TEST_RUNTIME_TEST_UTIL_H
