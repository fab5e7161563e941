// shard-tokens' corpus (corpus.h).
#include "corpus.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

// Records a document [start, ids.count) with `prompt` prompt tokens; an
// empty one is dropped. Returns -1 when out of memory.
static int record(corpus *c, int64_t start, int64_t prompt) {
  if ((int64_t)c->ids.count == start)
    return 0;
  if (c->docs + 2 > c->cap) {
    int64_t n = c->cap ? 2 * c->cap : 64;
    int64_t *s = realloc(c->starts, (size_t)n * sizeof *s);
    if (s)
      c->starts = s;
    int64_t *p = s ? realloc(c->prompts, (size_t)n * sizeof *p) : NULL;
    if (!p)
      return -1;
    c->prompts = p;
    c->cap = n;
  }
  c->starts[c->docs] = start;
  c->prompts[c->docs++] = prompt;
  c->starts[c->docs] = (int64_t)c->ids.count;
  return 0;
}

static int out_of_memory(const char *where) {
  fprintf(stderr, "shard-tokens: %s: out of memory\n", where);
  return -1;
}

int corpus_document(corpus *c, tok_tokenizer *t, const char *where, const char *text,
                    size_t len, int32_t bos, int32_t eos) {
  int64_t bad = tok_utf8_check(text, len);
  if (bad >= 0) {
    fprintf(stderr, "shard-tokens: %s: invalid UTF-8 at byte offset %lld (byte 0x%02X)\n",
            where, (long long)bad, (unsigned char)text[bad]);
    return -1;
  }
  int64_t start = (int64_t)c->ids.count;
  char *error = NULL;
  if ((bos >= 0 && tok_ids_push(&c->ids, bos)) || tok_encode(t, text, len, &c->ids, &error) ||
      (eos >= 0 && tok_ids_push(&c->ids, eos))) {
    fprintf(stderr, "shard-tokens: %s: %s\n", where, error ? error : "out of memory");
    free(error);
    return -1;
  }
  return record(c, start, 0) ? out_of_memory(where) : 0;
}

// Counts a pair whose prompt ids (`p`, after `lead` BOS tokens) are not
// the first ids of the pair at `start`.
static void check_prefix(corpus *c, const char *where, int64_t start, int64_t lead,
                         const tok_ids *p) {
  int64_t have = (int64_t)c->ids.count - start - lead;
  bool prefix = have >= (int64_t)p->count &&
                (!p->count || // memcmp takes no NULL, even for 0 bytes
                 !memcmp(c->ids.ids + start + lead, p->ids, p->count * sizeof *p->ids));
  if (!prefix && c->mismatched++ == 0)
    snprintf(c->first_mismatch, sizeof c->first_mismatch, "%s", where);
}

int corpus_pair(corpus *c, tok_tokenizer *t, const char *where, const char *prompt,
                size_t prompt_len, const char *completion, size_t completion_len, int32_t bos,
                int32_t eos) {
  if (completion_len == 0) {
    fprintf(stderr, "shard-tokens: %s: empty completion: a pair needs tokens to learn\n", where);
    return -1;
  }
  int64_t start = (int64_t)c->ids.count, lead = bos >= 0;
  tok_ids p = {0};
  char *joined = malloc(prompt_len + completion_len), *error = NULL;
  if (joined) {
    memcpy(joined, prompt, prompt_len);
    memcpy(joined + prompt_len, completion, completion_len);
  }
  int rc = !joined || (bos >= 0 && tok_ids_push(&c->ids, bos)) ||
           tok_encode(t, prompt, prompt_len, &p, &error) ||
           tok_encode(t, joined, prompt_len + completion_len, &c->ids, &error);
  free(joined);
  int64_t body = (int64_t)c->ids.count - start - lead; // the ids of prompt + completion
  if (!rc && eos >= 0 && (body == 0 || c->ids.ids[c->ids.count - 1] != eos))
    rc = tok_ids_push(&c->ids, eos);
  if (rc) {
    fprintf(stderr, "shard-tokens: %s: %s\n", where, error ? error : "out of memory");
    free(error);
    free(p.ids);
    return -1;
  }
  check_prefix(c, where, start, lead, &p);
  int64_t length = (int64_t)c->ids.count - start, prompt_tokens = lead + (int64_t)p.count;
  free(p.ids);
  // The prompt alone may hold more ids than the pair's start (a merge
  // across the boundary): at most the whole pair is prompt.
  if (prompt_tokens > length)
    prompt_tokens = length;
  c->pairs += 1;
  c->prompt_tokens += prompt_tokens;
  return record(c, start, prompt_tokens) ? out_of_memory(where) : 0;
}

int corpus_write(const corpus *c, const char *out, int64_t vocab,
                 const srt_tokenizer_identity *tok) {
  int64_t n = (int64_t)c->ids.count;
  int64_t *wide = malloc((size_t)(n ? n : 1) * sizeof *wide);
  if (!wide)
    return out_of_memory(out);
  for (int64_t i = 0; i < n; ++i)
    wide[i] = c->ids.ids[i];
  int64_t zero = 0;
  srt_status s = !tok ? srt_tokens_write(out, wide, n, vocab)
                      : srt_tokens_write_documents(out, wide, n, vocab,
                                                   c->docs ? c->starts : &zero, c->prompts,
                                                   c->docs, tok);
  free(wide);
  if (s) {
    fprintf(stderr, "shard-tokens: %s\n", srt_status_message(s));
    srt_status_free(s);
    return -1;
  }
  return 0;
}

void corpus_free(corpus *c) {
  free(c->ids.ids);
  free(c->starts);
  free(c->prompts);
  *c = (corpus){.docs = 0};
}
