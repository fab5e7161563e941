// Private temporary folder of a fuzz target (see fuzz_file.h).
#include "fuzz_file.h"

#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char g_dir[4096];

// Removes the folder's files (flat: targets write no subfolders but a
// mkdir'ed one, emptied too) and the folder.
static void remove_dir(const char *dir) {
  DIR *d = opendir(dir);
  if (!d)
    return;
  struct dirent *e;
  char path[8192];
  while ((e = readdir(d)))
    if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) {
      snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
      if (unlink(path) != 0)
        remove_dir(path);
    }
  closedir(d);
  rmdir(dir);
}

static void cleanup(void) { remove_dir(g_dir); }

const char *fuzz_path(const char *name) {
  if (!g_dir[0]) {
    const char *tmp = getenv("TMPDIR");
    snprintf(g_dir, sizeof g_dir, "%s/shard-fuzz-XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (!mkdtemp(g_dir)) {
      perror("fuzz: mkdtemp");
      abort();
    }
    atexit(cleanup);
  }
  static char path[8192];
  snprintf(path, sizeof path, "%s/%s", g_dir, name);
  return path;
}

const char *fuzz_write_file(const char *name, const uint8_t *data, size_t size) {
  const char *path = fuzz_path(name);
  int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
  if (fd < 0) {
    perror(path);
    abort();
  }
  for (size_t at = 0; at < size;) {
    ssize_t n = write(fd, data + at, size - at);
    if (n <= 0) {
      perror(path);
      abort();
    }
    at += (size_t)n;
  }
  close(fd);
  return path;
}
