// The tokenizer's parts, shared by the files of tools/shard-tokens: the
// loaded pipeline (normalizers, pre-tokenizers, BPE model, decoders, added
// tokens) and the small hash maps it runs on.
#ifndef SHARD_TOKENS_TOKENIZER_INTERNAL_H
#define SHARD_TOKENS_TOKENIZER_INTERNAL_H

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>
#include <stdbool.h>

#include "tokenizer.h"

//===----------------------------------------------------------------------===//
// Hash maps
//===----------------------------------------------------------------------===//

// Byte string -> int32 (open addressing, FNV-1a). Keys are copied.
typedef struct {
  int32_t *slots;   // entry index + 1; 0 = empty
  uint32_t mask;    // slot count - 1 (a power of two)
  struct tok_strmap_entry {
    uint32_t off, len, hash;
    int32_t value;
  } *entries;
  size_t count, cap;
  tok_buf keys;
} tok_strmap;

int tok_strmap_put(tok_strmap *m, const char *key, size_t len, int32_t value); // 0 / -1 OOM
int32_t tok_strmap_get(const tok_strmap *m, const char *key, size_t len);    // -1 if absent
void tok_strmap_free(tok_strmap *m);

// (left id, right id) -> (merge rank, merged id).
typedef struct {
  uint64_t *keys; // (left << 32 | right) + 1; 0 = empty
  int32_t *rank, *merged;
  uint32_t mask;
  size_t count;
} tok_pairmap;

int tok_pairmap_put(tok_pairmap *m, int32_t left, int32_t right, int32_t rank, int32_t merged);
bool tok_pairmap_get(const tok_pairmap *m, int32_t left, int32_t right, int32_t *rank,
                     int32_t *merged);
void tok_pairmap_free(tok_pairmap *m);

//===----------------------------------------------------------------------===//
// The pipeline
//===----------------------------------------------------------------------===//

typedef enum {
  TOK_NORM_NFC, TOK_NORM_NFD, TOK_NORM_NFKC, TOK_NORM_NFKD, TOK_NORM_LOWERCASE,
  TOK_NORM_STRIP, TOK_NORM_REPLACE, TOK_NORM_PREPEND
} tok_norm_kind;

// A literal or a regex pattern, as tokenizers' `{"String": s}` / `{"Regex": r}`.
typedef struct {
  char *literal;     // NULL for a regex
  size_t literal_len;
  pcre2_code *regex; // JIT-compiled, UTF + UCP
} tok_pattern;

typedef struct {
  tok_norm_kind kind;
  tok_pattern pattern; // Replace
  char *content;       // Replace: the replacement; Prepend: the prefix
  bool left, right;    // Strip
} tok_normalizer;

typedef enum { TOK_PRE_SPLIT, TOK_PRE_BYTELEVEL, TOK_PRE_METASPACE } tok_pre_kind;

// tokenizers' SplitDelimiterBehavior.
typedef enum {
  TOK_SPLIT_REMOVED, TOK_SPLIT_ISOLATED, TOK_SPLIT_MERGED_WITH_PREVIOUS,
  TOK_SPLIT_MERGED_WITH_NEXT, TOK_SPLIT_CONTIGUOUS
} tok_split_behavior;

typedef enum { TOK_PREPEND_ALWAYS, TOK_PREPEND_FIRST, TOK_PREPEND_NEVER } tok_prepend_scheme;

typedef struct {
  tok_pre_kind kind;
  tok_pattern pattern;          // Split; ByteLevel with use_regex: the GPT-2 regex
  tok_split_behavior behavior;  // Split
  bool invert;                  // Split
  bool add_prefix_space;        // ByteLevel
  bool use_regex;               // ByteLevel
  char replacement[8];          // Metaspace: UTF-8 of the replacement char
  tok_prepend_scheme prepend;   // Metaspace
  bool split;                   // Metaspace
} tok_pretokenizer;

typedef enum {
  TOK_DEC_BYTELEVEL, TOK_DEC_REPLACE, TOK_DEC_BYTEFALLBACK, TOK_DEC_FUSE, TOK_DEC_STRIP,
  TOK_DEC_METASPACE
} tok_dec_kind;

typedef struct {
  tok_dec_kind kind;
  tok_pattern pattern;        // Replace
  char *content;              // Replace: replacement; Strip: the char (UTF-8)
  int start, stop;            // Strip
  char replacement[8];        // Metaspace
  tok_prepend_scheme prepend; // Metaspace
} tok_decoder;

typedef struct {
  char *content;
  size_t len;
  int32_t id;
  bool special, normalized, lstrip, rstrip, single_word;
} tok_added;

struct tok_tokenizer {
  char *path;
  tok_normalizer *norms;
  int n_norms;
  tok_pretokenizer *pres;
  int n_pres;
  tok_decoder *decs;
  int n_decs;
  tok_added *added;
  int n_added;
  // BPE model. With a ByteLevel pre-tokenizer the vocabulary is stored as
  // the raw bytes its GPT-2 characters stand for, so pieces are never mapped.
  bool byte_level;
  tok_strmap vocab;
  struct { char *text; uint32_t len; } *id_to_token; // model vocabulary, by id
  int64_t n_ids;                                     // size of id_to_token
  tok_pairmap merges;
  int32_t unk_id; // -1: none
  bool byte_fallback, fuse_unk, ignore_merges;
  int32_t byte_token[256]; // byte_fallback: id of "<0xHH>", or -1
  int32_t byte_symbol[256]; // byte-level: id of each byte's character, or -1
  int64_t vocab_size;
  // Word cache: piece -> span of `cache_ids` (results never depend on it).
  tok_strmap cache;
  struct { uint32_t off, count; } *cache_spans;
  size_t n_cache_spans, cap_cache_spans;
  tok_ids cache_ids;
  // Word boundaries in a piece that BPE can never merge across (see
  // find_word_boundary in tokenizer_json.c): before each `word_start`
  // character that follows another character. Empty: none known.
  char word_start[8];
  pcre2_match_data *match;
  int64_t dropped; // characters dropped: not in the vocabulary, no unk token
};

// tokenizer_json.c
int tok_pattern_compile(tok_pattern *p, const char *regex, char **error, const char *where);
void tok_pattern_free(tok_pattern *p);

// One match of `p` in s[start..len): sets [*ms, *me) and returns 1, or 0
// when there is none, or -1 on a regex engine error (*error set).
int tok_pattern_next(const tok_pattern *p, pcre2_match_data *md, const char *s, size_t len,
                     size_t start, size_t *ms, size_t *me, char **error);

// normalize.c: `in` normalized by the chain into `out` (replaced).
int tok_normalize(const tok_tokenizer *t, const char *in, size_t len, tok_buf *out,
                  char **error);

// pretokenize.c: a piece list (offsets into `text`) and the chain.
typedef struct {
  tok_buf text;
  struct tok_piece { size_t off, len; bool first; } *pieces;
  size_t count, cap;
} tok_pieces;

int tok_pieces_add(tok_pieces *p, const char *s, size_t len, bool first);
void tok_pieces_free(tok_pieces *p);
int tok_pretokenize(tok_tokenizer *t, const char *s, size_t len, bool first, tok_pieces *out,
                    char **error);

// bpe.c: the ids of one pre-tokenized piece.
int tok_bpe(tok_tokenizer *t, const char *piece, size_t len, tok_ids *out);

// added_tokens.c: calls `text_fn` for each stretch between added tokens of
// the group (normalized or not) and appends matched token ids to `out`.
typedef int (*tok_text_fn)(tok_tokenizer *t, const char *s, size_t len, bool first,
                           tok_ids *out, char **error);
int tok_split_added(tok_tokenizer *t, bool normalized, const char *s, size_t len, bool first,
                    tok_text_fn text_fn, tok_ids *out, char **error);

// normalize.c: Rust's char::is_whitespace.
bool tok_is_whitespace(int32_t c);

// utf8.c
int tok_utf8_decode(const char *s, size_t len, size_t i, int32_t *cp); // bytes, or 0 if invalid
int tok_utf8_encode(int32_t cp, char out[4]);                          // bytes
int tok_utf8_lossy(const char *s, size_t len, tok_buf *out); // invalid runs -> U+FFFD

#endif // SHARD_TOKENS_TOKENIZER_INTERNAL_H
