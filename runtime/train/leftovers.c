// Leftovers of a killed run (issue 44), removed at the start of the next
// run that saves to the same --save or --export path. What makes them a
// dead run's and never a live job's: this run holds the path's lock
// (train_lock, taken just before), which any run writing there holds for
// as long as it lives, so no live run of this driver writes these names
// now; and a temporary that some live process holds an flock on (every
// safetensors and whole-file writer locks its temporary while writing) is
// left alone all the same. The --save path's files ("<W>" being the
// checkpoint or one of its --keep-last step files "<stem>-stepN<ext>"):
//   <W>.tmp.XXXXXX, <W>.optim-S-N.tmp.XXXXXX  a writer's temporary;
//   <W>.optim-S-N  an optimizer file that <W> does not name (or no <W>):
//                  a save killed between its optimizer file and its
//                  weights (the commit point), or before it removed the
//                  previous one; nothing can load it.
// The optimizer file of the --load checkpoint always stays. --export's
// staging folder "<DIR>.partial" goes too (train_export_drop_staging).
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "shardrt/checkpoint.h"
#include "shardrt/output.h"
#include "shardrt/safetensors.h"
#include "run.h"

static const char kExt[] = ".safetensors";

// What was removed, for rank 0's line.
typedef struct removed {
  int n;
  double bytes;
  char names[512];
} removed;

static void note(removed *rm, const char *name, off_t size) {
  size_t used = strlen(rm->names);
  if (rm->n < 4)
    snprintf(rm->names + used, sizeof rm->names - used, "%s'%.100s'", rm->n ? ", " : "", name);
  else if (rm->n == 4)
    snprintf(rm->names + used, sizeof rm->names - used, ", ...");
  rm->n++;
  rm->bytes += (double)size;
}

// The length of the weights file name <W> that `name` starts with, where
// it goes on with '.' (0: not a file of the checkpoint `base`).
static size_t weights_prefix(const char *name, const char *base) {
  size_t n = strlen(base), e = strlen(kExt);
  if (!strncmp(name, base, n) && name[n] == '.')
    return n;
  size_t stem = n > e && !strcmp(base + n - e, kExt) ? n - e : n; // "<stem>-stepN<ext>"
  if (strncmp(name, base, stem) || strncmp(name + stem, "-step", 5))
    return 0;
  size_t d = stem + 5;
  while (name[d] >= '0' && name[d] <= '9')
    ++d;
  if (d == stem + 5 || strncmp(name + d, base + stem, n - stem) || name[d + n - stem] != '.')
    return 0;
  return d + n - stem;
}

// Whether `s` is ".optim-<digits>-<digits>" up to `end`.
static bool is_optim_suffix(const char *s, const char *end) {
  if (strncmp(s, ".optim-", 7))
    return false;
  const char *p = s + 7;
  int dashes = 0, digits = 0;
  for (; p < end; ++p) {
    if (*p == '-' && digits && !dashes)
      dashes = 1, digits = 0;
    else if (*p >= '0' && *p <= '9')
      ++digits;
    else
      return false;
  }
  return dashes == 1 && digits > 0;
}

// Whether `rest` (what follows <W>) is a writer's temporary: optionally an
// optimizer suffix, then SRT_OUTPUT_TEMP_SUFFIX with its X's filled.
static bool is_temp_suffix(const char *rest) {
  size_t n = strlen(rest), t = strlen(SRT_OUTPUT_TEMP_SUFFIX);
  if (n < t || strncmp(rest + n - t, ".tmp.", 5))
    return false;
  return n == t || is_optim_suffix(rest, rest + n - t);
}

// Whether some live process holds an flock on `path` (a writer at work).
static bool held(const char *path) {
  int fd = open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0)
    return errno != ENOENT; // cannot look: leave it
  bool busy = flock(fd, LOCK_EX | LOCK_NB) != 0;
  close(fd);
  return busy;
}

// Whether optimizer file `name` (in `dir`) is an orphan: its weights file
// (the first `wlen` bytes of the name) is absent, or readable and names
// another optimizer file. An unreadable one judges nothing.
static bool orphan_optim(const char *dir, const char *name, size_t wlen, const char *loaded) {
  char weights[PATH_MAX + 256], path[PATH_MAX + 256];
  snprintf(weights, sizeof weights, "%s/%.*s", dir, (int)wlen, name);
  snprintf(path, sizeof path, "%s/%s", dir, name);
  if (loaded[0] && srt_same_file(loaded, path))
    return false;
  struct stat st;
  if (lstat(weights, &st) != 0)
    return errno == ENOENT;
  srt_safetensors *f = NULL;
  srt_checkpoint_meta meta;
  srt_status s = srt_safetensors_open(weights, &f);
  if (!s)
    s = srt_checkpoint_read_meta(f, &meta);
  bool orphan = !s && (!meta.optimizer || strcmp(meta.optimizer, name) != 0);
  srt_status_free(s);
  if (f)
    srt_safetensors_close(f);
  return orphan;
}

// Removes the leftovers of checkpoint `dest` (the file --save replaces).
static void clear_checkpoint(const char *dest, const char *loaded, removed *rm) {
  char dir[PATH_MAX];
  const char *slash = strrchr(dest, '/'), *base = slash ? slash + 1 : dest;
  snprintf(dir, sizeof dir, "%.*s", slash ? (int)(slash - dest) + (slash == dest) : 1,
           slash ? dest : ".");
  DIR *d = opendir(dir);
  if (!d)
    return;
  for (struct dirent *e; (e = readdir(d));) {
    size_t w = weights_prefix(e->d_name, base);
    const char *rest = e->d_name + w;
    bool temp = w && is_temp_suffix(rest);
    bool optim = w && !temp && is_optim_suffix(rest, rest + strlen(rest));
    char path[PATH_MAX + 256];
    struct stat st;
    if ((!temp && !optim) || snprintf(path, sizeof path, "%s/%s", dir, e->d_name) >=
                                 (int)sizeof path || lstat(path, &st) != 0 ||
        !S_ISREG(st.st_mode) || held(path))
      continue;
    if ((temp || orphan_optim(dir, e->d_name, w, loaded)) && unlink(path) == 0)
      note(rm, e->d_name, st.st_size);
  }
  closedir(d);
}

int train_setup_leftovers(train_run *r) {
  const train_options *o = &r->o;
  removed rm = {0};
  if (r->rank == 0 && r->save_lock >= 0) { // the lock: our path, no live writer
    char *dest = NULL;
    srt_status s = srt_output_destination("--save", o->save, &dest);
    if (!s)
      clear_checkpoint(dest, r->prev_optim, &rm);
    srt_status_free(s);
    free(dest);
  }
  if (r->rank == 0 && r->export_lock >= 0 && train_export_drop_staging(o->export_dir)) {
    char partial[PATH_MAX];
    snprintf(partial, sizeof partial, "%s.partial", o->export_dir);
    note(&rm, partial, 0);
  }
  if (rm.n)
    printf("train: removed %d leftover%s of a killed run (%.3g MB): %s\n", rm.n,
           rm.n == 1 ? "" : "s", rm.bytes / 1e6, rm.names);
  fflush(stdout);
  return 0;
}
