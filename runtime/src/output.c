// Output kinds and same-file checks (shardrt/output.h).
#define _XOPEN_SOURCE 700 // realpath
#include "shardrt/output.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
#include <limits.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>

srt_status srt_output_kind_of(const char *what, const char *path, srt_output_kind *kind) {
  struct stat st;
  *kind = SRT_OUTPUT_FILE;
  if (stat(path, &st) != 0) {
    if (errno == ENOENT)
      return NULL; // a new file (a dangling link is replaced by it)
    return SRT_ERROR(SRT_IO, "%s '%s': cannot examine it: %s", what, path, strerror(errno));
  }
  if (S_ISREG(st.st_mode))
    return NULL;
  if (S_ISCHR(st.st_mode)) {
    *kind = SRT_OUTPUT_DEVICE;
    return NULL;
  }
  const char *is = S_ISDIR(st.st_mode)    ? "a directory"
                   : S_ISFIFO(st.st_mode) ? "a FIFO"
                   : S_ISSOCK(st.st_mode) ? "a socket"
                   : S_ISBLK(st.st_mode)  ? "a block device"
                                          : "not a regular file";
  return SRT_ERROR(SRT_INVALID_ARGUMENT,
                   "%s '%s' is %s: give a file to write (or a character device)", what, path,
                   is);
}

// stat(2) of `path`, "-" being the file standard output is open on.
static int stat_output(const char *path, struct stat *st) {
  return strcmp(path, "-") ? stat(path, st) : fstat(STDOUT_FILENO, st);
}

bool srt_same_file(const char *a, const char *b) {
  struct stat sa, sb;
  return a && b && stat_output(a, &sa) == 0 && stat_output(b, &sb) == 0 &&
         sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
}

bool srt_output_is_stdout(const char *path) {
  return !strcmp(path, "-") || srt_same_file(path, "-");
}

srt_status srt_output_check_name(const char *what, const char *path, size_t suffix_bytes) {
  const char *slash = strrchr(path, '/');
  size_t name = strlen(slash ? slash + 1 : path), whole = strlen(path);
  if (name + suffix_bytes > NAME_MAX)
    return SRT_ERROR(SRT_INVALID_ARGUMENT,
                     "%s '%.64s...': its file name has %zu bytes, and with the %zu this output "
                     "appends for the files it writes beside it that passes the system's limit "
                     "of %d (NAME_MAX)",
                     what, path, name, suffix_bytes, NAME_MAX);
  if (whole + suffix_bytes >= PATH_MAX)
    return SRT_ERROR(SRT_INVALID_ARGUMENT,
                     "%s '%.64s...': a path of %zu bytes, with the %zu this output appends, "
                     "passes the system's limit of %d (PATH_MAX)",
                     what, path, whole, suffix_bytes, PATH_MAX);
  return NULL;
}

srt_status srt_output_check_seekable(const char *what, const char *path) {
  struct stat st;
  if (srt_output_is_stdout(path) && !(fstat(STDOUT_FILENO, &st) == 0 && S_ISCHR(st.st_mode)))
    return SRT_ERROR(SRT_INVALID_ARGUMENT,
                     "%s '%s' is standard output, which cannot take this file (it is "
                     "rewritten in place or replaced as a whole): give a file",
                     what, path);
  return NULL;
}

srt_status srt_output_destination(const char *what, const char *path, char **dest) {
  struct stat st;
  *dest = NULL;
  if (lstat(path, &st) == 0 && S_ISLNK(st.st_mode)) {
    if ((*dest = realpath(path, NULL)))
      return NULL;
    int err = errno;
    if (err == ENOMEM)
      return SRT_ERROR(SRT_RESOURCE_EXHAUSTED, "%s '%s': out of memory", what, path);
    // A dangling link is replaced; one that resolves to something realpath
    // cannot name (a deleted file's /proc/self/fd link, a target past
    // PATH_MAX) is refused rather than replaced.
    if (err != ENOENT || stat(path, &st) == 0 || errno != ENOENT)
      return SRT_ERROR(SRT_INVALID_ARGUMENT,
                       "%s '%s': a symbolic link whose target cannot be named: %s", what, path,
                       strerror(err));
  }
  if (!(*dest = strdup(path)))
    return SRT_ERROR(SRT_RESOURCE_EXHAUSTED, "%s '%s': out of memory", what, path);
  return NULL;
}

// Standard output, in place (it may be a pipe or a file opened to append),
// flushed.
static srt_status write_stdout(const char *what, const char *path, const void *data,
                               size_t len) {
  if (fwrite(data, 1, len, stdout) == len && fflush(stdout) == 0)
    return NULL;
  return SRT_ERROR(SRT_IO, "%s '%s' (standard output): write failed: %s", what, path,
                   strerror(errno));
}

// The process's umask, without changing it for a moment (other threads may
// create files meanwhile): /proc/self/status has it since Linux 4.7; only
// without it is it read by setting it back at once.
static mode_t current_umask(void) {
  FILE *f = fopen("/proc/self/status", "re");
  char line[256];
  unsigned mask = 0;
  bool found = false;
  while (f && !found && fgets(line, sizeof line, f))
    found = sscanf(line, "Umask: %o", &mask) == 1;
  if (f)
    fclose(f);
  if (found)
    return (mode_t)mask;
  mode_t m = umask(022);
  umask(m);
  return m;
}

srt_status srt_output_temp(const char *what, const char *dest, char **tmp) {
  size_t n = strlen(dest) + sizeof SRT_OUTPUT_TEMP_SUFFIX;
  if (!(*tmp = malloc(n)))
    return SRT_ERROR(SRT_RESOURCE_EXHAUSTED, "%s '%s': out of memory", what, dest);
  snprintf(*tmp, n, "%s" SRT_OUTPUT_TEMP_SUFFIX, dest);
  int fd = mkstemp(*tmp); // O_CREAT | O_EXCL: a name no other writer holds
  // mkstemp makes it 0600; a plain create makes 0666 less the umask, which
  // is what the file renamed over `dest` has always had.
  int err = fd < 0 ? errno : fchmod(fd, 0666 & ~current_umask()) != 0 ? errno : 0;
  if (fd >= 0 && close(fd) != 0 && !err)
    err = errno;
  if (!err)
    return NULL;
  srt_status s = SRT_ERROR(SRT_IO, "%s '%s': cannot create a temporary '%s': %s", what, dest,
                           *tmp, strerror(err));
  if (fd >= 0)
    unlink(*tmp);
  free(*tmp);
  *tmp = NULL;
  return s;
}

srt_status srt_output_stage(const char *what, const char *path, bool *device, char **dest,
                            char **tmp) {
  *dest = *tmp = NULL;
  srt_output_kind kind;
  SRT_RETURN_IF_ERROR(srt_output_kind_of(what, path, &kind));
  *device = kind == SRT_OUTPUT_DEVICE;
  srt_status s = *device ? NULL : srt_output_destination(what, path, dest);
  if (!s && !*device)
    s = srt_output_check_name(what, *dest, strlen(SRT_OUTPUT_TEMP_SUFFIX));
  if (!s && !*device)
    s = srt_output_temp(what, *dest, tmp);
  if (!s && *device && (!(*dest = strdup(path)) || !(*tmp = strdup(path))))
    s = SRT_ERROR(SRT_RESOURCE_EXHAUSTED, "%s '%s': out of memory", what, path);
  if (s) {
    free(*dest);
    free(*tmp);
    *dest = *tmp = NULL;
  }
  return s;
}

srt_status srt_write_file(const char *what, const char *path, const void *data, size_t len) {
  if (srt_output_is_stdout(path))
    return write_stdout(what, path, data, len);
  bool device;
  char *dest, *tmp;
  SRT_RETURN_IF_ERROR(srt_output_stage(what, path, &device, &dest, &tmp));
  srt_status s = NULL;
  FILE *f = fopen(tmp, "wb"); // our own temporary (or the device): truncated
  if (f && !device) // held while written: a live writer's temporary is left alone
    (void)flock(fileno(f), LOCK_EX | LOCK_NB);
  if (!f) {
    s = SRT_ERROR(SRT_IO, "%s '%s': cannot create '%s': %s", what, path, tmp, strerror(errno));
    if (!device)
      unlink(tmp);
    free(tmp);
    free(dest);
    return s;
  }
  bool ok = fwrite(data, 1, len, f) == len && fflush(f) == 0 && (device || fsync(fileno(f)) == 0);
  int err = errno;
  if (fclose(f) != 0 && ok) {
    ok = false;
    err = errno;
  }
  if (ok && !device && rename(tmp, dest) != 0) {
    ok = false;
    err = errno;
  }
  if (!ok) {
    s = SRT_ERROR(SRT_IO, "%s '%s': write failed: %s", what, path, strerror(err));
    if (!device)
      unlink(tmp);
  }
  free(tmp);
  free(dest);
  return s;
}
