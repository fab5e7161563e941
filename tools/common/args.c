// Strict parsing of the drivers' command-line values (args.h).
#include "args.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

bool tool_parse_count(const char *tool, const char *flag, const char *v, int64_t max,
                      int64_t *out) {
  char *end = NULL;
  errno = 0;
  // strtoll alone would take " 5", "+5" and clamp 99999999999999999999.
  long long x = isdigit((unsigned char)v[0]) ? strtoll(v, &end, 10) : 0;
  if (!isdigit((unsigned char)v[0]) || *end || errno == ERANGE || x < 1 || x > max) {
    fprintf(stderr, "%s: %s expects an integer in [1, %lld], got '%s'\n", tool, flag,
            (long long)max, v);
    return false;
  }
  *out = x;
  return true;
}

// Does `arg` (up to its '=', if any) spell one of the
// '|'-separated names of `entry`?
static bool spells(const char *entry, const char *arg) {
  size_t n = strlen(arg);
  const char *eq = arg[0] == '-' ? strchr(arg, '=') : NULL;
  if (eq)
    n = (size_t)(eq - arg);
  for (const char *p = entry; *p;) {
    size_t m = strcspn(p, "|");
    if (m == n && !strncmp(p, arg, n))
      return true;
    if (m == 2 && p[1] != '-' && !strncmp(p, arg, 2) && arg[1] != '-')
      return true; // a short flag with its value attached: "-ofile"
    p += m + (p[m] == '|');
  }
  return false;
}

bool tool_seen_once(tool_seen *seen, const char *tool, const char *const *flags,
                    const char *arg) {
  for (int i = 0; flags[i] && i < 64; ++i)
    if (spells(flags[i], arg)) {
      if (seen->count[i]++ == 0)
        return true;
      fprintf(stderr, "%s: %s given twice (a flag takes one value)\n", tool, arg);
      return false;
    }
  return true;
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
