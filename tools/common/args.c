// Strict parsing of the tools' command-line values (args.h), on the reading
// they share with the training driver (shardrt/args.h).
#include "args.h"

#include "shardrt/args.h"

#include <ctype.h>
#include <stdio.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

bool tool_parse_count(const char *tool, const char *flag, const char *v, int64_t max,
                      int64_t *out) {
  int64_t x = 0;
  // Digits only: no sign, no spaces, nothing after, no overflow.
  if (!isdigit((unsigned char)v[0]) || srt_args_int(v, &x) != SRT_ARGS_OK || x < 1 ||
      x > max) {
    fprintf(stderr, "%s: %s expects an integer in [1, %lld], got '%s'\n", tool, flag,
            (long long)max, v);
    return false;
  }
  *out = x;
  return true;
}

bool tool_seen_once(tool_seen *seen, const char *tool, const char *const *flags,
                    const char *arg) {
  int i = srt_args_find(flags, 64, arg);
  if (i < 0 || seen->count[i]++ == 0)
    return true;
  fprintf(stderr, "%s: %s given twice (a flag takes one value)\n", tool, arg);
  return false;
}

bool tool_check_path(const char *tool, const char *what, const char *path) {
  size_t n = strlen(path);
  if (n == 0)
    fprintf(stderr, "%s: %s: empty path\n", tool, what);
  else if (n >= PATH_MAX)
    fprintf(stderr, "%s: %s: a path of %zu bytes is longer than the system allows "
                    "(PATH_MAX %d)\n",
            tool, what, n, PATH_MAX);
  return n > 0 && n < PATH_MAX;
}
