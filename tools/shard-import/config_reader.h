// The typed reading of config.json, apart from what its keys mean
// (config.c): a key looked up in an object of the config, its config
// class's default taken when it is absent (and recorded in
// cfg->defaults_used), its JSON type and range checked, the error written
// at its line and column (config_reader.c). The keys read are remembered
// so that config.c can report the ones it ignored.
#ifndef SHARD_IMPORT_CONFIG_READER_H
#define SHARD_IMPORT_CONFIG_READER_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "config_class.h"

struct import_config;

/// One reading of a config.json.
typedef struct import_reader {
  struct import_config *cfg; // what the caller fills (config.c's; never read here)
  const char *path;          // the file, for messages
  const char *text;          // its text, for the keys' lines and columns
  size_t text_len;
  const char *const *scope; // *scope: the dotted path of the text config object
                            // ("" = top), which the caller moves
  const char *model;        // the architecture, for "missing key" messages
  char **defaults_used;     // the class defaults handed out, a line each
  json_t *root;             // the whole file
  json_t *obj;  // the text config object (root, or root[text_config])
  const import_config_class *cls, *top_cls; // of obj and (composite) root
  json_t *seen;     // keys looked up: "" + key for obj, "^" + key for root
  json_t *defaults; // the default values handed out (kept alive here)
  char *err;
  size_t errlen;
} import_reader;

/// A key looked up: in object `o` at dotted path `opath` below the scope
/// ("" for the text config itself).
typedef struct reader_key {
  const json_t *o;
  const char *opath;
  const char *key;
  char rel[160];  // path below the scope, for locating
  char full[200]; // path from the top, for messages
} reader_key;

/// The range a number of the config is meaningful in: (lo, hi]. A value
/// that imports but then trains to NaN (rope_theta 1e-308, eps 1e308) is
/// refused at reading, naming the key.
typedef struct reader_range {
  double lo, hi; // lo excluded, hi included
} reader_range;

/// Appends one formatted line to the heap string *buf (nothing when out of
/// memory: these are reports, not results).
__attribute__((format(printf, 2, 3))) void reader_append_line(char **buf, const char *fmt,
                                                              ...);

/// Records that `key` of the text config (or, with top, of the top level)
/// was read, so that it is not reported as ignored.
void reader_mark_seen(import_reader *p, bool top, const char *key);

/// Writes `PATH:LINE:COL: error: MESSAGE` to p->err (the position of `key`
/// below the scope when the config writes it, `PATH: error:` otherwise,
/// then naming the class default the value came from) and returns false.
__attribute__((format(printf, 3, 4))) bool reader_fail(import_reader *p, const char *key,
                                                       const char *fmt, ...);

/// Where dotted path `key` below `scope` ("" = top) is written in `text`
/// (1-based line and column); false (the scope's own position, or 1:1)
/// when it is not written.
bool reader_locate(const char *text, size_t len, const char *scope, const char *key, int *line,
                   int *col);

/// "an object", "a string", ...: the JSON type of `v`, for messages.
const char *reader_type_name(const json_t *v);

/// The value of `key` in `o` (filling `k` for messages), its class's
/// default when absent from the text config or a composite's top level,
/// or NULL (a JSON null counts as absent).
const json_t *reader_lookup(import_reader *p, reader_key *k, const json_t *o, const char *opath,
                            const char *key);

// Typed lookups: `key` of object `o` at `opath`. An optional key absent
// gives `def`; a required one absent, a value of another type or outside
// its range is an error (reader_fail). Each returns false after an error.

/// An integer >= `min` and at most 2^24 (beyond every real model size, and
/// small enough that products of sizes do not overflow 64 bits).
bool reader_get_int(import_reader *p, const json_t *o, const char *opath, const char *key,
                    bool required, int64_t def, int64_t min, int64_t *out);

/// A number in `rg`.
bool reader_get_float(import_reader *p, const json_t *o, const char *opath, const char *key,
                      bool required, double def, reader_range rg, double *out);

/// true or false.
bool reader_get_bool(import_reader *p, const json_t *o, const char *opath, const char *key,
                     bool def, bool *out);

/// A string; *out = def (which may be NULL) when absent.
bool reader_get_str(import_reader *p, const json_t *o, const char *opath, const char *key,
                    const char *def, const char **out);

/// An object, or NULL when absent or null.
bool reader_get_obj(import_reader *p, const json_t *o, const char *opath, const char *key,
                    const json_t **out);

#endif // SHARD_IMPORT_CONFIG_READER_H
