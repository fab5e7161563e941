// Output kinds and same-file checks (shardrt/output.h).
#include "shardrt/output.h"

#include <errno.h>
#include <string.h>
#include <sys/stat.h>

srt_status srt_output_kind_of(const char *what, const char *path, srt_output_kind *kind) {
  struct stat st;
  *kind = SRT_OUTPUT_FILE;
  if (stat(path, &st) != 0) {
    if (errno == ENOENT)
      return NULL; // a new file (a dangling link's target is created)
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

bool srt_same_file(const char *a, const char *b) {
  struct stat sa, sb;
  return a && b && stat(a, &sa) == 0 && stat(b, &sb) == 0 && sa.st_dev == sb.st_dev &&
         sa.st_ino == sb.st_ino;
}
