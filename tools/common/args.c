// Strict parsing of the drivers' command-line values (args.h).
#include "args.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

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
