// What an input file is, not how it is spelled (issue 39): ranks compare
// the --data, --eval-data, --batch-file and --load each of them reads, and
// one file named relative on one rank and absolute on another is the same
// input, while two files of one name under two working directories are not.
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "train_internal.h"

enum {
  WHOLE_MAX = 64 << 20, // hashed whole up to this size
  EDGE = 1 << 20,       // larger: the first and last MiB (headers: counts, CRCs, ids)
  WINDOWS = 62,         // and this many windows spread over the rest
  WINDOW = 64 << 10,
};

uint64_t train_fnv1a(uint64_t h, const void *data, size_t n) {
  const unsigned char *b = data;
  for (size_t i = 0; i < n; ++i)
    h = (h ^ b[i]) * 0x100000001b3ull;
  return h;
}

static const uint64_t kBasis = TRAIN_FNV1A_BASIS;

// Hashes `n` bytes of `fd` from `off` into *h. Returns 0, or an errno.
static int hash_range(int fd, int64_t off, int64_t n, uint64_t *h) {
  static unsigned char buf[1 << 16];
  while (n > 0) {
    ssize_t got = pread(fd, buf, (size_t)(n < (int64_t)sizeof buf ? n : (int64_t)sizeof buf), off);
    if (got < 0 && errno == EINTR)
      continue;
    if (got <= 0)
      return got < 0 ? errno : EIO; // shorter than stat said: changed under us
    *h = train_fnv1a(*h, buf, (size_t)got);
    off += got;
    n -= got;
  }
  return 0;
}

// The digest of regular file `path` of `size` bytes: all of it up to
// WHOLE_MAX, else its edges and WINDOWS windows. Returns 0, or an errno.
static int file_digest(const char *path, int64_t size, uint64_t *h) {
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return errno;
  *h = train_fnv1a(kBasis, &size, sizeof size);
  int err = 0;
  if (size <= WHOLE_MAX) {
    err = hash_range(fd, 0, size, h);
  } else {
    err = hash_range(fd, 0, EDGE, h);
    for (int i = 1; i <= WINDOWS && !err; ++i)
      err = hash_range(fd, EDGE + (size - 2 * EDGE - WINDOW) / (WINDOWS + 1) * i, WINDOW, h);
    if (!err)
      err = hash_range(fd, size - EDGE, EDGE, h);
  }
  close(fd);
  return err;
}

static int ends_with(const char *s, const char *tail) {
  size_t a = strlen(s), b = strlen(tail);
  return a >= b && !strcmp(s + a - b, tail);
}

// What a checkpoint folder's loader reads: its .safetensors and .json files.
static int checkpoint_file(const struct dirent *e) {
  return ends_with(e->d_name, ".safetensors") || ends_with(e->d_name, ".json");
}

// The digest of folder `path`: each such regular file's name and digest in
// name order; *files and *bytes count them. Returns 0, or an errno.
static int folder_digest(const char *path, uint64_t *h, int *files, int64_t *bytes) {
  struct dirent **list = NULL;
  int n = scandir(path, &list, checkpoint_file, alphasort);
  if (n < 0)
    return errno;
  int err = 0;
  *h = kBasis;
  for (int i = 0; i < n; ++i) {
    char full[4200];
    struct stat st;
    uint64_t d = 0;
    if (!err && snprintf(full, sizeof full, "%s/%s", path, list[i]->d_name) < (int)sizeof full &&
        stat(full, &st) == 0 && S_ISREG(st.st_mode)) {
      err = file_digest(full, (int64_t)st.st_size, &d);
      *h = train_fnv1a(train_fnv1a(*h, list[i]->d_name, strlen(list[i]->d_name) + 1), &d, sizeof d);
      ++*files;
      *bytes += (int64_t)st.st_size;
    }
    free(list[i]);
  }
  free(list);
  return err;
}

uint64_t train_input_identity(const char *path, char *text, size_t size) {
  // The path as shown: its last 100 bytes (the digest must fit the text).
  size_t len = strlen(path);
  char shown[128];
  snprintf(shown, sizeof shown, "'%s%s'", len > 100 ? "..." : "", len > 100 ? path + len - 100 : path);
  struct stat st;
  uint64_t h = 0;
  int err = stat(path, &st) != 0 ? errno : 0;
  if (!err && S_ISREG(st.st_mode)) {
    err = file_digest(path, (int64_t)st.st_size, &h);
    if (!err)
      snprintf(text, size, "%s (%lld bytes, %scontent %016llx)", shown, (long long)st.st_size,
               st.st_size > WHOLE_MAX ? "sampled " : "", (unsigned long long)h);
  } else if (!err && S_ISDIR(st.st_mode)) {
    int files = 0;
    int64_t bytes = 0;
    err = folder_digest(path, &h, &files, &bytes);
    if (!err)
      snprintf(text, size, "%s (folder: %d checkpoint files, %lld bytes, content %016llx)",
               shown, files, (long long)bytes, (unsigned long long)h);
  } else if (!err) { // a FIFO or a device: reading it would consume it; its name decides
    h = train_fnv1a(train_fnv1a(kBasis, "name:", 5), path, len);
    snprintf(text, size, "%s (not a regular file: compared by name)", shown);
  }
  if (err) { // the same on every rank is agreement: the load then says why
    snprintf(text, size, "%s (cannot read: %s)", shown, strerror(err));
    const char *why = strerror(err);
    h = train_fnv1a(train_fnv1a(kBasis, "error:", 6), why, strlen(why));
  }
  return h ? h : 1;
}
