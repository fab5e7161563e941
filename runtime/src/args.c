// Strict reading of command-line flags and values (shardrt/args.h).
#include "shardrt/args.h"

#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

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

int srt_args_find(const char *const *flags, int n, const char *arg) {
  for (int i = 0; i < n && flags[i]; ++i)
    if (spells(flags[i], arg))
      return i;
  return -1;
}

const char *srt_args_attached(const char *arg) {
  const char *eq = !strncmp(arg, "--", 2) ? strchr(arg, '=') : NULL;
  return eq ? eq + 1 : NULL;
}

srt_args_error srt_args_int(const char *v, int64_t *out) {
  bool digits = isdigit((unsigned char)v[0]) || (v[0] == '-' && isdigit((unsigned char)v[1]));
  if (!digits)
    return SRT_ARGS_MALFORMED;
  char *end;
  errno = 0;
  long long x = strtoll(v, &end, 10);
  if (*end)
    return SRT_ARGS_MALFORMED;
  if (errno == ERANGE)
    return SRT_ARGS_RANGE;
  *out = x;
  return SRT_ARGS_OK;
}

srt_args_error srt_args_double(const char *v, double *out) {
  char *end;
  errno = 0;
  double d = strtod(v, &end);
  // strtod alone would skip leading spaces (" 0.1").
  if (!*v || isspace((unsigned char)*v) || *end)
    return SRT_ARGS_MALFORMED;
  if (errno == ERANGE)
    return SRT_ARGS_RANGE;
  *out = d;
  return SRT_ARGS_OK;
}
