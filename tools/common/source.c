// Reading, splitting and parsing MLIR sources for the drivers.
#include "source.h"


#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

char *tool_read_file(const char *path, size_t max_bytes, size_t *len, char *err,
                     size_t errlen) {
  bool is_stdin = !strcmp(path, "-");
  struct stat st;
  if (!is_stdin && stat(path, &st) != 0) {
    snprintf(err, errlen, "cannot read '%s': %s", path, strerror(errno));
    return NULL;
  }
  if (!is_stdin && !S_ISREG(st.st_mode)) {
    snprintf(err, errlen, "cannot read '%s': it is a %s, not a file%s", path,
             S_ISDIR(st.st_mode)                          ? "directory"
             : S_ISCHR(st.st_mode) || S_ISBLK(st.st_mode) ? "device"
             : S_ISFIFO(st.st_mode)                       ? "FIFO"
                                                          : "socket",
             S_ISFIFO(st.st_mode) ? " (give '-' to read standard input)" : "");
    return NULL;
  }
  if (!is_stdin && S_ISREG(st.st_mode) && (uint64_t)st.st_size > max_bytes) {
    snprintf(err, errlen, "'%s' is %lld bytes, more than the %zu this input may have", path,
             (long long)st.st_size, max_bytes);
    return NULL;
  }
  // O_NONBLOCK: should the path have become a FIFO since the stat, the
  // open does not wait for a writer (fstat then refuses it).
  int fd = is_stdin ? -1 : open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd >= 0 && (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode))) {
    close(fd);
    snprintf(err, errlen, "cannot read '%s': it stopped being a regular file while opened",
             path);
    return NULL;
  }
  FILE *f = is_stdin ? stdin : fd >= 0 ? fdopen(fd, "rb") : NULL;
  if (!f && fd >= 0)
    close(fd);
  if (!f) {
    snprintf(err, errlen, "cannot read '%s': %s", path, strerror(errno));
    return NULL;
  }
  size_t cap = 1 << 16, n = 0;
  char *buf = malloc(cap);
  bool too_big = false;
  while (buf) {
    n += fread(buf + n, 1, cap - n - 1, f);
    if (n + 1 < cap)
      break;
    if (n > max_bytes) {
      too_big = true;
      break;
    }
    char *bigger = realloc(buf, cap * 2);
    if (!bigger) {
      free(buf);
      buf = NULL;
      break;
    }
    buf = bigger;
    cap *= 2;
  }
  int read_error = ferror(f);
  if (f != stdin)
    fclose(f);
  if (!buf || read_error || too_big || n > max_bytes) {
    if (!buf)
      snprintf(err, errlen, "cannot read '%s': out of memory", path);
    else if (read_error)
      snprintf(err, errlen, "cannot read '%s': read error", path);
    else
      snprintf(err, errlen, "'%s' has more than the %zu bytes this input may have", path,
               max_bytes);
    free(buf);
    return NULL;
  }
  buf[n] = '\0';
  *len = n;
  return buf;
}

static const char kWrapOpen[] = "module {";
static const char kSeparator[] = "// -----";

// Is the line starting at `s` (up to `end`) a split marker?
static bool is_separator(const char *s, const char *end) {
  size_t n = sizeof kSeparator - 1;
  if ((size_t)(end - s) < n || memcmp(s, kSeparator, n) != 0)
    return false;
  for (s += n; s < end && *s != '\n'; ++s)
    if (*s != '-' && *s != ' ' && *s != '\r')
      return false;
  return true;
}

// The start of the line after the one starting at `s`, or `end`.
static const char *next_line(const char *s, const char *end) {
  const char *nl = memchr(s, '\n', (size_t)(end - s));
  return nl ? nl + 1 : end;
}

// Is the line [s, e) a top-level alias definition ("#loc3 = loc(...)",
// "!t = ...")? Those must stay outside the wrapper module.
static bool is_alias_line(const char *s, const char *e) {
  if (e - s < 4 || (*s != '#' && *s != '!'))
    return false;
  const char *p = s + 1;
  while (p < e && (isalnum((unsigned char)*p) || *p == '_' || *p == '$' || *p == '.' ||
                   *p == '-'))
    ++p;
  return p > s + 1 && e - p >= 3 && !memcmp(p, " = ", 3);
}

// The end of the alias definition on line [s, e): before a trailing "//"
// comment outside string literals (moved to line 1, a comment would hide
// the wrapper).
static const char *alias_end(const char *s, const char *e) {
  bool quoted = false;
  for (const char *p = s; p < e; ++p) {
    if (quoted && *p == '\\')
      ++p;
    else if (*p == '"')
      quoted = !quoted;
    else if (!quoted && *p == '/' && p + 1 < e && p[1] == '/')
      return p;
  }
  return e;
}

// The chunk `text` (starting at line `line` of the file) wrapped in a
// module: line 1 holds the chunk's alias definitions, then "module {",
// then newlines so the chunk's lines keep their numbers, then the chunk
// with its alias lines emptied (each alias definition is one line, as
// MLIR prints them; a diagnostic inside one points at line 1).
static bool make_chunk(tool_chunk *c, const char *text, size_t len, int line) {
  const char *end = text + len;
  size_t aliases = 0;
  for (const char *s = text; s < end; s = next_line(s, end)) {
    const char *e = memchr(s, '\n', (size_t)(end - s));
    e = e ? e : end;
    if (is_alias_line(s, e))
      aliases += (size_t)(alias_end(s, e) - s) + 1;
  }
  size_t pad = (size_t)(line - 1);
  c->len = aliases + sizeof kWrapOpen - 1 + pad + len + 2;
  c->text = malloc(c->len + 1);
  if (!c->text)
    return false;
  char *p = c->text, *body = c->text + aliases + sizeof kWrapOpen - 1 + pad;
  for (const char *s = text; s < end; s = next_line(s, end)) {
    const char *e = memchr(s, '\n', (size_t)(end - s));
    e = e ? e : end;
    bool alias = is_alias_line(s, e);
    if (alias) {
      const char *a = alias_end(s, e);
      memcpy(p, s, (size_t)(a - s));
      p += a - s;
      *p++ = ' ';
    }
    // The body keeps the line (emptied for an alias) and its newline.
    size_t keep = alias ? 0 : (size_t)(e - s);
    memcpy(body, s, keep);
    body += keep;
    if (e < end)
      *body++ = '\n';
  }
  memcpy(p, kWrapOpen, sizeof kWrapOpen - 1);
  p += sizeof kWrapOpen - 1;
  memset(p, '\n', pad);
  memcpy(body, "\n}", 3);
  c->len = (size_t)(body + 2 - c->text);
  c->column_shift_line1 = line == 1 ? (int)(aliases + sizeof kWrapOpen - 1) : 0;
  return true;
}

int tool_split_source(const char *text, size_t len, bool split,
                      tool_chunk **chunks) {
  const char *end = text + len;
  int count = 1;
  for (const char *s = text; split && s < end; s = next_line(s, end))
    count += is_separator(s, end);
  *chunks = calloc((size_t)count, sizeof(tool_chunk));
  if (!*chunks)
    return -1;
  int n = 0, line = 1, chunk_line = 1;
  const char *chunk_start = text, *s = text;
  while (split && s < end) {
    const char *next = next_line(s, end);
    if (is_separator(s, end)) {
      if (!make_chunk(&(*chunks)[n++], chunk_start, (size_t)(s - chunk_start), chunk_line))
        goto oom;
      chunk_start = next;
      chunk_line = line + 1;
    }
    s = next;
    ++line;
  }
  if (!make_chunk(&(*chunks)[n++], chunk_start, (size_t)(end - chunk_start), chunk_line))
    goto oom;
  return n;
oom:
  tool_free_chunks(*chunks, n);
  *chunks = NULL;
  return -1;
}

void tool_free_chunks(tool_chunk *chunks, int n) {
  for (int i = 0; i < n; ++i)
    free(chunks[i].text);
  free(chunks);
}

static bool is_module(MlirOperation op) {
  MlirStringRef name = mlirIdentifierStr(mlirOperationGetName(op));
  return name.length == 14 && !memcmp(name.data, "builtin.module", 14);
}

MlirOperation tool_parse_chunk(MlirContext ctx, const tool_chunk *chunk,
                               const char *name) {
  MlirOperation wrapper = mlirOperationCreateParse(
      ctx, mlirStringRefCreate(chunk->text, chunk->len),
      mlirStringRefCreateFromCString(name));
  if (mlirOperationIsNull(wrapper))
    return wrapper;
  // A source that was one module already: unwrap it.
  MlirBlock body = mlirRegionGetFirstBlock(mlirOperationGetRegion(wrapper, 0));
  MlirOperation first = mlirBlockGetFirstOperation(body);
  if (!mlirOperationIsNull(first) && is_module(first) &&
      mlirOperationIsNull(mlirOperationGetNextInBlock(first))) {
    mlirOperationRemoveFromParent(first);
    mlirOperationDestroy(wrapper);
    return first;
  }
  return wrapper;
}

void tool_print_to_file(MlirStringRef s, void *data) {
  fwrite(s.data, 1, s.length, (FILE *)data);
}

double tool_now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

