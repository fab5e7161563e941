// Staged outputs for the tools (see output.h).
#include "output.h"

#include "shardrt/output.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

// Prints `s` as "<tool>: <message>" and frees it; returns false.
static bool report(const char *tool, srt_status s) {
  fprintf(stderr, "%s: %s\n", tool, srt_status_message(s));
  srt_status_free(s);
  return false;
}

bool tool_check_output(const char *tool, const char *path, const char *input) {
  if (input && srt_same_file(path, input)) { // "-" too: stdout redirected onto the input
    fprintf(stderr, "%s: output '%s' is the input '%s': give another file\n", tool, path,
            input);
    return false;
  }
  if (srt_output_is_stdout(path))
    return true;
  srt_output_kind kind;
  srt_status s = srt_output_kind_of("output", path, &kind);
  if (!s)
    s = srt_output_check_name("output", path, strlen(SRT_OUTPUT_TEMP_SUFFIX));
  return s ? report(tool, s) : true;
}

bool tool_output_begin(const char *tool, const char *path, tool_output *out) {
  out->path = path;
  out->staged = false;
  out->to_stdout = srt_output_is_stdout(path);
  char *dest = NULL, *tmp = NULL;
  bool device = true;
  if (!out->to_stdout) { // tool_check_output ran first: an error means the path changed since
    srt_status s = srt_output_stage("output", path, &device, &dest, &tmp);
    if (s)
      return report(tool, s);
    out->staged = !device;
  }
  int d = snprintf(out->dest, sizeof out->dest, "%s", dest ? dest : path);
  int n = snprintf(out->target, sizeof out->target, "%s", tmp ? tmp : path);
  bool fits = d >= 0 && (size_t)d < sizeof out->dest && n >= 0 && (size_t)n < sizeof out->target;
  if (!fits && out->staged)
    unlink(tmp); // srt_output_stage created it
  free(dest);
  free(tmp);
  if (!fits) {
    out->staged = false;
    fprintf(stderr, "%s: output '%.200s...': the file to write has a path of %d bytes, too long\n",
            tool, path, n > d ? n : d);
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
