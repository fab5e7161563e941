// Where the run's files lie, checked before any step: outputs that an
// export would swap away, and relative paths under a working directory that
// no longer exists. Both used to fail only after training, at the save or
// export.
#define _XOPEN_SOURCE 700 // realpath
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "train_internal.h"

// `path` as an absolute path without links into out[PATH_MAX]: realpath of
// its longest existing prefix, the rest appended as written (a file or a
// folder not created yet). False when it does not fit.
static bool absolute_at(const char *path, char out[PATH_MAX], int links);

static bool absolute(const char *path, char out[PATH_MAX]) { return absolute_at(path, out, 0); }

// A dangling symbolic link `path` (which fopen follows, creating its
// target): the target, relative to the link's folder, into out.
static bool link_target(const char *path, char out[PATH_MAX], int links) {
  char target[PATH_MAX], joined[PATH_MAX];
  ssize_t n = readlink(path, target, sizeof target - 1);
  if (n <= 0 || links >= 40)
    return false;
  target[n] = 0;
  const char *slash = strrchr(path, '/');
  if (target[0] == '/' || !slash)
    snprintf(joined, sizeof joined, "%s", target);
  else if (snprintf(joined, sizeof joined, "%.*s/%s", (int)(slash - path), path, target) >=
           (int)sizeof joined)
    return false;
  return absolute_at(joined, out, links + 1);
}

static bool absolute_at(const char *path, char out[PATH_MAX], int links) {
  struct stat st;
  if (lstat(path, &st) == 0 && S_ISLNK(st.st_mode) && stat(path, &st) != 0)
    return link_target(path, out, links);
  char *real = realpath(path, NULL);
  if (real) {
    bool fits = strlen(real) < PATH_MAX;
    if (fits)
      strcpy(out, real);
    free(real);
    return fits;
  }
  const char *slash = strrchr(path, '/');
  char head[PATH_MAX];
  if (!slash)
    snprintf(head, sizeof head, ".");
  else if (slash == path)
    snprintf(head, sizeof head, "/");
  else if (snprintf(head, sizeof head, "%.*s", (int)(slash - path), path) >= (int)sizeof head)
    return false;
  const char *tail = slash ? slash + 1 : path;
  if (!*tail) // "dir/": the folder itself
    return absolute_at(head, out, links);
  if (!absolute_at(head, out, links))
    return false;
  size_t n = strlen(out);
  return snprintf(out + n, PATH_MAX - n, "%s%s", n > 1 ? "/" : "", tail) < (int)(PATH_MAX - n);
}

// Whether `path` lies inside folder `dir` (both made absolute).
static bool inside(const char *path, const char *dir) {
  char p[PATH_MAX], d[PATH_MAX];
  if (!absolute(path, p) || !absolute(dir, d))
    return false;
  size_t n = strlen(d);
  return !strncmp(p, d, n) && (p[n] == '/' || (n == 1 && d[0] == '/'));
}

// An export swaps a new folder in for DIR whole, staged in DIR.partial: a
// file of the run inside either would be removed with the old folder (a
// checkpoint lost) or make the folder one that no export wrote (refused at
// the first export, after training).
static srt_status check_outside_export(const train_options *o) {
  const char *files[][2] = {{"--metrics", o->metrics}, {"--save", o->save}, {"--dump", o->dump}};
  char partial[PATH_MAX];
  snprintf(partial, sizeof partial, "%s.partial", o->export_dir);
  for (size_t k = 0; k < sizeof files / sizeof *files; ++k) {
    const char *f = files[k][1];
    const char *in = !f ? NULL : inside(f, o->export_dir) ? o->export_dir
                                : inside(f, partial)      ? partial
                                                          : NULL;
    if (in)
      return SRT_ERROR(SRT_INVALID_ARGUMENT,
                       "%s '%s' lies inside the --export folder '%s'%s: every export "
                       "replaces that folder whole, and the file with it; give a path "
                       "outside it",
                       files[k][0], f, o->export_dir, in == partial ? " (its staging folder)" : "");
  }
  return NULL;
}

// getcwd fails with ENOENT once the folder the job started in is removed:
// a relative path then names nothing, and its output could not be written
// when the run ends. Absolute paths still work.
static srt_status check_working_directory(const train_options *o) {
  char cwd[PATH_MAX];
  if (getcwd(cwd, sizeof cwd) || errno != ENOENT)
    return NULL;
  const char *paths[][2] = {{"--data", o->data},       {"--eval-data", o->eval_data},
                            {"--batch-file", o->batch_file}, {"--load", o->load},
                            {"--save", o->save},       {"--dump", o->dump},
                            {"--metrics", o->metrics}, {"--export", o->export_dir}};
  for (size_t k = 0; k < sizeof paths / sizeof *paths; ++k)
    if (paths[k][1] && paths[k][1][0] != '/')
      return SRT_ERROR(SRT_FAILED_PRECONDITION,
                       "%s '%s' is relative, but the working directory this job started in "
                       "has been removed: it could be neither read nor written; cd to an "
                       "existing folder, or give absolute paths",
                       paths[k][0], paths[k][1]);
  return NULL;
}

srt_status train_check_places(const train_options *o) {
  SRT_RETURN_IF_ERROR(check_working_directory(o));
  return o->export_dir ? check_outside_export(o) : NULL;
}
