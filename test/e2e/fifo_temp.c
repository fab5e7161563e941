// LD_PRELOAD shim for checkpoint.sh's killed saves: writers stage in a
// temporary that mkstemp names at random, so a test cannot put a FIFO at
// its path beforehand. With SHARD_TEST_FIFO_TEMP=PREFIX set, a mkstemp
// whose template's file name starts with PREFIX gets "fifo00" for its X's
// and opens the FIFO the test made there (read-write: no wait for a
// reader); every other template, or a missing FIFO, takes the real
// mkstemp. The writer then blocks in its write once the pipe is full, and
// the test kills it there.
#define _GNU_SOURCE
#include <dlfcn.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int mkstemp(char *template) {
  const char *prefix = getenv("SHARD_TEST_FIFO_TEMP");
  const char *slash = strrchr(template, '/');
  const char *name = slash ? slash + 1 : template;
  size_t n = strlen(template);
  if (prefix && *prefix && !strncmp(name, prefix, strlen(prefix)) && n >= 6 &&
      !strcmp(template + n - 6, "XXXXXX")) {
    char saved[7];
    memcpy(saved, template + n - 6, 7);
    memcpy(template + n - 6, "fifo00", 6);
    struct stat st;
    if (stat(template, &st) == 0 && S_ISFIFO(st.st_mode))
      return open(template, O_RDWR | O_CLOEXEC);
    memcpy(template + n - 6, saved, 7);
  }
  int (*real)(char *) = (int (*)(char *))dlsym(RTLD_NEXT, "mkstemp");
  return real(template);
}
