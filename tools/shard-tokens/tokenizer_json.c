// Loads a Hugging Face tokenizer.json into the pipeline of tokenizer.h:
// model (BPE only), normalizer, pre-tokenizer and decoder chains (Sequence
// flattened), added tokens. Every refusal names the file and the JSON field.
// Field meanings: tokenizers/src/{models/bpe,normalizers,pre_tokenizers,
// decoders}/*.rs (serde names), tokenizers 0.2x.
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "tokenizer_internal.h"

// The GPT-2 byte <-> character table (bytes_to_unicode of openai/gpt-2
// encoder.py, as tokenizers' ByteLevel): printable Latin-1 bytes stand for
// themselves, the others for U+0100 + their order among them.
static void byte_chars(int32_t char_of_byte[256]) {
  int extra = 0;
  for (int b = 0; b < 256; ++b) {
    bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE);
    char_of_byte[b] = printable ? b : 256 + extra++;
  }
}

typedef struct {
  const char *path;
  char **error;
} loader;

static int fail(loader *L, const char *field, const char *what, const char *value) {
  *L->error = tok_format("tokenizer '%s': %s: %s%s%s%s", L->path, field, what,
                         value ? " '" : "", value ? value : "", value ? "'" : "");
  return -1;
}

int tok_pattern_compile(tok_pattern *p, const char *regex, char **error, const char *where) {
  int code;
  PCRE2_SIZE at;
  p->regex = pcre2_compile((PCRE2_SPTR)regex, PCRE2_ZERO_TERMINATED, PCRE2_UTF | PCRE2_UCP,
                           &code, &at, NULL);
  if (!p->regex) {
    PCRE2_UCHAR msg[256];
    pcre2_get_error_message(code, msg, sizeof msg);
    *error = tok_format("%s: regex '%s' does not compile at offset %zu: %s", where, regex,
                        (size_t)at, (const char *)msg);
    return -1;
  }
  (void)pcre2_jit_compile(p->regex, PCRE2_JIT_COMPLETE); // the interpreter if JIT is absent
  return 0;
}

void tok_pattern_free(tok_pattern *p) {
  free(p->literal);
  pcre2_code_free(p->regex);
  memset(p, 0, sizeof *p);
}

int tok_pattern_next(const tok_pattern *p, pcre2_match_data *md, const char *s, size_t len,
                     size_t start, size_t *ms, size_t *me, char **error) {
  if (p->literal) {
    for (size_t i = start; p->literal_len && i + p->literal_len <= len; ++i) {
      const char *hit = memchr(s + i, p->literal[0], len - i - p->literal_len + 1);
      if (!hit)
        return 0;
      i = (size_t)(hit - s);
      if (!memcmp(hit, p->literal, p->literal_len)) {
        *ms = i;
        *me = i + p->literal_len;
        return 1;
      }
    }
    return 0;
  }
  int rc = pcre2_match(p->regex, (PCRE2_SPTR)s, len, start, PCRE2_NO_UTF_CHECK, md, NULL);
  if (rc == PCRE2_ERROR_NOMATCH)
    return 0;
  if (rc < 0) {
    PCRE2_UCHAR msg[256];
    pcre2_get_error_message(rc, msg, sizeof msg);
    *error = tok_format("regex match failed: %s", (const char *)msg);
    return -1;
  }
  PCRE2_SIZE *ov = pcre2_get_ovector_pointer(md);
  *ms = ov[0];
  *me = ov[1];
  return 1;
}

static const char *str_field(json_t *o, const char *key) {
  json_t *v = json_object_get(o, key);
  return json_is_string(v) ? json_string_value(v) : NULL;
}

static bool bool_field(json_t *o, const char *key, bool fallback) {
  json_t *v = json_object_get(o, key);
  return json_is_boolean(v) ? json_is_true(v) : fallback;
}

// A {"String": s} or {"Regex": r} pattern.
static int load_pattern(loader *L, json_t *o, const char *field, tok_pattern *p) {
  json_t *pat = json_object_get(o, "pattern");
  const char *lit = str_field(pat, "String"), *re = str_field(pat, "Regex");
  if (lit) {
    p->literal = strdup(lit);
    p->literal_len = strlen(lit);
    return p->literal ? 0 : fail(L, field, "out of memory", NULL);
  }
  if (!re)
    return fail(L, field, "pattern must be {\"String\": ...} or {\"Regex\": ...}", NULL);
  char *where = tok_format("tokenizer '%s': %s", L->path, field);
  int rc = tok_pattern_compile(p, re, L->error, where ? where : field);
  free(where);
  return rc;
}

// One UTF-8 character of a string field, as tokenizers' `char` fields.
static int char_field(loader *L, json_t *o, const char *key, const char *field, char out[8]) {
  const char *s = str_field(o, key);
  int32_t cp;
  int n = s ? tok_utf8_decode(s, strlen(s), 0, &cp) : 0;
  if (!n || s[n])
    return fail(L, field, "must be one character:", key);
  memcpy(out, s, (size_t)n);
  out[n] = 0;
  return 0;
}

static int prepend_scheme(loader *L, json_t *o, const char *field, tok_prepend_scheme *out) {
  const char *s = str_field(o, "prepend_scheme");
  if (!s) { // before tokenizers 0.14: add_prefix_space
    *out = bool_field(o, "add_prefix_space", true) ? TOK_PREPEND_ALWAYS : TOK_PREPEND_NEVER;
    return 0;
  }
  if (!strcmp(s, "always"))
    *out = TOK_PREPEND_ALWAYS;
  else if (!strcmp(s, "first"))
    *out = TOK_PREPEND_FIRST;
  else if (!strcmp(s, "never"))
    *out = TOK_PREPEND_NEVER;
  else
    return fail(L, field, "prepend_scheme must be always, first or never, not", s);
  return 0;
}

// Flattens a (possibly Sequence) chain into `items` of `size` bytes; calls
// `one` for each element with its field path.
typedef int (*load_one_fn)(loader *L, json_t *o, const char *field, void *item);

static int load_chain(loader *L, json_t *root, const char *name, const char *list_key,
                      size_t size, load_one_fn one, void **items, int *count,
                      const char *field) {
  if (!root || json_is_null(root))
    return 0;
  if (!json_is_object(root) || !str_field(root, "type"))
    return fail(L, field, "must be an object with a \"type\"", NULL);
  if (strcmp(str_field(root, "type"), "Sequence")) {
    void *grown = realloc(*items, (size_t)(*count + 1) * size);
    if (!grown)
      return fail(L, field, "out of memory", NULL);
    *items = grown;
    memset((char *)grown + (size_t)*count * size, 0, size);
    return one(L, root, field, (char *)grown + (size_t)(*count)++ * size);
  }
  json_t *list = json_object_get(root, list_key);
  if (!json_is_array(list))
    return fail(L, field, "a Sequence needs the array", list_key);
  for (size_t i = 0; i < json_array_size(list); ++i) {
    char sub[256];
    snprintf(sub, sizeof sub, "%s.%s[%zu]", field, list_key, i);
    if (load_chain(L, json_array_get(list, i), name, list_key, size, one, items, count, sub))
      return -1;
  }
  return 0;
}

static int load_normalizer(loader *L, json_t *o, const char *field, void *item) {
  tok_normalizer *n = item;
  const char *type = str_field(o, "type");
  static const struct { const char *name; tok_norm_kind kind; } simple[] = {
      {"NFC", TOK_NORM_NFC}, {"NFD", TOK_NORM_NFD}, {"NFKC", TOK_NORM_NFKC},
      {"NFKD", TOK_NORM_NFKD}, {"Lowercase", TOK_NORM_LOWERCASE}};
  for (size_t i = 0; i < sizeof simple / sizeof *simple; ++i)
    if (!strcmp(type, simple[i].name)) {
      n->kind = simple[i].kind;
      return 0;
    }
  if (!strcmp(type, "Strip")) {
    n->kind = TOK_NORM_STRIP;
    n->left = bool_field(o, "strip_left", true);
    n->right = bool_field(o, "strip_right", true);
    return 0;
  }
  const char *content = str_field(o, !strcmp(type, "Prepend") ? "prepend" : "content");
  if (!strcmp(type, "Prepend") || !strcmp(type, "Replace")) {
    if (!content)
      return fail(L, field, "needs a string", !strcmp(type, "Prepend") ? "prepend" : "content");
    n->kind = !strcmp(type, "Prepend") ? TOK_NORM_PREPEND : TOK_NORM_REPLACE;
    n->content = strdup(content);
    if (!n->content)
      return fail(L, field, "out of memory", NULL);
    return n->kind == TOK_NORM_REPLACE ? load_pattern(L, o, field, &n->pattern) : 0;
  }
  return fail(L, field, "normalizer type not supported (NFC, NFD, NFKC, NFKD, Lowercase, "
                        "Strip, Replace, Prepend, Sequence are):", type);
}

static const char GPT2_REGEX[] =
    "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+";

static int load_pretokenizer(loader *L, json_t *o, const char *field, void *item) {
  tok_pretokenizer *p = item;
  const char *type = str_field(o, "type");
  if (!strcmp(type, "ByteLevel")) {
    p->kind = TOK_PRE_BYTELEVEL;
    p->add_prefix_space = bool_field(o, "add_prefix_space", true);
    p->use_regex = bool_field(o, "use_regex", true);
    return p->use_regex ? tok_pattern_compile(&p->pattern, GPT2_REGEX, L->error, field) : 0;
  }
  if (!strcmp(type, "Metaspace")) {
    p->kind = TOK_PRE_METASPACE;
    p->split = bool_field(o, "split", true);
    return char_field(L, o, "replacement", field, p->replacement) ||
                   prepend_scheme(L, o, field, &p->prepend)
               ? -1
               : 0;
  }
  if (!strcmp(type, "Split")) {
    static const char *names[] = {"Removed", "Isolated", "MergedWithPrevious", "MergedWithNext",
                                  "Contiguous"};
    const char *b = str_field(o, "behavior");
    p->kind = TOK_PRE_SPLIT;
    p->invert = bool_field(o, "invert", false);
    size_t k = 0;
    while (b && k < 5 && strcmp(b, names[k]))
      ++k;
    if (!b || k == 5)
      return fail(L, field, "behavior must be Removed, Isolated, MergedWithPrevious, "
                            "MergedWithNext or Contiguous, not",
                  b ? b : "(missing)");
    p->behavior = (tok_split_behavior)k;
    return load_pattern(L, o, field, &p->pattern);
  }
  return fail(L, field, "pre-tokenizer type not supported (ByteLevel, Metaspace, Split, "
                        "Sequence are):", type);
}

static int load_decoder(loader *L, json_t *o, const char *field, void *item) {
  tok_decoder *d = item;
  const char *type = str_field(o, "type");
  if (!strcmp(type, "ByteLevel"))
    d->kind = TOK_DEC_BYTELEVEL;
  else if (!strcmp(type, "ByteFallback"))
    d->kind = TOK_DEC_BYTEFALLBACK;
  else if (!strcmp(type, "Fuse"))
    d->kind = TOK_DEC_FUSE;
  else if (!strcmp(type, "Metaspace")) {
    d->kind = TOK_DEC_METASPACE;
    return char_field(L, o, "replacement", field, d->replacement) ||
                   prepend_scheme(L, o, field, &d->prepend)
               ? -1
               : 0;
  } else if (!strcmp(type, "Strip")) {
    d->kind = TOK_DEC_STRIP;
    json_t *start = json_object_get(o, "start"), *stop = json_object_get(o, "stop");
    if (!json_is_integer(start) || !json_is_integer(stop) || json_integer_value(start) < 0 ||
        json_integer_value(stop) < 0)
      return fail(L, field, "Strip needs non-negative integers start and stop", NULL);
    d->start = (int)json_integer_value(start);
    d->stop = (int)json_integer_value(stop);
    d->content = malloc(8);
    return d->content ? char_field(L, o, "content", field, d->content)
                      : fail(L, field, "out of memory", NULL);
  } else if (!strcmp(type, "Replace")) {
    d->kind = TOK_DEC_REPLACE;
    const char *content = str_field(o, "content");
    if (!content)
      return fail(L, field, "needs a string", "content");
    d->content = strdup(content);
    return d->content ? load_pattern(L, o, field, &d->pattern)
                      : fail(L, field, "out of memory", NULL);
  } else
    return fail(L, field, "decoder type not supported (ByteLevel, ByteFallback, Fuse, "
                          "Metaspace, Strip, Replace, Sequence are):", type);
  return 0;
}

// A vocabulary key in the byte-level alphabet as the raw bytes it stands for;
// a key with characters outside the alphabet stays as it is (it is never
// produced from text, only looked up).
static size_t byte_level_key(const char *key, size_t len, const int32_t byte_of_char[324],
                             char *out) {
  size_t n = 0;
  for (size_t i = 0; i < len;) {
    int32_t cp;
    int k = tok_utf8_decode(key, len, i, &cp);
    if (!k || cp >= 324 || byte_of_char[cp] < 0) {
      memcpy(out, key, len);
      return len;
    }
    out[n++] = (char)byte_of_char[cp];
    i += (size_t)k;
  }
  return n;
}

static int set_token(tok_tokenizer *t, int64_t id, const char *text, size_t len) {
  if (id >= t->n_ids) {
    int64_t n = id + 1 > 2 * t->n_ids ? id + 1 : 2 * t->n_ids;
    void *grown = realloc(t->id_to_token, (size_t)n * sizeof *t->id_to_token);
    if (!grown)
      return -1;
    t->id_to_token = grown;
    memset(t->id_to_token + t->n_ids, 0, (size_t)(n - t->n_ids) * sizeof *t->id_to_token);
    t->n_ids = n;
  }
  free(t->id_to_token[id].text);
  t->id_to_token[id].text = malloc(len + 1);
  if (!t->id_to_token[id].text)
    return -1;
  memcpy(t->id_to_token[id].text, text, len);
  t->id_to_token[id].text[len] = 0;
  t->id_to_token[id].len = (uint32_t)len;
  return 0;
}

static int load_vocab(loader *L, tok_tokenizer *t, json_t *vocab) {
  if (!json_is_object(vocab))
    return fail(L, "model.vocab", "must be an object of token -> id", NULL);
  int32_t char_of_byte[256], byte_of_char[324];
  byte_chars(char_of_byte);
  memset(byte_of_char, -1, sizeof byte_of_char);
  for (int b = 0; b < 256; ++b)
    byte_of_char[char_of_byte[b]] = b;
  const char *key;
  json_t *v;
  char *raw = NULL;
  json_object_foreach(vocab, key, v) {
    json_int_t id = json_is_integer(v) ? json_integer_value(v) : -1;
    if (id < 0 || id >= INT32_MAX) {
      free(raw);
      return fail(L, "model.vocab", "ids must be integers in [0, 2^31), not the one of", key);
    }
    size_t len = strlen(key), n = len;
    char *r = realloc(raw, len + 1);
    if (!r) {
      free(raw);
      return fail(L, "model.vocab", "out of memory", NULL);
    }
    raw = r;
    memcpy(raw, key, len);
    if (t->byte_level)
      n = byte_level_key(key, len, byte_of_char, raw);
    if (tok_strmap_put(&t->vocab, raw, n, (int32_t)id) || set_token(t, id, raw, n)) {
      free(raw);
      return fail(L, "model.vocab", "out of memory", NULL);
    }
  }
  free(raw);
  for (int b = 0; b < 256; ++b) {
    char name[8];
    snprintf(name, sizeof name, "<0x%02X>", b);
    t->byte_token[b] = tok_strmap_get(&t->vocab, name, 6);
    char one = (char)b;
    t->byte_symbol[b] = t->byte_level ? tok_strmap_get(&t->vocab, &one, 1) : -1;
  }
  return 0;
}

// One merge: "left right" (tokenizers < 0.20) or ["left", "right"].
static int load_merge(loader *L, tok_tokenizer *t, json_t *m, size_t rank) {
  char field[64];
  snprintf(field, sizeof field, "model.merges[%zu]", rank);
  const char *a, *b;
  char *owned = NULL;
  if (json_is_string(m)) {
    owned = strdup(json_string_value(m));
    char *space = owned ? strchr(owned, ' ') : NULL;
    if (!space || strchr(space + 1, ' '))
      return free(owned), fail(L, field, "must be two tokens separated by one space:",
                               json_string_value(m));
    *space = 0;
    a = owned;
    b = space + 1;
  } else if (json_is_array(m) && json_array_size(m) == 2 &&
             json_is_string(json_array_get(m, 0)) && json_is_string(json_array_get(m, 1))) {
    a = json_string_value(json_array_get(m, 0));
    b = json_string_value(json_array_get(m, 1));
  } else
    return fail(L, field, "must be a string \"a b\" or a pair [\"a\", \"b\"]", NULL);
  int32_t char_of_byte[256], byte_of_char[324];
  byte_chars(char_of_byte);
  memset(byte_of_char, -1, sizeof byte_of_char);
  for (int k = 0; k < 256; ++k)
    byte_of_char[char_of_byte[k]] = k;
  size_t la = strlen(a), lb = strlen(b);
  char *joined = malloc(la + lb + 1), *ra = malloc(la + 1), *rb = malloc(lb + 1);
  int rc = -1;
  if (!joined || !ra || !rb) {
    fail(L, field, "out of memory", NULL);
    goto done;
  }
  memcpy(joined, a, la);
  memcpy(joined + la, b, lb);
  size_t na = la, nb = lb, nj = la + lb;
  if (t->byte_level) {
    na = byte_level_key(a, la, byte_of_char, ra);
    nb = byte_level_key(b, lb, byte_of_char, rb);
    char *rj = malloc(la + lb + 1);
    if (!rj) {
      fail(L, field, "out of memory", NULL);
      goto done;
    }
    nj = byte_level_key(joined, la + lb, byte_of_char, rj);
    free(joined);
    joined = rj;
  } else {
    memcpy(ra, a, la);
    memcpy(rb, b, lb);
  }
  int32_t ia = tok_strmap_get(&t->vocab, ra, na), ib = tok_strmap_get(&t->vocab, rb, nb);
  int32_t ij = tok_strmap_get(&t->vocab, joined, nj);
  if (ia < 0 || ib < 0 || ij < 0) {
    fail(L, field, "a token of the merge, or the merged one, is not in model.vocab:",
         ia < 0 ? a : ib < 0 ? b : "(the concatenation)");
    goto done;
  }
  rc = tok_pairmap_put(&t->merges, ia, ib, (int32_t)rank, ij) ? fail(L, field, "out of memory", NULL)
                                                              : 0;
done:
  free(owned);
  free(joined);
  free(ra);
  free(rb);
  return rc;
}

static int load_model(loader *L, tok_tokenizer *t, json_t *model) {
  const char *type = str_field(model, "type");
  if (!json_is_object(model))
    return fail(L, "model", "missing or not an object", NULL);
  if (type && strcmp(type, "BPE"))
    return fail(L, "model.type", "only BPE models are supported, not", type);
  if (!type && !json_object_get(model, "merges"))
    return fail(L, "model.type", "missing, and no merges: not a BPE model", NULL);
  static const char *refused[] = {"dropout", "continuing_subword_prefix", "end_of_word_suffix"};
  for (size_t i = 0; i < 3; ++i) {
    json_t *v = json_object_get(model, refused[i]);
    if (v && !json_is_null(v)) {
      char field[64];
      snprintf(field, sizeof field, "model.%s", refused[i]);
      return fail(L, field, "not supported (only null is)", NULL);
    }
  }
  t->byte_fallback = bool_field(model, "byte_fallback", false);
  t->fuse_unk = bool_field(model, "fuse_unk", false);
  t->ignore_merges = bool_field(model, "ignore_merges", false);
  if (load_vocab(L, t, json_object_get(model, "vocab")))
    return -1;
  json_t *merges = json_object_get(model, "merges");
  if (merges && !json_is_array(merges))
    return fail(L, "model.merges", "must be an array", NULL);
  for (size_t i = 0; i < json_array_size(merges); ++i)
    if (load_merge(L, t, json_array_get(merges, i), i))
      return -1;
  const char *unk = str_field(model, "unk_token");
  t->unk_id = -1;
  if (unk && (t->unk_id = tok_strmap_get(&t->vocab, unk, strlen(unk))) < 0)
    return fail(L, "model.unk_token", "is not in model.vocab:", unk);
  return 0;
}

static int load_added(loader *L, tok_tokenizer *t, json_t *list) {
  if (list && !json_is_array(list))
    return fail(L, "added_tokens", "must be an array", NULL);
  t->n_added = (int)json_array_size(list);
  t->added = calloc((size_t)t->n_added + 1, sizeof *t->added);
  if (!t->added)
    return fail(L, "added_tokens", "out of memory", NULL);
  for (int i = 0; i < t->n_added; ++i) {
    json_t *a = json_array_get(list, (size_t)i), *id = json_object_get(a, "id");
    const char *content = str_field(a, "content");
    char field[64];
    snprintf(field, sizeof field, "added_tokens[%d]", i);
    if (!content || !*content || !json_is_integer(id) || json_integer_value(id) < 0 ||
        json_integer_value(id) >= INT32_MAX)
      return fail(L, field, "needs a non-empty \"content\" and an \"id\" in [0, 2^31)", NULL);
    tok_added *e = &t->added[i];
    e->content = strdup(content);
    e->len = strlen(content);
    e->id = (int32_t)json_integer_value(id);
    e->special = bool_field(a, "special", false);
    e->normalized = bool_field(a, "normalized", !e->special);
    e->lstrip = bool_field(a, "lstrip", false);
    e->rstrip = bool_field(a, "rstrip", false);
    e->single_word = bool_field(a, "single_word", false);
    if (!e->content || set_token(t, e->id, content, e->len))
      return fail(L, field, "out of memory", NULL);
  }
  return 0;
}

// SentencePiece-style files have no pre-tokenizer: a whole line is one
// piece, and BPE over it is slow. A Replace normalizer turning ' ' into a
// character c (U+2581) gives word starts; when c is in the vocabulary and no
// vocabulary token holds c after another character, no merge can ever join
// the character before such a c with it, so BPE of the piece equals BPE of
// its words, each cached (an exact identity, checked here on the file).
static void find_word_boundary(tok_tokenizer *t) {
  const char *c = NULL;
  for (int i = 0; i < t->n_norms; ++i)
    if (t->norms[i].kind == TOK_NORM_REPLACE && t->norms[i].pattern.literal &&
        !strcmp(t->norms[i].pattern.literal, " ") && t->norms[i].content[0])
      c = t->norms[i].content;
  if (t->n_pres || !c || strlen(c) >= sizeof t->word_start)
    return;
  size_t cl = strlen(c);
  int32_t cp;
  if ((size_t)tok_utf8_decode(c, cl, 0, &cp) != cl || tok_strmap_get(&t->vocab, c, cl) < 0 ||
      t->unk_id < 0) // without unk, a dropped character could hide a boundary
    return;
  for (int64_t id = 0; id < t->n_ids; ++id) {
    const char *s = t->id_to_token[id].text;
    size_t n = s ? t->id_to_token[id].len : 0;
    for (size_t i = 1; i + cl <= n; ++i)
      if (!memcmp(s + i, c, cl) && (i < cl || memcmp(s + i - cl, c, cl)))
        return;
  }
  memcpy(t->word_start, c, cl + 1);
}

tok_tokenizer *tok_load(const char *path, char **error) {
  *error = NULL;
  json_error_t je;
  struct stat st;
  if (stat(path, &st) == 0 && !S_ISREG(st.st_mode)) {
    *error = tok_format("tokenizer '%s' is not a regular file (give the tokenizer.json itself)",
                        path);
    return NULL;
  }
  json_t *root = json_load_file(path, JSON_REJECT_DUPLICATES, &je);
  if (!root && je.line < 0) { // not opened: the OS's reason
    FILE *f = fopen(path, "rb");
    *error = tok_format("tokenizer '%s': cannot read it: %s", path,
                        f ? "read error" : strerror(errno));
    if (f)
      fclose(f);
    return NULL;
  }
  if (!root) {
    *error = tok_format("tokenizer '%s': line %d, column %d: %s", path, je.line, je.column,
                        je.text);
    return NULL;
  }
  tok_tokenizer *t = calloc(1, sizeof *t);
  loader L = {path, error};
  if (!t || !(t->path = strdup(path)))
    goto oom;
  if (!json_is_object(root)) {
    fail(&L, "(top level)", "must be an object", NULL);
    goto bad;
  }
  if (load_chain(&L, json_object_get(root, "pre_tokenizer"), "pre_tokenizer", "pretokenizers",
                 sizeof *t->pres, load_pretokenizer, (void **)&t->pres, &t->n_pres,
                 "pre_tokenizer") ||
      load_chain(&L, json_object_get(root, "normalizer"), "normalizer", "normalizers",
                 sizeof *t->norms, load_normalizer, (void **)&t->norms, &t->n_norms,
                 "normalizer") ||
      load_chain(&L, json_object_get(root, "decoder"), "decoder", "decoders", sizeof *t->decs,
                 load_decoder, (void **)&t->decs, &t->n_decs, "decoder"))
    goto bad;
  for (int i = 0; i < t->n_pres; ++i)
    t->byte_level |= t->pres[i].kind == TOK_PRE_BYTELEVEL;
  if (load_model(&L, t, json_object_get(root, "model")) ||
      load_added(&L, t, json_object_get(root, "added_tokens")))
    goto bad;
  for (int64_t id = 0; id < t->n_ids; ++id)
    if (t->id_to_token[id].text)
      t->vocab_size = id + 1;
  if (!t->vocab_size) {
    fail(&L, "model.vocab", "is empty", NULL);
    goto bad;
  }
  find_word_boundary(t);
  t->match = pcre2_match_data_create(4, NULL);
  if (!t->match)
    goto oom;
  json_decref(root);
  return t;
oom:
  if (!*error)
    *error = tok_format("tokenizer '%s': out of memory", path);
bad:
  json_decref(root);
  tok_free(t);
  return NULL;
}

void tok_free(tok_tokenizer *t) {
  if (!t)
    return;
  for (int i = 0; i < t->n_norms; ++i) {
    tok_pattern_free(&t->norms[i].pattern);
    free(t->norms[i].content);
  }
  for (int i = 0; i < t->n_pres; ++i)
    tok_pattern_free(&t->pres[i].pattern);
  for (int i = 0; i < t->n_decs; ++i) {
    tok_pattern_free(&t->decs[i].pattern);
    free(t->decs[i].content);
  }
  for (int i = 0; i < t->n_added; ++i)
    free(t->added[i].content);
  for (int64_t id = 0; id < t->n_ids; ++id)
    free(t->id_to_token[id].text);
  free(t->norms);
  free(t->pres);
  free(t->decs);
  free(t->added);
  free(t->id_to_token);
  tok_strmap_free(&t->vocab);
  tok_pairmap_free(&t->merges);
  tok_strmap_free(&t->cache);
  free(t->cache_spans);
  free(t->cache_ids.ids);
  pcre2_match_data_free(t->match);
  free(t->path);
  free(t);
}

int32_t tok_token_to_id(const tok_tokenizer *t, const char *token) {
  size_t len = strlen(token);
  for (int i = 0; i < t->n_added; ++i)
    if (t->added[i].len == len && !memcmp(t->added[i].content, token, len))
      return t->added[i].id;
  return tok_strmap_get(&t->vocab, token, len);
}

int64_t tok_vocab_size(const tok_tokenizer *t) { return t->vocab_size; }

int64_t tok_dropped(const tok_tokenizer *t) { return t->dropped; }
