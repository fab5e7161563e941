// Unit tests of the TCP rendezvous (shardrt/rendezvous.h) on 127.0.0.1
// with what a real peer never sends: rank 0 (a forked child) facing a
// stranger that is not a rank (dropped: the ranks still meet), a hello of
// another protocol version, a rank out of range, a hello cut short (rank 0
// times out naming the rank missing and tells the connection); a rank
// facing a rank 0 that answers garbage. The hellos and answers here are
// written byte by byte from the wire format of rendezvous_internal.h (all
// little-endian u32), not with the runtime's own encoders. e2e/rendezvous
// runs the ordinary cases across hosts.
#include "runtime_test_util.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "shardrt/rendezvous.h"

enum { kHelloBytes = 20 + SRT_RENDEZVOUS_HOST_LEN };

static void put32(unsigned char *p, uint32_t v) {
  for (int i = 0; i < 4; ++i)
    p[i] = (unsigned char)(v >> (8 * i));
}

static srt_launch_env env_of(int rank, int world, int port) {
  srt_launch_env e = {.kind = SRT_LAUNCH_TORCHRUN, .rank = rank, .world_size = world,
                      .master_port = port};
  strcpy(e.master_addr, "127.0.0.1");
  return e;
}

// Forks rank 0 of `world` (payload "abc", timeout_s); the child exits 0
// when the rendezvous ends with `code` and a message holding `needle`.
static pid_t fork_rank0(int world, int port, double timeout_s, srt_code code,
                        const char *needle) {
  pid_t pid = fork();
  assert_true(pid >= 0);
  if (pid)
    return pid;
  srt_rendezvous_options o = {.env = env_of(0, world, port), .timeout_s = timeout_s,
                              .payload = "abc", .payload_bytes = 3};
  srt_rendezvous_result r;
  srt_status s = srt_rendezvous(&o, &r);
  int ok = srt_status_code(s) == code && strstr(srt_status_message(s), needle);
  if (!ok)
    fprintf(stderr, "rank 0: expected %s with '%s', got %s: %s\n", srt_code_name(code), needle,
            srt_code_name(srt_status_code(s)), srt_status_message(s));
  if (!s)
    srt_rendezvous_result_free(&r);
  srt_status_free(s);
  _exit(ok ? 0 : 1);
}

static void expect_child_ok(pid_t pid) {
  int st = 0;
  assert_int_equal(waitpid(pid, &st, 0), pid);
  assert_true(WIFEXITED(st));
  assert_int_equal(WEXITSTATUS(st), 0);
}

// A raw connection to 127.0.0.1:port, retried until rank 0 listens.
static int raw_connect(int port) {
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port),
                          .sin_addr = {.s_addr = htonl(INADDR_LOOPBACK)}};
  for (int i = 0; i < 100; ++i) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (connect(fd, (struct sockaddr *)&a, sizeof a) == 0)
      return fd;
    close(fd);
    poll(NULL, 0, 20);
  }
  fail_msg("nothing listens on port %d", port);
  return -1;
}

// Reads rank 0's answer on fd until it closes: a refusal (kind 1) whose
// reason must hold `needle`; closes fd.
static void expect_refusal_text(int fd, const char *needle) {
  char buf[2048] = "";
  size_t n = 0;
  ssize_t k;
  while (n < sizeof buf - 1 && (k = recv(fd, buf + n, sizeof buf - 1 - n, 0)) > 0)
    n += (size_t)k;
  assert_true(n > 20);
  assert_int_equal(buf[8], 1); // RDV_REFUSED
  buf[n] = '\0';
  if (!strstr(buf + 20, needle))
    fail_msg("refusal '%s' lacks '%s'", buf + 20, needle);
  close(fd);
}

// Sends a hello (version, rank, world); rank 0 must refuse it with `needle`.
static void expect_refusal(int fd, uint32_t version, uint32_t rank, uint32_t world,
                           const char *needle) {
  unsigned char h[kHelloBytes] = {0};
  put32(h, 0x56524853u);
  put32(h + 4, version);
  put32(h + 8, rank);
  put32(h + 12, world);
  memcpy(h + 20, "rawpeer", 7);
  assert_int_equal(send(fd, h, sizeof h, 0), (ssize_t)sizeof h);
  expect_refusal_text(fd, needle);
}

// Runs the rendezvous with `o`: it must succeed with `payload` (a string)
// and o->host_name in the table's row of o's rank.
static void expect_met(const srt_rendezvous_options *o, const char *payload) {
  srt_rendezvous_result r;
  ASSERT_OK(srt_rendezvous(o, &r));
  assert_int_equal(r.payload_bytes, strlen(payload));
  assert_memory_equal(r.payload, payload, strlen(payload));
  assert_string_equal(r.hosts[o->env.rank], o->host_name);
  srt_rendezvous_result_free(&r);
}

static void test_world_of_one(void **state) {
  (void)state;
  srt_rendezvous_options o = {.env = env_of(0, 1, 0), .timeout_s = 1, .payload = "xy",
                              .payload_bytes = 2, .host_name = "solo"};
  expect_met(&o, "xy");
  srt_rendezvous_result r;
  o.timeout_s = 0;
  ASSERT_ERROR(srt_rendezvous(&o, &r), SRT_INVALID_ARGUMENT, "timeout 0 s");
  o.timeout_s = 1, o.payload_bytes = SRT_RENDEZVOUS_MAX_PAYLOAD + 1;
  ASSERT_ERROR(srt_rendezvous(&o, &r), SRT_INVALID_ARGUMENT, "at most 65536");
  o.payload_bytes = 2, o.env = env_of(2, 2, 1);
  ASSERT_ERROR(srt_rendezvous(&o, &r), SRT_INVALID_ARGUMENT, "rank 2 of WORLD_SIZE=2");
}

// A stranger's bytes (an HTTP request) are dropped; rank 1 still gets the payload.
static void test_stranger_dropped(void **state) {
  (void)state;
  int port = test_free_port();
  pid_t pid = fork_rank0(2, port, 5, SRT_OK, "");
  int fd = raw_connect(port);
  assert_int_equal(send(fd, "GET / HTTP/1.0\r\n\r\n", 18, 0), 18);
  char c;
  assert_int_equal(recv(fd, &c, 1, 0), 0); // rank 0 closed it unanswered
  close(fd);
  srt_rendezvous_options o = {.env = env_of(1, 2, port), .timeout_s = 5, .host_name = "r1"};
  expect_met(&o, "abc");
  expect_child_ok(pid);
}

static void test_bad_hellos(void **state) {
  (void)state;
  static const struct {
    uint32_t version, rank, world;
    const char *needle;
  } cases[] = {
      {9, 1, 2, "speaks rendezvous protocol version 9, rank 0 version 1"},
      {1, 5, 2, "says RANK=5, but rank 0 expects ranks 1..1 (WORLD_SIZE=2)"},
      {1, 0, 2, "says RANK=0, but rank 0 expects ranks 1..1"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; ++i) {
    int port = test_free_port();
    pid_t pid = fork_rank0(2, port, 5, SRT_UNAVAILABLE, cases[i].needle);
    expect_refusal(raw_connect(port), cases[i].version, cases[i].rank, cases[i].world,
                   cases[i].needle);
    expect_child_ok(pid);
  }
}

// Half a hello, then silence: rank 0 ends at its deadline naming rank 1
// missing and says so on that connection.
static void test_cut_hello(void **state) {
  (void)state;
  int port = test_free_port();
  pid_t pid = fork_rank0(2, port, 1, SRT_DEADLINE_EXCEEDED,
                         "1 of 2 ranks did not arrive: rank 1");
  int fd = raw_connect(port);
  unsigned char h[10] = {0};
  put32(h, 0x56524853u);
  assert_int_equal(send(fd, h, sizeof h, 0), 10);
  expect_refusal_text(fd, "rank 0 ended the rendezvous: rank 0 timed out after 1 s");
  expect_child_ok(pid);
}

// Rank 1 sends its hello and dies before rank 2 arrives: rank 0 forgets it
// (it would otherwise hand the payload to a dead socket and call the
// rendezvous met), so a restarted rank 1 is let in, not refused as arriving
// twice; with nobody to replace it rank 0 ends at its deadline saying it
// arrived and left.
static void test_rank_dies_after_hello(void **state) {
  (void)state;
  for (int restart = 1; restart >= 0; --restart) {
    int port = test_free_port();
    pid_t pid = restart ? fork_rank0(3, port, 5, SRT_OK, "")
                        : fork_rank0(3, port, 1, SRT_DEADLINE_EXCEEDED,
                                     "rank 1 arrived, then closed its connection");
    int fd = raw_connect(port);
    unsigned char h[kHelloBytes] = {0};
    put32(h, 0x56524853u);
    put32(h + 4, SRT_RENDEZVOUS_VERSION);
    put32(h + 8, 1);
    put32(h + 12, 3);
    assert_int_equal(send(fd, h, sizeof h, 0), (ssize_t)sizeof h);
    poll(NULL, 0, 100); // rank 0 has taken the hello
    close(fd);          // ... and rank 1 dies
    poll(NULL, 0, 100);
    pid_t r1 = 0;
    if (restart) {
      r1 = fork();
      assert_true(r1 >= 0);
      if (r1 == 0) {
        srt_rendezvous_options o = {.env = env_of(1, 3, port), .timeout_s = 5,
                                    .host_name = "again"};
        srt_rendezvous_result r;
        srt_status st = srt_rendezvous(&o, &r);
        int ok = !st && r.payload_bytes == 3 && !memcmp(r.payload, "abc", 3);
        if (!st)
          srt_rendezvous_result_free(&r);
        srt_status_free(st);
        _exit(ok ? 0 : 1);
      }
      poll(NULL, 0, 100);
    }
    srt_rendezvous_options o = {.env = env_of(2, 3, port), .timeout_s = 5, .host_name = "r2"};
    if (restart) {
      expect_met(&o, "abc");
      expect_child_ok(r1);
    } else {
      srt_rendezvous_result r;
      ASSERT_ERROR(srt_rendezvous(&o, &r), SRT_UNAVAILABLE, "rank 0 ended the rendezvous");
    }
    expect_child_ok(pid);
  }
}

// A listener that answers a hello with garbage is no rank 0 of ours.
static void test_garbage_answer(void **state) {
  (void)state;
  int port = test_free_port();
  int lfd = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port),
                          .sin_addr = {.s_addr = htonl(INADDR_LOOPBACK)}};
  assert_int_equal(bind(lfd, (struct sockaddr *)&a, sizeof a), 0);
  assert_int_equal(listen(lfd, 1), 0);
  pid_t pid = fork();
  assert_true(pid >= 0);
  if (pid == 0) {
    srt_rendezvous_options o = {.env = env_of(1, 2, port), .timeout_s = 5};
    srt_rendezvous_result r;
    srt_status s = srt_rendezvous(&o, &r);
    int ok = s && strstr(srt_status_message(s), "is not a rank 0 of rendezvous protocol");
    if (!ok)
      fprintf(stderr, "rank 1 got: %s\n", srt_status_message(s));
    _exit(ok ? 0 : 1);
  }
  int fd = accept(lfd, NULL, NULL);
  unsigned char h[kHelloBytes];
  assert_int_equal(recv(fd, h, sizeof h, MSG_WAITALL), (ssize_t)sizeof h);
  assert_int_equal(h[8], 1); // its rank, little-endian
  assert_int_equal(send(fd, "HTTP/1.0 200 OK\r\n\r\nhello", 24, 0), 24);
  expect_child_ok(pid);
  close(fd);
  close(lfd);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_world_of_one), cmocka_unit_test(test_stranger_dropped),
      cmocka_unit_test(test_bad_hellos),   cmocka_unit_test(test_cut_hello),
      cmocka_unit_test(test_garbage_answer), cmocka_unit_test(test_rank_dies_after_hello),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
