// Unit tests of the atomic safetensors writer: write then read back (with
// the project's reader) bit-identical; a crash in the middle of a save (a
// child process killed with SIGKILL after writing part of the temporary
// file) leaves the previous file readable and identical; the next save
// succeeds beside the stale temporary; two writers of one path at once each
// replace the file whole; failures before the rename (missing
// tensors at commit, an unwritable directory) leave the previous file alone.
#include "runtime_test_util.h"

#include <dirent.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "shardrt/safetensors.h"
#include "shardrt/safetensors_write.h"

typedef struct fixture {
  char dir[64];
  char path[128];
  char tmp[160]; // "<path>.tmp": the fixed name writers once staged in
} fixture;

// How many of the writer's temporaries ("model.safetensors.tmp.XXXXXX")
// are in `dir`.
static int temporaries(const char *dir) {
  DIR *d = opendir(dir);
  int n = 0;
  for (struct dirent *e; d && (e = readdir(d));)
    n += !strncmp(e->d_name, "model.safetensors.tmp.", 22) && strlen(e->d_name) == 28;
  if (d)
    closedir(d);
  return n;
}

// Removes the writer's temporaries of `dir`.
static void remove_temporaries(const char *dir) {
  DIR *d = opendir(dir);
  char p[400];
  for (struct dirent *e; d && (e = readdir(d));)
    if (!strncmp(e->d_name, "model.safetensors.tmp.", 22)) {
      snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
      unlink(p);
    }
  if (d)
    closedir(d);
}

static int setup(void **state) {
  fixture *f = calloc(1, sizeof *f);
  snprintf(f->dir, sizeof f->dir, "/tmp/shardrt-st-XXXXXX");
  if (!mkdtemp(f->dir))
    return -1;
  snprintf(f->path, sizeof f->path, "%s/model.safetensors", f->dir);
  snprintf(f->tmp, sizeof f->tmp, "%s.tmp", f->path);
  *state = f;
  return 0;
}

static int teardown(void **state) {
  fixture *f = *state;
  remove_temporaries(f->dir);
  unlink(f->tmp);
  unlink(f->path);
  rmdir(f->dir);
  free(f);
  return 0;
}

// Two tensors whose contents depend on `version`: an F32 [3, 5] and a
// BF16 [7] (odd byte count, so the F32 after it would be unaligned if the
// writer did not lay out in order), plus a scalar I64.
typedef struct model {
  float w[15];
  uint16_t b[7];
  int64_t step;
  srt_safetensors_entry e[3];
} model;

static const int64_t kShapeW[2] = {3, 5}, kShapeB[1] = {7};

static void make_model(model *m, int version) {
  for (int i = 0; i < 15; ++i)
    m->w[i] = (float)(i * 0.37 - 2.0) * (float)version;
  for (int i = 0; i < 7; ++i)
    m->b[i] = (uint16_t)(0x3f80 + 3 * i + version);
  m->step = 1000 + version;
  m->e[0] = (srt_safetensors_entry){"model.w", SRT_F32, 2, kShapeW, m->w};
  m->e[1] = (srt_safetensors_entry){"model.b", SRT_BF16, 1, kShapeB, m->b};
  m->e[2] = (srt_safetensors_entry){"step", SRT_I64, 0, NULL, &m->step};
}

// Opens `path` with the reader and compares every tensor's bytes to `m`.
static void check_file(const char *path, const model *m) {
  srt_safetensors *f;
  ASSERT_OK(srt_safetensors_open(path, &f));
  assert_int_equal(srt_safetensors_count(f), 3);
  for (int i = 0; i < 3; ++i) {
    const srt_tensor_info *t;
    ASSERT_OK(srt_safetensors_find(f, m->e[i].name, &t));
    assert_int_equal(t->dtype, m->e[i].dtype);
    assert_int_equal(t->rank, m->e[i].ndim);
    for (int d = 0; d < t->rank; ++d)
      assert_int_equal(t->shape[d], m->e[i].shape[d]);
    size_t bytes = srt_dtype_size(t->dtype);
    for (int d = 0; d < t->rank; ++d)
      bytes *= (size_t)t->shape[d];
    assert_int_equal(t->nbytes, bytes);
    assert_memory_equal(t->data, m->e[i].data, bytes);
  }
  const char *fmt = srt_safetensors_metadata(f, "format");
  assert_non_null(fmt);
  assert_string_equal(fmt, "pt");
  srt_safetensors_close(f);
}

static const char *const kMeta[] = {"format", "pt"};

static void test_round_trip(void **state) {
  fixture *f = *state;
  model m;
  make_model(&m, 1);
  ASSERT_OK(srt_safetensors_write(f->path, m.e, 3, kMeta, 1));
  check_file(f->path, &m);
  assert_int_equal(temporaries(f->dir), 0); // renamed away
  // Made as a plain create makes files: 0666 less the umask (mkstemp's
  // 0600 would hide a checkpoint from the group that shares it).
  mode_t mask = umask(022);
  umask(mask);
  struct stat st;
  assert_int_equal(stat(f->path, &st), 0);
  assert_int_equal(st.st_mode & 0777, 0666 & ~mask);
  // The data section starts 8-byte aligned (header padded with spaces).
  FILE *fp = fopen(f->path, "rb");
  unsigned char len8[8];
  assert_int_equal(fread(len8, 1, 8, fp), 8);
  fclose(fp);
  assert_int_equal(len8[0] % 8, 0);
}

static void test_crash_mid_save_keeps_previous(void **state) {
  fixture *f = *state;
  model v1, v2;
  make_model(&v1, 1);
  make_model(&v2, 2);
  ASSERT_OK(srt_safetensors_write(f->path, v1.e, 3, kMeta, 1));
  fflush(NULL);
  pid_t pid = fork();
  assert_true(pid >= 0);
  if (pid == 0) {
    // The crashing saver: a 1 MiB tensor (more than stdio buffers, so the
    // bytes reach the file), then killed before the other three.
    static float big[1 << 18];
    static const int64_t big_shape[1] = {1 << 18};
    srt_safetensors_entry e[4] = {{"big", SRT_F32, 1, big_shape, big},
                                  v2.e[0], v2.e[1], v2.e[2]};
    srt_safetensors_writer *w;
    if (srt_safetensors_writer_begin(f->path, e, 4, kMeta, 1, &w))
      _exit(2);
    if (srt_safetensors_writer_put(w, big))
      _exit(3);
    raise(SIGKILL);
    _exit(4);
  }
  int status;
  assert_int_equal(waitpid(pid, &status, 0), pid);
  assert_true(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
  // The crash left a partial temporary file; the checkpoint is untouched.
  assert_int_equal(temporaries(f->dir), 1);
  check_file(f->path, &v1);
  // A later save succeeds beside the stale temporary file, in one of its
  // own: the crashed writer's is not reused (it could still be open).
  ASSERT_OK(srt_safetensors_write(f->path, v2.e, 3, kMeta, 1));
  check_file(f->path, &v2);
  assert_int_equal(temporaries(f->dir), 1);
}

static void test_failure_before_rename_keeps_previous(void **state) {
  fixture *f = *state;
  model v1, v3;
  make_model(&v1, 1);
  make_model(&v3, 3);
  ASSERT_OK(srt_safetensors_write(f->path, v1.e, 3, kMeta, 1));
  // Commit with a tensor missing: refused before the rename.
  srt_safetensors_writer *w;
  ASSERT_OK(srt_safetensors_writer_begin(f->path, v3.e, 3, kMeta, 1, &w));
  ASSERT_OK(srt_safetensors_writer_put(w, v3.w));
  ASSERT_ERROR(srt_safetensors_writer_commit(w), SRT_FAILED_PRECONDITION,
               "committed after 1 of 3 tensors");
  assert_int_equal(temporaries(f->dir), 0); // cleaned up
  check_file(f->path, &v1);
  // Abort in the middle.
  ASSERT_OK(srt_safetensors_writer_begin(f->path, v3.e, 3, kMeta, 1, &w));
  srt_safetensors_writer_abort(w);
  assert_int_equal(temporaries(f->dir), 0);
  check_file(f->path, &v1);
  // Two writers of one path at once (two jobs): each has a temporary of its
  // own, so the file in place is one writer's whole file, never a mix.
  srt_safetensors_writer *w2;
  ASSERT_OK(srt_safetensors_writer_begin(f->path, v3.e, 3, kMeta, 1, &w));
  ASSERT_OK(srt_safetensors_writer_begin(f->path, v1.e, 3, kMeta, 1, &w2));
  assert_int_equal(temporaries(f->dir), 2);
  for (int i = 0; i < 3; ++i) {
    ASSERT_OK(srt_safetensors_writer_put(w, v3.e[i].data));
    ASSERT_OK(srt_safetensors_writer_put(w2, v1.e[i].data));
  }
  ASSERT_OK(srt_safetensors_writer_commit(w2));
  check_file(f->path, &v1);
  ASSERT_OK(srt_safetensors_writer_commit(w));
  check_file(f->path, &v3);
  assert_int_equal(temporaries(f->dir), 0);
  // A directory named "<path>.tmp" (once the writer's one temporary name)
  // is in nobody's way.
  assert_int_equal(mkdir(f->tmp, 0700), 0);
  ASSERT_OK(srt_safetensors_write(f->path, v1.e, 3, kMeta, 1));
  rmdir(f->tmp);
  check_file(f->path, &v1);
  // A directory that does not exist.
  char missing[200];
  snprintf(missing, sizeof missing, "%s/no/such/dir.safetensors", f->dir);
  ASSERT_ERROR(srt_safetensors_write(missing, v3.e, 3, kMeta, 1), SRT_IO,
               "No such file or directory");
}

static void test_bad_entries(void **state) {
  fixture *f = *state;
  model m;
  make_model(&m, 1);
  srt_safetensors_entry e[2] = {m.e[0], m.e[0]};
  ASSERT_ERROR(srt_safetensors_write(f->path, e, 2, NULL, 0), SRT_INVALID_ARGUMENT,
               "duplicate name 'model.w'");
  e[1].name = "__metadata__";
  ASSERT_ERROR(srt_safetensors_write(f->path, e, 2, NULL, 0), SRT_INVALID_ARGUMENT,
               "reserved");
  const int64_t neg[1] = {-1};
  e[1] = (srt_safetensors_entry){"x", SRT_F32, 1, neg, m.w};
  ASSERT_ERROR(srt_safetensors_write(f->path, e, 2, NULL, 0), SRT_INVALID_ARGUMENT,
               "tensor 'x' dim 0 has size -1");
  assert_int_equal(temporaries(f->dir), 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(test_round_trip, setup, teardown),
      cmocka_unit_test_setup_teardown(test_crash_mid_save_keeps_previous, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(test_failure_before_rename_keeps_previous,
                                      setup, teardown),
      cmocka_unit_test_setup_teardown(test_bad_entries, setup, teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
