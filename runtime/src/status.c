// srt_status: heap-allocated error objects with code, location and message.
#include "shardrt/status.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct srt_status_object {
  srt_code code;
  const char *file;
  int line;
  int rank;            // the world rank a context names (srt_status_annotate), or -1
  const char *message; // the text after the object, or a literal (oom_status)
};

// Returned when allocating a status fails; never freed.
static struct srt_status_object oom_status = {SRT_RESOURCE_EXHAUSTED, __FILE__, __LINE__, -1,
                                              "out of memory"};

srt_status srt_status_make(srt_code code, const char *file, int line,
                           const char *fmt, ...) {
  if (code == SRT_OK)
    return NULL;
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(NULL, 0, fmt, ap);
  va_end(ap);
  if (n < 0)
    n = 0;
  struct srt_status_object *s = malloc(sizeof *s + (size_t)n + 1);
  if (!s)
    return &oom_status;
  s->code = code;
  s->file = file;
  s->line = line;
  s->rank = -1;
  char *text = (char *)(s + 1);
  s->message = text;
  va_start(ap, fmt);
  vsnprintf(text, (size_t)n + 1, fmt, ap);
  va_end(ap);
  return s;
}

srt_status srt_status_annotate(srt_status s, int rank, const char *fmt, ...) {
  if (!s || s == &oom_status || (rank >= 0 && s->rank >= 0))
    return s;
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(NULL, 0, fmt, ap);
  va_end(ap);
  if (n < 0)
    return s;
  size_t old = strlen(s->message);
  struct srt_status_object *a = malloc(sizeof *a + old + (size_t)n + 4);
  if (!a)
    return s;
  *a = *s;
  a->rank = rank >= 0 ? rank : s->rank;
  char *text = (char *)(a + 1);
  a->message = text;
  memcpy(text, s->message, old);
  memcpy(text + old, " (", 2);
  va_start(ap, fmt);
  vsnprintf(text + old + 2, (size_t)n + 1, fmt, ap);
  va_end(ap);
  memcpy(text + old + 2 + n, ")", 2);
  srt_status_free(s);
  return a;
}

int srt_status_rank(srt_status s) { return s ? s->rank : -1; }

srt_code srt_status_code(srt_status s) { return s ? s->code : SRT_OK; }

const char *srt_status_message(srt_status s) { return s ? s->message : ""; }

const char *srt_code_name(srt_code code) {
  static const char *const names[] = {
      "OK", "INVALID_ARGUMENT", "OUT_OF_RANGE", "NOT_FOUND", "DATA_LOSS", "IO",
      "RESOURCE_EXHAUSTED", "FAILED_PRECONDITION", "UNAVAILABLE", "INTERNAL",
      "DEADLINE_EXCEEDED"};
  return (unsigned)code < sizeof names / sizeof *names ? names[code] : "UNKNOWN";
}

const char *srt_status_format(srt_status s, char *buf, unsigned long len) {
  if (!s)
    snprintf(buf, len, "OK");
  else
    snprintf(buf, len, "%s:%d: %s: %s", s->file, s->line, srt_code_name(s->code),
             s->message);
  return buf;
}

void srt_status_free(srt_status s) {
  if (s && s != &oom_status)
    free(s);
}
