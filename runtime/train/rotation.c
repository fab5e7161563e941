// --keep-last K: each save of a run goes to its own step-numbered file
// (model.safetensors -> model-step00000100.safetensors) and, after a
// successful save, only the K newest of them up to the step just saved stay
// (so the new one always does), with their optimizer files. Only this run's
// files are judged: those whose weights record its run id ("shardrt.run");
// files of another run with the same stem (another id, none, or unreadable)
// and of later steps are left alone and not counted, and the checkpoint the
// run was loaded from is never removed, as
// torchtitan's keep_latest_k and Megatron's checkpoint retention keep the
// newest ones.
#include <dirent.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "shardrt/output.h"
#include "shardrt/safetensors.h"
#include "train_internal.h"

static const char kExt[] = ".safetensors";

// Splits `save` into directory, stem and extension (".safetensors" or "").
static void split(const char *save, char *dir, size_t dsize, const char **stem, size_t *stem_len,
                  const char **ext) {
  const char *slash = strrchr(save, '/');
  if (slash)
    snprintf(dir, dsize, "%.*s", (int)(slash - save) ? (int)(slash - save) : 1, save);
  else
    snprintf(dir, dsize, ".");
  *stem = slash ? slash + 1 : save;
  size_t n = strlen(*stem), e = strlen(kExt);
  bool has_ext = n > e && !strcmp(*stem + n - e, kExt);
  *stem_len = has_ext ? n - e : n;
  *ext = has_ext ? kExt : "";
}

int train_step_path(const char *save, int64_t step, char *out, size_t size) {
  char dir[4096];
  const char *stem, *ext;
  size_t stem_len;
  split(save, dir, sizeof dir, &stem, &stem_len, &ext);
  int n = snprintf(out, size, "%.*s-step%08" PRId64 "%s", (int)(stem - save + stem_len), save,
                   step, ext);
  return n >= 0 && (size_t)n < size ? 0 : -1;
}

// The step of `name` when it is "<stem>-step<digits><ext>", else -1.
static int64_t step_of(const char *name, const char *stem, size_t stem_len, const char *ext) {
  if (strncmp(name, stem, stem_len) || strncmp(name + stem_len, "-step", 5))
    return -1;
  const char *d = name + stem_len + 5, *end = d;
  while (*end >= '0' && *end <= '9')
    ++end;
  if (end == d || end - d > 18 || strcmp(end, ext))
    return -1;
  return strtoll(d, NULL, 10);
}

static int newest_first(const void *a, const void *b) {
  int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
  return x < y ? 1 : x > y ? -1 : 0;
}

// Removes `path` and every "<path>.optim-*" beside it.
static void remove_checkpoint(const char *dir, const char *path) {
  const char *base = strrchr(path, '/') ? strrchr(path, '/') + 1 : path;
  size_t blen = strlen(base);
  DIR *d = opendir(dir);
  for (struct dirent *e; d && (e = readdir(d));)
    if (!strncmp(e->d_name, base, blen) && !strncmp(e->d_name + blen, ".optim-", 7)) {
      char optim[8192];
      snprintf(optim, sizeof optim, "%s/%s", dir, e->d_name);
      remove(optim);
    }
  if (d)
    closedir(d);
  remove(path);
}

// Whether the checkpoint `path` records run id `run_id` (its header only).
static bool of_run(const char *path, const char *run_id) {
  srt_safetensors *f = NULL;
  srt_status s = srt_safetensors_open(path, &f);
  const char *run = s ? NULL : srt_safetensors_metadata(f, "shardrt.run");
  bool ours = run && !strcmp(run, run_id);
  srt_status_free(s);
  srt_safetensors_close(f);
  return ours;
}

int train_rotate(const char *save, int64_t keep, const char *loaded, int64_t step,
                 const char *run_id, int *foreign) {
  char dir[4096];
  const char *stem, *ext;
  size_t stem_len;
  split(save, dir, sizeof dir, &stem, &stem_len, &ext);
  if (foreign)
    *foreign = 0;
  DIR *d = opendir(dir);
  if (!d)
    return 0;
  int64_t *steps = NULL;
  size_t n = 0, cap = 0;
  for (struct dirent *e; (e = readdir(d));) {
    int64_t s = step_of(e->d_name, stem, stem_len, ext);
    if (s < 0 || s > step) // a later step belongs to another run: not ours to judge
      continue;
    char path[8192];
    if (train_step_path(save, s, path, sizeof path) || !of_run(path, run_id)) {
      if (foreign)
        ++*foreign;
      continue;
    }
    if (n == cap) {
      int64_t *g = realloc(steps, (cap = cap ? 2 * cap : 16) * sizeof *g);
      if (!g)
        break;
      steps = g;
    }
    steps[n++] = s;
  }
  closedir(d);
  if (n)
    qsort(steps, n, sizeof *steps, newest_first);
  int removed = 0;
  for (size_t i = (size_t)keep; i < n; ++i) {
    char path[8192];
    if (train_step_path(save, steps[i], path, sizeof path))
      continue;
    if (loaded && (!strcmp(path, loaded) || srt_same_file(path, loaded)))
      continue; // the run's own starting point stays resumable
    remove_checkpoint(dir, path);
    ++removed;
  }
  free(steps);
  return removed;
}
