// The checkpoint name layouts of a program: parsing and renaming.
#include "shardrt/checkpoint_names.h"

#include <stdio.h>
#include <string.h>

static bool starts_with(const char *s, const char *prefix) {
  return strncmp(s, prefix, strlen(prefix)) == 0;
}

// Copies the word [w, w + n) into dst (SRT_NAME_PREFIX_LEN); false if empty
// or too long.
static bool copy_word(char *dst, const char *w, size_t n) {
  if (n == 0 || n >= SRT_NAME_PREFIX_LEN)
    return false;
  memcpy(dst, w, n);
  dst[n] = 0;
  return true;
}

static srt_status bad_line(int line, const char *why) {
  return SRT_ERROR(SRT_INVALID_ARGUMENT, "checkpoint names, line %d: %s", line, why);
}

// One "layout MEM=DISK ..." line (after the directive), words separated by
// spaces, the line ending at `end`.
static srt_status parse_layout(const char *p, const char *end, int line,
                               srt_checkpoint_names *out) {
  if (out->num_layouts >= SRT_MAX_LAYOUTS)
    return bad_line(line, "too many layouts");
  int l = ++out->num_layouts;
  while (p < end) {
    while (p < end && *p == ' ')
      ++p;
    if (p == end)
      break;
    const char *w = p;
    while (p < end && *p != ' ')
      ++p;
    const char *eq = memchr(w, '=', (size_t)(p - w));
    int k = out->layouts[l].num_renames;
    if (k >= SRT_MAX_RENAMES)
      return bad_line(line, "too many renamings in one layout");
    if (!eq || !copy_word(out->layouts[l].renames[k].mem, w, (size_t)(eq - w)) ||
        !copy_word(out->layouts[l].renames[k].disk, eq + 1, (size_t)(p - eq - 1)))
      return bad_line(line, "a renaming must be MEM=DISK with non-empty prefixes of at "
                            "most 95 bytes");
    out->layouts[l].num_renames = k + 1;
  }
  return NULL;
}

srt_status srt_checkpoint_names_parse(const char *text, srt_checkpoint_names *out) {
  memset(out, 0, sizeof *out);
  int line = 0;
  for (const char *p = text ? text : ""; *p;) {
    const char *end = strchr(p, '\n');
    if (!end)
      end = p + strlen(p);
    ++line;
    if (end > p && starts_with(p, "carry ")) {
      if (out->num_carried >= SRT_MAX_CARRIED)
        return bad_line(line, "too many carried prefixes");
      if (!copy_word(out->carried[out->num_carried], p + 6, (size_t)(end - p - 6)))
        return bad_line(line, "a carried prefix must be non-empty, at most 95 bytes");
      ++out->num_carried;
    } else if (end > p && starts_with(p, "layout ")) {
      SRT_RETURN_IF_ERROR(parse_layout(p + 7, end, line, out));
    } else if (end > p) {
      return bad_line(line, "expected 'carry PREFIX' or 'layout MEM=DISK ...'");
    }
    p = *end ? end + 1 : end;
  }
  return NULL;
}

// Replaces the first matching prefix (from -> to) of `name`.
static bool apply_renames(const srt_checkpoint_names *n, int layout, bool to_disk, const char *name,
                   char *buf, size_t len) {
  const char *from = "", *to = "";
  if (layout > 0 && layout <= n->num_layouts)
    for (int k = 0; k < n->layouts[layout].num_renames; ++k) {
      const srt_name_rename *r = &n->layouts[layout].renames[k];
      if (starts_with(name, to_disk ? r->mem : r->disk)) {
        from = to_disk ? r->mem : r->disk;
        to = to_disk ? r->disk : r->mem;
        break;
      }
    }
  int w = snprintf(buf, len, "%s%s", to, name + strlen(from));
  return w >= 0 && (size_t)w < len;
}

bool srt_checkpoint_name_stored(const srt_checkpoint_names *n, int layout, const char *name,
                                char *buf, size_t len) {
  return apply_renames(n, layout, true, name, buf, len);
}

bool srt_checkpoint_name_in_memory(const srt_checkpoint_names *n, int layout,
                                   const char *stored, char *buf, size_t len) {
  return apply_renames(n, layout, false, stored, buf, len);
}

bool srt_checkpoint_name_carried(const srt_checkpoint_names *n, const char *name) {
  for (int i = 0; i < n->num_carried; ++i)
    if (starts_with(name, n->carried[i]))
      return true;
  return false;
}
