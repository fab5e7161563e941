// Unit tests of the host plane's TCP transport: ranks forked on 127.0.0.1
// build the mesh (shardrt/tcp_mesh.h) through the rendezvous, create a
// context over it (srt_context_options.tcp_mesh: no MPI) and run every
// public collective on every group of a dp x tp mesh. Each rank knows what
// every rank contributed (value(), a function of the world rank and the
// index), so it computes every result serially: reductions summed in
// group-rank order in the dtype itself, which the TCP transport promises
// bit for bit (memcmp, tolerance 0); data movement exactly. The groups'
// members are checked against srt_mesh_coord's placement. Then a peer
// that dies and one that stalls: the others fail naming the collective,
// the group and the peer's world rank, within the deadline.
#include "runtime_test_util.h"

#include <arpa/inet.h>
#include <math.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "shardrt/collectives.h"
#include "shardrt/context.h"
#include "shardrt/mesh.h"
#include "shardrt/tcp_mesh.h"

// In a forked rank cmocka cannot fail the test: print and exit 1.
#define CHECK(cond, ...)                                                                   \
  do {                                                                                     \
    if (!(cond)) {                                                                         \
      fprintf(stderr, "rank check failed at line %d: %s: ", __LINE__, #cond);             \
      fprintf(stderr, __VA_ARGS__);                                                        \
      fprintf(stderr, "\n");                                                               \
      _exit(1);                                                                            \
    }                                                                                      \
  } while (0)
#define CHECK_OK(expr)                                                                     \
  do {                                                                                     \
    srt_status st_ = (expr);                                                               \
    CHECK(!st_, "%s", srt_status_message(st_));                                            \
  } while (0)

// What world rank w holds at index i of a tensor: magnitudes that make
// the order of a float sum matter.
static float value(int w, int64_t i) {
  return (float)((w * 131 + i * 17) % 97) * 0.013f - 0.5f + (float)w * 1e-4f +
         (float)(i % 5) * 1e3f;
}

typedef struct world_ctx {
  srt_tcp_mesh *mesh;
  srt_context *ctx;
} world_ctx;

static world_ctx join(int rank, int world, int port, int dp, int tp, double timeout_s) {
  srt_launch_env e = {.kind = SRT_LAUNCH_TORCHRUN, .rank = rank, .world_size = world,
                      .master_port = port};
  strcpy(e.master_addr, "127.0.0.1");
  world_ctx w = {0};
  CHECK_OK(srt_tcp_mesh_connect(&e, 20, &w.mesh));
  srt_context_options o = srt_context_default_options();
  o.dp = dp;
  o.tp = tp;
  o.timeout_s = timeout_s;
  o.tcp_mesh = w.mesh;
  CHECK_OK(srt_context_create(&o, &w.ctx));
  return w;
}

static void leave(world_ctx w) {
  CHECK_OK(srt_context_destroy(w.ctx));
  srt_tcp_mesh_free(w.mesh);
}

// The world ranks of group `kind` in group-rank order, from the mesh's
// placement (not from the context): returns the size.
static int members_of(const srt_mesh *mesh, int me, srt_group_kind kind, int *out) {
  int c[SRT_MESH_NDIMS], mine[SRT_MESH_NDIMS], n = 0;
  srt_mesh_coord(mesh, me, mine);
  int world = mesh->shape[SRT_MESH_DP] * mesh->shape[SRT_MESH_TP];
  for (int w = 0; w < world; ++w) {
    srt_mesh_coord(mesh, w, c);
    int same = kind == SRT_GROUP_WORLD || (kind == SRT_GROUP_DP && c[SRT_MESH_TP] == mine[SRT_MESH_TP]) ||
               (kind == SRT_GROUP_DP_CP && c[SRT_MESH_TP] == mine[SRT_MESH_TP]) ||
               (kind == SRT_GROUP_TP && c[SRT_MESH_DP] == mine[SRT_MESH_DP]);
    if (same)
      out[n++] = w; // world ranks grow with the group coordinate on a cp = 1 mesh
  }
  return n;
}

static void check_members(srt_group *g, const int *m, int n, int me) {
  CHECK(srt_group_size(g) == n, "group %s size %d, expected %d", srt_group_name(g),
        srt_group_size(g), n);
  int got[16];
  int64_t shape[1] = {1};
  CHECK_OK(srt_all_gather(g, &me, got, SRT_I32, 1, shape, 0));
  for (int r = 0; r < n; ++r)
    CHECK(got[r] == m[r], "group %s member %d is world rank %d, expected %d",
          srt_group_name(g), r, got[r], m[r]);
}

// All-reduce F32 SUM (37 elements: ranges of unequal length) and F64 MAX,
// the blocking and the started form, against the serial sums.
static void check_all_reduce(srt_context *ctx, srt_group *g, const int *m, int n, int me) {
  enum { N = 37 };
  float x[N], want[N];
  double d[N];
  for (int i = 0; i < N; ++i) {
    x[i] = value(me, i);
    d[i] = value(me, i);
    want[i] = value(m[0], i);
    for (int r = 1; r < n; ++r)
      want[i] += value(m[r], i);
  }
  CHECK_OK(srt_all_reduce_start(g, x, N, SRT_F32, SRT_REDUCE_SUM, 3));
  CHECK_OK(srt_collective_wait(ctx, 3));
  CHECK(!memcmp(x, want, sizeof x), "group %s all-reduce sum differs", srt_group_name(g));
  CHECK_OK(srt_all_reduce(g, d, N, SRT_F64, SRT_REDUCE_MAX));
  for (int i = 0; i < N; ++i) {
    double mx = value(m[0], i);
    for (int r = 1; r < n; ++r)
      mx = fmax(mx, value(m[r], i));
    CHECK(d[i] == mx, "group %s max[%d] %g, expected %g", srt_group_name(g), i, d[i], mx);
  }
}

// Gather along dim 1 of [2, 3] (packed) and reduce-scatter along dim 1 of
// [2, 3n] (packed): out[a][r*3 + b] is rank r's in[a][b].
static void check_gather_scatter(srt_group *g, const int *m, int n, int me) {
  float in[6], out[96] = {0}, want[96] = {0}, full[96];
  int64_t local[2] = {2, 3}, whole[2] = {2, 3 * n};
  for (int i = 0; i < 6; ++i)
    in[i] = value(me, i);
  CHECK_OK(srt_all_gather(g, in, out, SRT_F32, 2, local, 1));
  for (int a = 0; a < 2; ++a)
    for (int r = 0; r < n; ++r)
      for (int b = 0; b < 3; ++b)
        want[a * 3 * n + r * 3 + b] = value(m[r], a * 3 + b);
  CHECK(!memcmp(out, want, (size_t)6 * n * sizeof *out), "group %s gather",
        srt_group_name(g));
  for (int i = 0; i < 6 * n; ++i)
    full[i] = value(me, i);
  CHECK_OK(srt_reduce_scatter(g, full, out, SRT_F32, 2, whole, 1, SRT_REDUCE_SUM));
  int k = srt_group_rank(g);
  for (int a = 0; a < 2; ++a)
    for (int b = 0; b < 3; ++b) {
      int64_t i = a * 3 * n + k * 3 + b;
      float s = value(m[0], i);
      for (int r = 1; r < n; ++r)
        s += value(m[r], i);
      CHECK(out[a * 3 + b] == s, "group %s reduce-scatter [%d][%d]: %g, expected %g",
            srt_group_name(g), a, b, out[a * 3 + b], s);
    }
}

// All-to-all Shard(0) -> Shard(1) of [2, 2n] and a broadcast from the
// last group rank.
static void check_all_to_all_bcast(srt_group *g, const int *m, int n, int me) {
  float in[64], out[64];
  int64_t shape[2] = {2, 2 * n};
  for (int i = 0; i < 4 * n; ++i)
    in[i] = value(me, i);
  CHECK_OK(srt_all_to_all(g, in, out, SRT_F32, 2, shape, 0, 1));
  int k = srt_group_rank(g);
  for (int r = 0; r < n; ++r) // out: [2n, 2]; rows 2r..2r+1 from rank r, its columns 2k..2k+1
    for (int a = 0; a < 2; ++a)
      for (int b = 0; b < 2; ++b)
        CHECK(out[(r * 2 + a) * 2 + b] == value(m[r], a * 2 * n + k * 2 + b),
              "group %s all-to-all from rank %d", srt_group_name(g), r);
  int64_t v[5];
  for (int i = 0; i < 5; ++i)
    v[i] = (int64_t)me * 1000 + i;
  CHECK_OK(srt_broadcast(g, v, 5, SRT_I64, n - 1));
  for (int i = 0; i < 5; ++i)
    CHECK(v[i] == (int64_t)m[n - 1] * 1000 + i, "group %s broadcast", srt_group_name(g));
}

// A bucket of two members of each kind, against the same collectives
// done one by one.
static void check_buckets(srt_context *ctx, srt_group *g, int n, int me) {
  float a[40], b[40], oa[160], ob[160], ra[160], rb[160];
  for (int i = 0; i < 40; ++i)
    a[i] = value(me, i), b[i] = value(me + 7, i);
  for (int kind = 0; kind <= SRT_BUCKET_ALL_REDUCE; ++kind) {
    int64_t ca = kind == SRT_BUCKET_REDUCE_SCATTER ? 8 : 5 * n, cb = kind == 1 ? 4 : 3;
    srt_bucket_member mem[2] = {{.in = a, .out = oa, .count = ca},
                                {.in = b, .out = ob, .count = cb}};
    CHECK_OK(srt_bucket_start(g, (srt_bucket_kind)kind, mem, 2, SRT_F32, 1));
    CHECK_OK(srt_bucket_wait(ctx, mem, 2, 1));
    int64_t sa[1] = {kind == 1 ? ca * n : ca}, sb[1] = {kind == 1 ? cb * n : cb};
    if (kind == SRT_BUCKET_ALL_GATHER) {
      CHECK_OK(srt_all_gather(g, a, ra, SRT_F32, 1, sa, 0));
      CHECK_OK(srt_all_gather(g, b, rb, SRT_F32, 1, sb, 0));
    } else if (kind == SRT_BUCKET_REDUCE_SCATTER) {
      CHECK_OK(srt_reduce_scatter(g, a, ra, SRT_F32, 1, sa, 0, SRT_REDUCE_SUM));
      CHECK_OK(srt_reduce_scatter(g, b, rb, SRT_F32, 1, sb, 0, SRT_REDUCE_SUM));
    } else {
      memcpy(ra, a, sizeof a);
      memcpy(rb, b, sizeof b);
      CHECK_OK(srt_all_reduce(g, ra, ca, SRT_F32, SRT_REDUCE_SUM));
      CHECK_OK(srt_all_reduce(g, rb, cb, SRT_F32, SRT_REDUCE_SUM));
    }
    int64_t na = kind == SRT_BUCKET_ALL_GATHER ? ca * n : ca;
    int64_t nb = kind == SRT_BUCKET_ALL_GATHER ? cb * n : cb;
    CHECK(!memcmp(oa, ra, (size_t)na * 4) && !memcmp(ob, rb, (size_t)nb * 4),
          "group %s bucket kind %d", srt_group_name(g), kind);
  }
}

static void rank_main(int rank, int world, int port, int dp, int tp) {
  world_ctx w = join(rank, world, port, dp, tp, 20);
  static const srt_group_kind kinds[] = {SRT_GROUP_WORLD, SRT_GROUP_DP, SRT_GROUP_TP,
                                         SRT_GROUP_DP_CP};
  for (int k = 0; k < 4; ++k) {
    srt_group *g = srt_context_group(w.ctx, kinds[k]);
    int m[16];
    int n = members_of(srt_context_mesh(w.ctx), rank, kinds[k], m);
    check_members(g, m, n, rank);
    check_all_reduce(w.ctx, g, m, n, rank);
    check_gather_scatter(g, m, n, rank);
    check_all_to_all_bcast(g, m, n, rank);
    check_buckets(w.ctx, g, n, rank);
  }
  leave(w);
  _exit(0);
}

// Forks `world` ranks running `body`; returns how many exited 0.
static int run_ranks(int world, void (*body)(int, int, int, int, int), int dp, int tp) {
  int port = test_free_port(), ok = 0;
  pid_t pids[8];
  for (int r = 0; r < world; ++r) {
    pids[r] = fork();
    assert_true(pids[r] >= 0);
    if (!pids[r])
      body(r, world, port, dp, tp);
  }
  for (int r = 0; r < world; ++r) {
    int st = 0;
    waitpid(pids[r], &st, 0);
    ok += WIFEXITED(st) && WEXITSTATUS(st) == 0;
  }
  return ok;
}

static void test_dp2_tp2(void **state) {
  (void)state;
  assert_int_equal(run_ranks(4, rank_main, 2, 2), 4);
}

static void test_dp3(void **state) {
  (void)state;
  assert_int_equal(run_ranks(3, rank_main, 3, 1), 3);
}

static void test_tp2(void **state) {
  (void)state;
  assert_int_equal(run_ranks(2, rank_main, 1, 2), 2);
}

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

// Rank 2 of 3 dies (dp = 3, its sockets closed by the kernel) or stalls
// past the 1 s deadline before an all-reduce on the world; ranks 0 and 1
// fail naming the collective, the group and world rank 2, at once for a
// death and within the deadline + 1 s for a stall. dp == 3 means "dies",
// dp == -3 "stalls" (the mesh is built as dp 3 either way).
static void faulty_rank(int rank, int world, int port, int mode, int tp) {
  world_ctx w = join(rank, world, port, 3, tp, 1);
  if (rank == 2) {
    if (mode < 0)
      sleep(4);
    _exit(0); // dead: no destroy, the sockets close with the process
  }
  float x[1000] = {0};
  double t0 = now_s();
  srt_status s = srt_all_reduce(srt_context_group(w.ctx, SRT_GROUP_WORLD), x, 1000, SRT_F32,
                                SRT_REDUCE_SUM);
  double took = now_s() - t0;
  CHECK(s, "the all-reduce succeeded without rank 2");
  const char *msg = srt_status_message(s);
  fprintf(stderr, "rank %d (%.2f s): %s\n", rank, took, msg);
  CHECK(strstr(msg, "all-reduce on group 'world'") && strstr(msg, "world rank 2"), "%s", msg);
  CHECK(srt_status_code(s) == (mode < 0 ? SRT_DEADLINE_EXCEEDED : SRT_UNAVAILABLE), "%s", msg);
  CHECK(took < (mode < 0 ? 2.0 : 0.5), "took %.2f s", took);
  _exit(0);
}

static void test_dead_peer(void **state) {
  (void)state;
  assert_int_equal(run_ranks(3, faulty_rank, 3, 1), 3);
}

static void test_stalled_peer(void **state) {
  (void)state;
  assert_int_equal(run_ranks(3, faulty_rank, -3, 1), 3);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_dp2_tp2),   cmocka_unit_test(test_dp3),
      cmocka_unit_test(test_tp2),       cmocka_unit_test(test_dead_peer),
      cmocka_unit_test(test_stalled_peer),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
