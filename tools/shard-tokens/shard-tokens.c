// shard-tokens: text to training tokens in the runtime's token format
// (docs/data.md), one token per byte (vocabulary 256) or, with --tokenizer,
// the ids a Hugging Face tokenizer.json gives; --decode turns a token file
// back into text.
//   shard-tokens INPUT -o OUTPUT
//   shard-tokens --tokenizer tokenizer.json [--field F] [--bos[=T]|--no-bos]
//                [--eos[=T]|--no-eos] INPUT... -o OUTPUT
//   shard-tokens --tokenizer tokenizer.json --decode TOKENS -o TEXT
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "shardrt/output.h"
#include "shardrt/tokens.h"
#include "corpus.h"
#include "tokenizer.h"

static const char USAGE[] =
    "usage: shard-tokens [--windows] INPUT -o OUTPUT\n"
    "         one token per byte of INPUT (vocabulary 256), one document\n"
    "       shard-tokens --tokenizer tokenizer.json [--field NAME] [--bos[=TOKEN] | --no-bos]\n"
    "                    [--eos[=TOKEN] | --no-eos] [--windows] INPUT... -o OUTPUT\n"
    "         the tokenizer's ids; each text file is a document, each line of a .jsonl\n"
    "         file one (its NAME field, default text; a prompt-completion pair when the\n"
    "         first line has 'prompt' or 'completion'); BOS before and EOS after each\n"
    "         document (defaults from tokenizer_config.json beside the tokenizer)\n"
    "  --windows: a version 1 file, one stream the driver reads in windows (no\n"
    "         document index: documents share rows and attention)\n"
    "       shard-tokens --tokenizer tokenizer.json --decode TOKENS -o TEXT\n"
    "  -o -: standard output (the report then goes to standard error)\n"
    "  docs/data.md\n";

// Where the closing report goes: standard output, unless the output itself
// is going there.
static FILE *report_stream(const char *out) {
  return srt_output_is_stdout(out) ? stderr : stdout;
}

// Prints the problem (if any) and the usage; returns the exit status 1.
static int usage(const char *problem, const char *word) {
  if (problem)
    fprintf(stderr, "shard-tokens: %s '%s'\n", problem, word);
  fputs(USAGE, stderr);
  return 1;
}

// Reads the regular file `path` whole into *data (NUL-terminated). A FIFO
// or a device such as /dev/zero would never end: refused.
static int read_file(const char *path, char **data, size_t *len) {
  struct stat st;
  if (stat(path, &st) != 0) {
    fprintf(stderr, "shard-tokens: '%s': %s\n", path, strerror(errno));
    return -1;
  }
  if (!S_ISREG(st.st_mode)) {
    fprintf(stderr, "shard-tokens: input '%s' is not a regular file\n", path);
    return -1;
  }
  // Non-blocking: should the input have become a FIFO since the stat, the
  // open does not wait for a writer (and the fstat refuses it).
  int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0 || fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    fprintf(stderr, "shard-tokens: cannot read '%s': %s\n", path,
            fd < 0 ? strerror(errno) : "not a regular file");
    if (fd >= 0)
      close(fd);
    return -1;
  }
  *data = malloc((size_t)st.st_size + 1);
  size_t n = 0;
  ssize_t r = 0;
  while (*data && n < (size_t)st.st_size && (r = read(fd, *data + n, (size_t)st.st_size - n)) > 0)
    n += (size_t)r;
  close(fd);
  if (!*data || r < 0) {
    fprintf(stderr, "shard-tokens: %s: %s\n", path, *data ? strerror(errno) : "out of memory");
    free(*data);
    return -1;
  }
  (*data)[n] = 0;
  *len = n;
  return 0;
}

//===----------------------------------------------------------------------===//
// Byte-level tokens (no tokenizer)
//===----------------------------------------------------------------------===//

static int bytes_main(const char *in, const char *out, bool windows) {
  char *data;
  size_t n;
  if (read_file(in, &data, &n))
    return 1;
  if (!n) { // no model trains on it: a wrong file, not a corpus
    fprintf(stderr, "shard-tokens: input '%s' is empty: no tokens to write\n", in);
    free(data);
    return 1;
  }
  int64_t *tokens = malloc(n * sizeof *tokens);
  for (size_t i = 0; tokens && i < n; ++i)
    tokens[i] = (unsigned char)data[i];
  free(data);
  if (!tokens) {
    fprintf(stderr, "shard-tokens: %s: out of memory\n", in);
    return 1;
  }
  // One document: the file (version 2, made by no tokenizer).
  const int64_t starts[2] = {0, (int64_t)n}, prompts[1] = {0};
  srt_tokenizer_identity bytes = {.kind = SRT_TOKENIZER_BYTES, .name = "bytes"};
  srt_status s = windows ? srt_tokens_write(out, tokens, (int64_t)n, 256)
                         : srt_tokens_write_documents(out, tokens, (int64_t)n, 256, starts,
                                                      prompts, 1, &bytes);
  free(tokens);
  if (s) {
    fprintf(stderr, "shard-tokens: %s\n", srt_status_message(s));
    srt_status_free(s);
    return 1;
  }
  fprintf(report_stream(out), "shard-tokens: %zu tokens (vocabulary 256) from '%s' to '%s'\n",
          n, in, out);
  return 0;
}

//===----------------------------------------------------------------------===//
// Tokenizer
//===----------------------------------------------------------------------===//

// How BOS or EOS was chosen on the command line.
typedef enum { SPECIAL_DEFAULT, SPECIAL_OFF, SPECIAL_ON, SPECIAL_GIVEN } special_mode;

typedef struct {
  const char *tokenizer, *field, *out, *decode;
  bool field_given; // --field: JSONL lines are text documents, never pairs
  bool windows;     // --windows: a version 1 file (no document index)
  special_mode bos_mode, eos_mode;
  const char *bos, *eos; // SPECIAL_GIVEN: the token text
  const char **inputs;
  int n_inputs;
} options;

// tokenizer_config.json's `key`: a string or {"content": string}, or NULL.
static const char *special_token(json_t *config, const char *key) {
  json_t *v = json_object_get(config, key);
  if (json_is_object(v))
    v = json_object_get(v, "content");
  return json_is_string(v) ? json_string_value(v) : NULL;
}

// Resolves a BOS/EOS choice to an id (-1 = none); returns -1 on a bad or
// missing token.
static int resolve_special(const tok_tokenizer *t, const char *what, special_mode mode,
                           const char *given, const char *configured, bool default_on,
                           const char *config_path, int32_t *id) {
  *id = -1;
  bool on = mode == SPECIAL_GIVEN || mode == SPECIAL_ON || (mode == SPECIAL_DEFAULT && default_on);
  const char *token = mode == SPECIAL_GIVEN ? given : configured;
  if (!on || (!token && mode == SPECIAL_DEFAULT))
    return 0;
  if (!token) {
    fprintf(stderr, "shard-tokens: --%s without a token, and '%s' names none: give --%s=TOKEN\n",
            what, config_path ? config_path : "tokenizer_config.json", what);
    return -1;
  }
  if ((*id = tok_token_to_id(t, token)) < 0) {
    fprintf(stderr, "shard-tokens: %s token '%s'%s%s%s is not in the tokenizer's vocabulary\n",
            what, token, mode == SPECIAL_GIVEN ? "" : " (from '",
            mode == SPECIAL_GIVEN ? "" : config_path, mode == SPECIAL_GIVEN ? "" : "')");
    return -1;
  }
  return 0;
}

// The special token a TemplateProcessing post-processor of tokenizer.json
// (top level, or inside a Sequence's processors) puts before the text of a
// single sequence (its "single" template's first item), or NULL: what
// encode(add_special_tokens=True) adds, as Llama 3's tokenizers add
// <|begin_of_text|> with no add_bos_token in tokenizer_config.json. The
// string lives in `tok` (json_decref it after use).
static const char *template_bos(json_t *tok) {
  json_t *pp = json_object_get(tok, "post_processor");
  json_t *list = json_object_get(pp, "processors");
  size_t n = json_is_array(list) ? json_array_size(list) : 1;
  for (size_t i = 0; i < n; ++i) {
    json_t *p = json_is_array(list) ? json_array_get(list, i) : pp;
    const char *type = json_string_value(json_object_get(p, "type"));
    if (!type || strcmp(type, "TemplateProcessing"))
      continue;
    json_t *first = json_array_get(json_object_get(p, "single"), 0);
    json_t *id = json_object_get(json_object_get(first, "SpecialToken"), "id");
    return json_is_string(id) ? json_string_value(id) : NULL;
  }
  return NULL;
}

// BOS and EOS ids from the flags, else tokenizer_config.json beside the
// tokenizer: BOS when add_bos_token is true, or, where it does not say,
// the special token tokenizer.json's TemplateProcessing puts first (as
// transformers' encode does); EOS whenever eos_token is set (documents are
// separated by EOS).
static int specials(const tok_tokenizer *t, const options *o, int32_t *bos, int32_t *eos) {
  char *dir = strdup(o->tokenizer), *path = NULL;
  json_t *config = NULL;
  if (dir && (path = tok_format("%s/tokenizer_config.json", dirname(dir))) &&
      access(path, F_OK) == 0) {
    json_error_t je;
    if (!(config = json_load_file(path, 0, &je))) {
      fprintf(stderr, "shard-tokens: '%s': line %d: %s\n", path, je.line, je.text);
      free(dir);
      free(path);
      return -1;
    }
  }
  if (path && !config) { // no tokenizer_config.json: nothing is configured
    free(path);
    path = NULL;
  }
  const char *bos_token = special_token(config, "bos_token");
  bool add_bos = json_is_true(json_object_get(config, "add_bos_token"));
  json_t *tok = NULL; // tokenizer.json, read again for its post-processor only
  if (!json_object_get(config, "add_bos_token") &&
      (tok = json_load_file(o->tokenizer, 0, NULL)) && template_bos(tok)) {
    bos_token = template_bos(tok);
    add_bos = true;
  }
  int rc = resolve_special(t, "bos", o->bos_mode, o->bos, bos_token, add_bos, path, bos) ||
           resolve_special(t, "eos", o->eos_mode, o->eos, special_token(config, "eos_token"),
                           true, path, eos);
  json_decref(tok);
  json_decref(config);
  free(dir);
  free(path);
  return rc ? -1 : 0;
}

static bool is_jsonl(const char *path) {
  size_t n = strlen(path);
  return (n > 6 && !strcmp(path + n - 6, ".jsonl")) || (n > 7 && !strcmp(path + n - 7, ".ndjson"));
}

// A line of a JSONL file: its text document (the string `field`), or in a
// prompt-completion file its pair. Returns 0, or -1 after printing the
// error naming `where`.
static int jsonl_line(tok_tokenizer *t, const options *o, const char *where, json_t *row,
                      bool pairs, int32_t bos, int32_t eos, corpus *c) {
  if (!pairs) {
    json_t *v = json_object_get(row, o->field);
    if (!json_is_string(v)) {
      fprintf(stderr, "shard-tokens: %s: no string field '%s' in the object\n", where, o->field);
      return -1;
    }
    return corpus_document(c, t, where, json_string_value(v), json_string_length(v), bos, eos);
  }
  json_t *p = json_object_get(row, "prompt"), *q = json_object_get(row, "completion");
  if (!json_is_string(p) || !json_is_string(q)) {
    fprintf(stderr,
            "shard-tokens: %s: no string field '%s' in the object (a prompt-completion file, "
            "as its first line has 'prompt' or 'completion', needs both as strings on every "
            "line; conversational pairs are not supported)\n",
            where, !json_is_string(p) ? "prompt" : "completion");
    return -1;
  }
  return corpus_pair(c, t, where, json_string_value(p), json_string_length(p),
                     json_string_value(q), json_string_length(q), bos, eos);
}

// Every line of a JSONL file is a document: the string `field` of its
// object, or, when the file's first line has a 'prompt' or 'completion'
// key and no --field was given, a prompt-completion pair (TRL's
// prompt-completion form, told apart by its first example as TRL does).
static int jsonl(tok_tokenizer *t, const options *o, const char *path, char *data, size_t len,
                 int32_t bos, int32_t eos, corpus *c) {
  size_t line = 0;
  int pairs = -1; // unknown until the first line
  for (char *s = data, *end = data + len; s < end; ++line) {
    char *nl = memchr(s, '\n', (size_t)(end - s)), *stop = nl ? nl : end;
    char where[4096];
    snprintf(where, sizeof where, "'%s' line %zu", path, line + 1);
    int64_t bad = tok_utf8_check(s, (size_t)(stop - s));
    if (bad >= 0) {
      fprintf(stderr, "shard-tokens: %s: invalid UTF-8 at byte offset %lld of the file\n",
              where, (long long)(s - data + bad));
      return -1;
    }
    size_t k = 0;
    while (s + k < stop && (s[k] == ' ' || s[k] == '\t' || s[k] == '\r'))
      ++k;
    if (s + k == stop) { // a blank line is no document
      s = stop + 1;
      continue;
    }
    json_error_t je;
    json_t *row = json_loadb(s, (size_t)(stop - s), JSON_ALLOW_NUL, &je);
    if (!json_is_object(row)) {
      fprintf(stderr, "shard-tokens: %s: %s%s\n", where,
              row ? "not a JSON object" : "not JSON: ", row ? "" : je.text);
      json_decref(row);
      return -1;
    }
    if (pairs < 0)
      pairs = !o->field_given &&
              (json_object_get(row, "prompt") || json_object_get(row, "completion"));
    int rc = jsonl_line(t, o, where, row, pairs == 1, bos, eos, c);
    json_decref(row);
    if (rc)
      return -1;
    s = stop + 1;
  }
  return 0;
}

// The identity of the tokenizer file `path` (its bytes' digest and the
// path as given) into *id. Returns 0, or -1 after printing the error.
static int tokenizer_identity(const char *path, srt_tokenizer_identity *id) {
  char *data;
  size_t len;
  if (read_file(path, &data, &len))
    return -1;
  *id = (srt_tokenizer_identity){.kind = SRT_TOKENIZER_JSON,
                                 .digest = srt_tokenizer_digest(data, len), .name = path};
  free(data);
  return 0;
}

// Prints the closing report (and TRL's warning on prompts whose ids do not
// start their pair's).
static void encode_report(const options *o, const corpus *c, int64_t vocab, int64_t bytes,
                          double s) {
  if (c->mismatched)
    fprintf(stderr,
            "shard-tokens: warning: %lld prompt-completion pair(s), the first at %s: the ids "
            "of the prompt alone are not the first ids of prompt + completion (a token spans "
            "the boundary); their prompt length is that of the prompt alone, as TRL takes it\n",
            (long long)c->mismatched, c->first_mismatch);
  FILE *f = report_stream(o->out);
  fprintf(f,
          "shard-tokens: %zu tokens (vocabulary %lld) from %lld document(s), %lld bytes, in "
          "%.2f s (%.1f MB/s) to '%s'\n",
          c->ids.count, (long long)vocab, (long long)c->docs, (long long)bytes, s,
          s > 0 ? (double)bytes / s / 1e6 : 0.0, o->out);
  if (c->pairs)
    fprintf(f, "shard-tokens: %lld prompt-completion pair(s): %lld prompt tokens carry no loss\n",
            (long long)c->pairs, (long long)c->prompt_tokens);
}

static int encode_main(tok_tokenizer *t, const options *o) {
  int32_t bos, eos;
  srt_tokenizer_identity id;
  if (specials(t, o, &bos, &eos) || tokenizer_identity(o->tokenizer, &id))
    return 1;
  corpus c = {.docs = 0};
  int64_t bytes = 0;
  struct timespec t0, t1;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  for (int i = 0; i < o->n_inputs; ++i) {
    const char *in = o->inputs[i];
    char *data, where[4096];
    size_t len;
    if (srt_same_file(in, o->out)) {
      fprintf(stderr, "shard-tokens: output '%s' is the input: give another file\n", o->out);
      goto fail;
    }
    if (read_file(in, &data, &len))
      goto fail;
    snprintf(where, sizeof where, "'%s'", in);
    int rc = is_jsonl(in) ? jsonl(t, o, in, data, len, bos, eos, &c)
                          : corpus_document(&c, t, where, data, len, bos, eos);
    bytes += (int64_t)len;
    free(data);
    if (rc)
      goto fail;
  }
  clock_gettime(CLOCK_MONOTONIC, &t1);
  if (!c.ids.count) {
    fprintf(stderr, "shard-tokens: the inputs give no tokens: nothing to train on\n");
    goto fail;
  }
  if (tok_dropped(t))
    fprintf(stderr, "shard-tokens: warning: %lld characters are in no token of '%s' (no "
            "byte_fallback, no unk_token) and were dropped, as the tokenizers library drops "
            "them\n", (long long)tok_dropped(t), o->tokenizer);
  if (corpus_write(&c, o->out, tok_vocab_size(t), o->windows ? NULL : &id))
    goto fail;
  encode_report(o, &c, tok_vocab_size(t), bytes,
                (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec));
  corpus_free(&c);
  return 0;
fail:
  corpus_free(&c);
  return 1;
}

static int decode_main(tok_tokenizer *t, const options *o) {
  srt_tokens *f = NULL;
  srt_status s = srt_tokens_open(o->decode, &f);
  if (s) {
    fprintf(stderr, "shard-tokens: %s\n", srt_status_message(s));
    srt_status_free(s);
    return 1;
  }
  int64_t n = srt_tokens_count(f);
  int32_t *ids = malloc((size_t)(n ? n : 1) * sizeof *ids);
  for (int64_t i = 0; ids && i < n; ++i)
    ids[i] = (int32_t)srt_tokens_at(f, i);
  srt_tokens_close(f);
  tok_buf text = {0};
  char *error = NULL;
  int rc = !ids ? (error = strdup("out of memory"), -1)
                : tok_decode(t, ids, (size_t)n, &text, &error);
  free(ids);
  if (rc) {
    fprintf(stderr, "shard-tokens: '%s': %s\n", o->decode, error ? error : "out of memory");
    free(error);
    free(text.data);
    return 1;
  }
  srt_status w = srt_write_file("decoded text", o->out, text.data, text.len);
  free(text.data);
  if (w) {
    fprintf(stderr, "shard-tokens: %s\n", srt_status_message(w));
    srt_status_free(w);
    return 1;
  }
  // On stderr: the text may be going to /dev/stdout.
  fprintf(stderr, "shard-tokens: %lld tokens decoded to '%s'\n", (long long)n, o->out);
  return 0;
}

// --bos, --bos=TOKEN, --no-bos (and the same for eos): returns 1 when `arg`
// is one of them, -1 for an empty TOKEN, 0 otherwise.
static int special_flag(const char *arg, const char *name, special_mode *mode,
                        const char **token) {
  size_t n = strlen(name);
  if (!strncmp(arg, "--no-", 5) && !strcmp(arg + 5, name)) {
    *mode = SPECIAL_OFF;
    return 1;
  }
  if (strncmp(arg, "--", 2) || strncmp(arg + 2, name, n))
    return 0;
  if (!arg[2 + n]) {
    *mode = SPECIAL_ON;
    return 1;
  }
  if (arg[2 + n] != '=')
    return 0;
  *mode = SPECIAL_GIVEN;
  *token = arg + 3 + n;
  return **token ? 1 : -1;
}

int main(int argc, char **argv) {
  options o = {.field = NULL};
  o.inputs = calloc((size_t)argc, sizeof *o.inputs);
  int rc = 1;
  if (!o.inputs)
    return 1;
  for (int i = 1; i < argc; ++i) {
    const char *a = argv[i];
    const char **value = !strcmp(a, "-o")            ? &o.out
                         : !strcmp(a, "--tokenizer") ? &o.tokenizer
                         : !strcmp(a, "--field")     ? &o.field
                         : !strcmp(a, "--decode")    ? &o.decode
                                                     : NULL;
    int k;
    if (!strcmp(a, "--windows")) {
      o.windows = true;
    } else if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
      fputs(USAGE, stdout);
      rc = 0;
      goto done;
    } else if (value && i + 1 >= argc) {
      rc = usage("a value is needed after", a);
      goto done;
    } else if (value && *value) {
      fprintf(stderr, "shard-tokens: %s given twice ('%s' and '%s')\n", a, *value, argv[i + 1]);
      goto done;
    } else if (value)
      *value = argv[++i];
    else if ((k = special_flag(a, "bos", &o.bos_mode, &o.bos)) ||
             (k = special_flag(a, "eos", &o.eos_mode, &o.eos))) {
      if (k < 0) {
        rc = usage("an empty token in", a);
        goto done;
      }
    } else if (a[0] == '-' && a[1]) {
      rc = usage("unknown flag", a);
      goto done;
    } else
      o.inputs[o.n_inputs++] = a;
  }
  if (!o.out) {
    rc = usage("no output given: expected", "-o OUTPUT");
    goto done;
  }
  if (o.field && !*o.field) {
    rc = usage("an empty field name:", "--field");
    goto done;
  }
  for (int i = 0; i < o.n_inputs; ++i)
    if (!*o.inputs[i]) {
      rc = usage("empty path for", "INPUT");
      goto done;
    }
  if (!*o.out || (o.tokenizer && !*o.tokenizer) || (o.decode && !*o.decode)) {
    rc = usage("empty path for", !*o.out ? "-o" : o.decode && !*o.decode ? "--decode" : "--tokenizer");
    goto done;
  }
  if (!o.tokenizer) {
    bool bos = o.bos_mode != SPECIAL_DEFAULT, eos = o.eos_mode != SPECIAL_DEFAULT;
    if (o.decode || bos || eos || o.field) {
      rc = usage("this flag needs --tokenizer:",
                 o.decode ? "--decode"
                 : bos    ? (o.bos_mode == SPECIAL_OFF ? "--no-bos" : "--bos")
                 : eos    ? (o.eos_mode == SPECIAL_OFF ? "--no-eos" : "--eos")
                          : "--field");
      goto done;
    }
    if (o.n_inputs != 1) {
      rc = usage(o.n_inputs ? "a second input (byte-level tokens take one; --tokenizer many):"
                            : "no input given: expected",
                 o.n_inputs ? o.inputs[1] : "INPUT");
      goto done;
    }
    if (srt_same_file(o.inputs[0], o.out)) {
      fprintf(stderr, "shard-tokens: output '%s' is the input: give another file\n", o.out);
      goto done;
    }
    rc = bytes_main(o.inputs[0], o.out, o.windows);
    goto done;
  }
  if (o.decode && (o.field || o.windows || o.bos_mode != SPECIAL_DEFAULT ||
                   o.eos_mode != SPECIAL_DEFAULT)) {
    rc = usage("--decode takes no document flag:", o.field     ? "--field"
                                                   : o.windows ? "--windows"
                                                               : "--bos/--eos");
    goto done;
  }
  o.field_given = o.field != NULL;
  if (!o.field)
    o.field = "text";
  if (o.decode ? o.n_inputs != 0 : o.n_inputs == 0) {
    rc = usage(o.decode ? "--decode takes no other input:" : "no input given: expected",
               o.decode ? o.inputs[0] : "INPUT...");
    goto done;
  }
  if (o.decode && srt_same_file(o.decode, o.out)) {
    fprintf(stderr, "shard-tokens: output '%s' is the token file: give another file\n", o.out);
    goto done;
  }
  if (srt_same_file(o.tokenizer, o.out)) {
    fprintf(stderr, "shard-tokens: output '%s' is the tokenizer: give another file\n", o.out);
    goto done;
  }
  char *error = NULL;
  tok_tokenizer *t = tok_load(o.tokenizer, &error);
  if (!t) {
    fprintf(stderr, "shard-tokens: %s\n", error ? error : "out of memory");
    free(error);
    goto done;
  }
  rc = o.decode ? decode_main(t, &o) : encode_main(t, &o);
  tok_free(t);
done:
  free(o.inputs);
  return rc;
}
