// Staged outputs for the tools (see output.h).
#include "output.h"

#include "shardrt/output.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

bool tool_check_output(const char *tool, const char *path, const char *input) {
  if (!strcmp(path, "-"))
    return true;
  srt_output_kind kind;
  srt_status s = srt_output_kind_of("output", path, &kind);
  if (!s)
    s = srt_output_check_name("output", path, strlen(".tmp"));
  if (s) {
    fprintf(stderr, "%s: %s\n", tool, srt_status_message(s));
    srt_status_free(s);
    return false;
  }
  if (input && srt_same_file(path, input)) {
    fprintf(stderr, "%s: output '%s' is the input '%s': give another file\n", tool, path,
            input);
    return false;
  }
  return true;
}

bool tool_output_begin(const char *tool, const char *path, tool_output *out) {
  out->path = path;
  out->staged = false;
  srt_output_kind kind = SRT_OUTPUT_FILE;
  if (strcmp(path, "-")) {
    srt_status s = srt_output_kind_of("output", path, &kind);
    if (s) { // tool_check_output ran first; the path changed since
      fprintf(stderr, "%s: %s\n", tool, srt_status_message(s));
      srt_status_free(s);
      return false;
    }
    out->staged = kind == SRT_OUTPUT_FILE;
  }
  char *dest = out->staged ? srt_output_destination(path) : NULL;
  if (out->staged && !dest) {
    fprintf(stderr, "%s: output '%s': out of memory\n", tool, path);
    return false;
  }
  int d = snprintf(out->dest, sizeof out->dest, "%s", dest ? dest : path);
  int n = snprintf(out->target, sizeof out->target, out->staged ? "%s.tmp" : "%s", out->dest);
  free(dest);
  if (d < 0 || (size_t)d >= sizeof out->dest || n < 0 || (size_t)n >= sizeof out->target) {
    fprintf(stderr, "%s: output path '%.200s...' is too long (%zu bytes)\n", tool, path,
            strlen(path));
    return false;
  }
  return true;
}

bool tool_output_finish(const char *tool, tool_output *out, bool ok) {
  if (!out->staged)
    return ok;
  if (ok && rename(out->target, out->dest) != 0) {
    fprintf(stderr, "%s: cannot rename '%s' over '%s': %s\n", tool, out->target, out->dest,
            strerror(errno));
    ok = false;
  }
  if (!ok)
    unlink(out->target); // not remove(): a directory of that name is not ours
  return ok;
}
