// MPI tests of checkpoints on a dp x 2 mesh: every rank loads only its
// slice of a full Hugging Face style file (BF16, F16, F32 tensors, sharded
// on rows, columns, both axes, or replicated) and gets exactly the
// float32 values of that slice; per-rank saves reload bit-identically and
// refuse another rank's file; a consolidated save (rank 0) holds the whole
// tensors bit for bit.
#include "runtime_test_util.h"

#include <math.h>
#include <mpi.h>
#include <stdlib.h>
#include <unistd.h>

#include "shardrt/checkpoint.h"
#include "shardrt/context.h"
#include "shardrt/safetensors.h"
#include "shardrt/safetensors_write.h"

static srt_context *g_ctx;
static char g_dir[64];

static int setup(void **state) {
  (void)state;
  srt_context_options o = srt_context_default_options();
  o.tp = 2;
  srt_status s = srt_context_create(&o, &g_ctx);
  srt_status_free(s);
  if (s)
    return -1;
  if (srt_context_rank(g_ctx) == 0) {
    snprintf(g_dir, sizeof g_dir, "/tmp/shardrt-ckpt-XXXXXX");
    if (!mkdtemp(g_dir))
      g_dir[0] = 0;
  }
  MPI_Bcast(g_dir, sizeof g_dir, MPI_CHAR, 0, MPI_COMM_WORLD);
  return g_dir[0] ? 0 : -1;
}

static int teardown(void **state) {
  (void)state;
  MPI_Barrier(MPI_COMM_WORLD);
  if (srt_context_rank(g_ctx) == 0) {
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", g_dir);
    if (system(cmd) != 0)
      return -1;
  }
  srt_status s = srt_context_destroy(g_ctx);
  srt_status_free(s);
  return s ? -1 : 0;
}

// binary16 by definition (independent of the library's bit conversion).
static float f16_value(uint16_t h) {
  int e = (h >> 10) & 31, m = h & 1023;
  double v = e == 0 ? ldexp(m, -24) : ldexp(1024 + m, e - 25);
  return (float)((h >> 15) ? -v : v);
}

static float bf16_value(uint16_t b) {
  uint32_t u = (uint32_t)b << 16;
  float f;
  memcpy(&f, &u, 4);
  return f;
}

// The model: four tensors of the full checkpoint, stored as `stored` and
// loaded with `placements`. Element i's stored bits are a function of i.
enum { NT = 4 };
typedef struct spec {
  const char *name;
  srt_dtype stored;
  int ndim;
  int64_t shape[2];
  srt_placement dp, tp;
} spec;

static void specs(spec s[NT], int dp, int tp) {
  s[0] = (spec){"model.embed_tokens.weight", SRT_BF16, 2, {8 * tp, 6},
                srt_replicate(), srt_shard(0)};
  s[1] = (spec){"model.layers.0.mlp.down_proj.weight", SRT_F32, 2, {6, 4 * tp},
                srt_replicate(), srt_shard(1)};
  s[2] = (spec){"model.norm.weight", SRT_F16, 1, {6, 0}, srt_replicate(),
                srt_replicate()};
  s[3] = (spec){"fsdp.weight", SRT_F32, 2, {2 * dp, 3 * tp}, srt_shard(0),
                srt_shard(1)};
}

static int64_t numel(const spec *s) { return s->ndim == 1 ? s->shape[0] : s->shape[0] * s->shape[1]; }

static uint16_t bits16(int t, int64_t i) {
  // Finite, varied patterns: exponent field kept below all-ones.
  uint16_t v = (uint16_t)(0x3000 + (i * 37 + t * 11) % 0x1000);
  return (i % 3 == 1) ? (uint16_t)(v | 0x8000) : v;
}

static float f32_value(int t, int64_t i) { return (float)(i * 0.731 - 5.0) + (float)t; }

// The float32 value of element i of tensor t after loading.
static float expected(const spec *s, int t, int64_t i) {
  return s->stored == SRT_BF16 ? bf16_value(bits16(t, i))
         : s->stored == SRT_F16 ? f16_value(bits16(t, i))
                                : f32_value(t, i);
}

static void write_full(const char *path, const spec s[NT]) {
  void *data[NT];
  srt_safetensors_entry e[NT];
  for (int t = 0; t < NT; ++t) {
    int64_t n = numel(&s[t]);
    data[t] = malloc((size_t)n * srt_dtype_size(s[t].stored));
    for (int64_t i = 0; i < n; ++i)
      if (s[t].stored == SRT_F32)
        ((float *)data[t])[i] = f32_value(t, i);
      else
        ((uint16_t *)data[t])[i] = bits16(t, i);
    e[t] = (srt_safetensors_entry){s[t].name, s[t].stored, s[t].ndim, s[t].shape,
                                   data[t]};
  }
  static const char *const meta[] = {"format", "pt"};
  ASSERT_OK(srt_safetensors_write(path, e, NT, meta, 1));
  for (int t = 0; t < NT; ++t)
    free(data[t]);
}

static void init_tensors(const spec s[NT], srt_tensor out[NT]) {
  for (int t = 0; t < NT; ++t) {
    srt_placement p[2] = {s[t].dp, s[t].tp};
    ASSERT_OK(srt_tensor_init(&out[t], s[t].name, SRT_F32, s[t].ndim, s[t].shape, p,
                              srt_context_mesh(g_ctx)));
    ASSERT_OK(srt_tensor_alloc(&out[t]));
  }
}

static void release(srt_tensor t[NT]) {
  for (int i = 0; i < NT; ++i)
    srt_tensor_release(&t[i]);
}

static void test_load_save(void **state) {
  (void)state;
  const srt_mesh *m = srt_context_mesh(g_ctx);
  int dp = m->shape[SRT_MESH_DP], tp = m->shape[SRT_MESH_TP];
  int rank = srt_context_rank(g_ctx), world = dp * tp;
  int c[SRT_MESH_NDIMS];
  srt_context_coord(g_ctx, c);
  spec s[NT];
  specs(s, dp, tp);
  char full_path[128], cons_path[128], mine[160], other[160];
  snprintf(full_path, sizeof full_path, "%s/full.safetensors", g_dir);
  snprintf(cons_path, sizeof cons_path, "%s/consolidated.safetensors", g_dir);
  if (rank == 0)
    write_full(full_path, s);
  MPI_Barrier(MPI_COMM_WORLD);

  // 1. Slice loading: this rank's box, computed here by hand.
  srt_safetensors *file;
  ASSERT_OK(srt_safetensors_open(full_path, &file));
  srt_tensor a[NT];
  init_tensors(s, a);
  for (int t = 0; t < NT; ++t) {
    ASSERT_OK(srt_checkpoint_load_shard(file, m, c, &a[t]));
    int64_t lo[2] = {0, 0}, len[2] = {s[t].shape[0], s[t].ndim == 2 ? s[t].shape[1] : 1};
    srt_placement p[2] = {s[t].dp, s[t].tp};
    for (int ax = 0; ax < 2; ++ax)
      if (p[ax].kind == SRT_SHARD) {
        len[p[ax].dim] /= m->shape[ax];
        lo[p[ax].dim] += c[ax] * len[p[ax].dim];
      }
    const float *x = a[t].data;
    int64_t cols = s[t].ndim == 2 ? s[t].shape[1] : 1;
    for (int64_t i = 0, q = 0; i < len[0]; ++i)
      for (int64_t j = 0; j < len[1]; ++j, ++q) {
        float want = expected(&s[t], t, (lo[0] + i) * cols + lo[1] + j);
        if (memcmp(&x[q], &want, 4) != 0)
          fail_msg("'%s' local %lld: %.9g, expected %.9g", s[t].name, (long long)q,
                   x[q], want);
      }
  }
  // Errors: a missing tensor, a shape that does not match.
  srt_tensor bad;
  ASSERT_OK(srt_tensor_init(&bad, "lm_head.weight", SRT_F32, 1, (int64_t[]){4},
                            (srt_placement[]){srt_replicate(), srt_replicate()}, m));
  ASSERT_OK(srt_tensor_alloc(&bad));
  ASSERT_ERROR(srt_checkpoint_load_shard(file, m, c, &bad), SRT_NOT_FOUND,
               "lm_head.weight");
  bad.name = "model.norm.weight";
  bad.global_shape[0] = bad.local_shape[0] = 4;
  ASSERT_ERROR(srt_checkpoint_load_shard(file, m, c, &bad), SRT_INVALID_ARGUMENT,
               "has shape [6], expected the global shape [4]");
  srt_tensor_release(&bad);
  srt_safetensors_close(file);

  // 2. Per-rank save, reload bit-identical; another rank's file refused.
  char prefix[100];
  snprintf(prefix, sizeof prefix, "%s/step10", g_dir);
  ASSERT_OK(srt_checkpoint_shard_path(mine, sizeof mine, prefix, rank, world));
  ASSERT_OK(srt_checkpoint_shard_path(other, sizeof other, prefix, (rank + 1) % world,
                                      world));
  ASSERT_OK(srt_checkpoint_save_local(mine, m, c, a, NT));
  MPI_Barrier(MPI_COMM_WORLD);
  srt_tensor b[NT];
  init_tensors(s, b);
  ASSERT_OK(srt_safetensors_open(mine, &file));
  const char *desc = srt_safetensors_metadata(file, "shardrt.tensor.fsdp.weight");
  char want_desc[64];
  snprintf(want_desc, sizeof want_desc, "[%d, %d] dp=Shard(0) tp=Shard(1)", 2 * dp,
           3 * tp);
  assert_non_null(desc);
  assert_string_equal(desc, want_desc);
  for (int t = 0; t < NT; ++t) {
    ASSERT_OK(srt_checkpoint_load_local(file, m, c, &b[t]));
    assert_memory_equal(b[t].data, a[t].data, srt_tensor_local_bytes(&a[t]));
  }
  srt_safetensors_close(file);
  ASSERT_OK(srt_safetensors_open(other, &file));
  ASSERT_ERROR(srt_checkpoint_load_local(file, m, c, &b[0]), SRT_FAILED_PRECONDITION,
               "holds the shards of mesh");
  srt_safetensors_close(file);
  release(b);

  // 3. Consolidated save: whole tensors, F32, bit for bit.
  ASSERT_OK(srt_checkpoint_save_consolidated(g_ctx, cons_path, a, NT));
  ASSERT_OK(srt_safetensors_open(cons_path, &file)); // every rank can read it now
  for (int t = 0; t < NT; ++t) {
    const srt_tensor_info *in;
    ASSERT_OK(srt_safetensors_find(file, s[t].name, &in));
    assert_int_equal(in->dtype, SRT_F32);
    assert_int_equal(in->rank, s[t].ndim);
    for (int64_t i = 0; i < numel(&s[t]); ++i) {
      float got, want = expected(&s[t], t, i);
      memcpy(&got, (const char *)in->data + 4 * i, 4);
      if (memcmp(&got, &want, 4) != 0)
        fail_msg("consolidated '%s'[%lld] = %.9g, expected %.9g", s[t].name,
                 (long long)i, got, want);
    }
  }
  srt_safetensors_close(file);
  release(a);
}

// One tensor and `meta` (alternating keys and values) written to a file of
// this rank, reopened, and its training metadata read.
static srt_status read_meta(const char *const *meta, size_t n, srt_checkpoint_meta *out,
                            srt_safetensors **file) {
  char path[128];
  snprintf(path, sizeof path, "%s/meta-%d.safetensors", g_dir, srt_context_rank(g_ctx));
  float x = 1;
  int64_t shape[1] = {1};
  srt_safetensors_entry e = {"w", SRT_F32, 1, shape, &x};
  srt_status s = srt_safetensors_write(path, &e, 1, meta, n);
  assert_null(s);
  s = srt_safetensors_open(path, file);
  assert_null(s);
  return srt_checkpoint_read_meta(*file, out);
}

// Step counts are digits only; the optimizer file is named only with both
// step counts and only as a plain file name.
static void test_read_meta(void **state) {
  (void)state;
  struct {
    const char *step, *optim, *want; // want: NULL accepted, else message text
    const char *adam;                // NULL: "3"
  } cases[] = {
      {"7", "o.safetensors", NULL, NULL},
      {"3", NULL, NULL, NULL},
      {NULL, NULL, NULL, NULL},
      {"0007", NULL, NULL, NULL},
      {"1125899906842624", NULL, NULL, NULL}, // 2^50, the largest
      {NULL, "o.safetensors", "metadata shardrt.step is missing", NULL},
      {" 7", "o.safetensors", "shardrt.step is not a step count in [0, 1125899906842624]: ' 7'",
       NULL},
      {"+7", NULL, "not a step count in [0, 1125899906842624]: '+7'", NULL},
      {"-1", NULL, "not a step count in [0, 1125899906842624]: '-1'", NULL},
      {"7x", NULL, "not a step count in [0, 1125899906842624]: '7x'", NULL},
      {"1125899906842625", NULL, "not a step count", NULL},
      {"99999999999999999999", NULL, "not a step count", NULL},
      {"2", NULL, "shardrt.adam_step 3 is above shardrt.step 2", NULL},
      {"7", NULL, "shardrt.adam_step is not a step count", "x"},
      {"7", "../o.safetensors", "shardrt.optimizer '../o.safetensors' is not a file name", NULL},
      {"7", "/etc/passwd", "'/etc/passwd' is not a file name", NULL},
      {"7", "..", "'..' is not a file name", NULL},
      {"7", "", "'' is not a file name", NULL},
  };
  for (size_t i = 0; i < sizeof cases / sizeof *cases; ++i) {
    const char *meta[6];
    size_t n = 0;
    if (cases[i].step) {
      meta[2 * n] = "shardrt.step", meta[2 * n + 1] = cases[i].step, ++n;
      meta[2 * n] = "shardrt.adam_step", meta[2 * n + 1] = cases[i].adam ? cases[i].adam : "3";
      ++n;
    }
    if (cases[i].optim)
      meta[2 * n] = "shardrt.optimizer", meta[2 * n + 1] = cases[i].optim, ++n;
    srt_checkpoint_meta m;
    srt_safetensors *file = NULL;
    srt_status s = read_meta(meta, n, &m, &file);
    if (!cases[i].want) {
      assert_null(s);
      assert_int_equal(m.step, cases[i].step ? atoll(cases[i].step) : -1);
      assert_int_equal(m.adam_step, cases[i].step ? 3 : -1);
      if (cases[i].optim)
        assert_string_equal(m.optimizer, cases[i].optim);
      else
        assert_null(m.optimizer);
    } else {
      assert_non_null(s);
      if (!strstr(srt_status_message(s), cases[i].want))
        fail_msg("case %zu: '%s' lacks '%s'", i, srt_status_message(s), cases[i].want);
      srt_status_free(s);
    }
    srt_safetensors_close(file);
  }
}

int main(void) {
  MPI_Init(NULL, NULL);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_load_save),
      cmocka_unit_test(test_read_meta),
  };
  int failed = cmocka_run_group_tests(tests, setup, teardown);
  MPI_Finalize();
  return failed;
}
