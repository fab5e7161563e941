// A minimal JSON scanner that walks object keys (skipping values) to find
// where a nested key is written.
#include "json_locate.h"

#include <string.h>

typedef struct scanner {
  const char *s;
  size_t len, pos;
} scanner;

static void skip_ws(scanner *sc) {
  while (sc->pos < sc->len && strchr(" \t\r\n", sc->s[sc->pos]) && sc->s[sc->pos])
    ++sc->pos;
}

// At a '"': moves past the closing quote.
static void skip_string(scanner *sc) {
  for (++sc->pos; sc->pos < sc->len; ++sc->pos) {
    if (sc->s[sc->pos] == '\\')
      ++sc->pos;
    else if (sc->s[sc->pos] == '"') {
      ++sc->pos;
      return;
    }
  }
}

// Skips one value of any kind.
static void skip_value(scanner *sc) {
  char c = sc->pos < sc->len ? sc->s[sc->pos] : '\0';
  if (c == '"') {
    skip_string(sc);
  } else if (c == '{' || c == '[') {
    int depth = 0;
    while (sc->pos < sc->len) {
      c = sc->s[sc->pos];
      if (c == '"') {
        skip_string(sc);
        continue;
      }
      if (c == '{' || c == '[')
        ++depth;
      else if (c == '}' || c == ']') {
        if (--depth == 0) {
          ++sc->pos;
          return;
        }
      }
      ++sc->pos;
    }
  } else {
    while (sc->pos < sc->len && !strchr(",}] \t\r\n", sc->s[sc->pos]))
      ++sc->pos;
  }
}

// At a '{': finds key `name` (`n` bytes) among this object's keys; leaves
// sc->pos at its opening quote and returns true, or returns false.
static bool find_key(scanner *sc, const char *name, size_t n) {
  ++sc->pos;
  for (;;) {
    skip_ws(sc);
    if (sc->pos >= sc->len || sc->s[sc->pos] != '"')
      return false;
    size_t key_pos = sc->pos;
    skip_string(sc);
    size_t key_len = sc->pos - key_pos - 2;
    bool match = key_len == n && !memcmp(sc->s + key_pos + 1, name, n);
    skip_ws(sc);
    if (sc->pos >= sc->len || sc->s[sc->pos] != ':')
      return false;
    ++sc->pos;
    skip_ws(sc);
    if (match) {
      sc->pos = key_pos;
      return true;
    }
    skip_value(sc);
    skip_ws(sc);
    if (sc->pos >= sc->len || sc->s[sc->pos] != ',')
      return false;
    ++sc->pos;
  }
}

bool json_locate(const char *text, size_t len, const char *path, int *line,
                 int *col) {
  scanner sc = {text, len, 0};
  skip_ws(&sc);
  for (const char *part = path;;) {
    if (sc.pos >= len || text[sc.pos] != '{')
      return false;
    const char *dot = strchr(part, '.');
    size_t n = dot ? (size_t)(dot - part) : strlen(part);
    if (!find_key(&sc, part, n))
      return false;
    if (!dot)
      break;
    // Step onto the value of the key just found.
    skip_string(&sc);
    skip_ws(&sc);
    ++sc.pos; // ':'
    skip_ws(&sc);
    part = dot + 1;
  }
  int l = 1, c = 1;
  for (size_t i = 0; i < sc.pos; ++i) {
    if (text[i] == '\n') {
      ++l;
      c = 1;
    } else {
      ++c;
    }
  }
  *line = l;
  *col = c;
  return true;
}
