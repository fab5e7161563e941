// shard-tokens' corpus: the ids of every document so far and the document
// index of the version 2 token file (docs/data.md): where each document
// starts and how many of its first tokens are prompt (no loss). Documents
// are plain texts (BOS, text, EOS) or TRL prompt-completion pairs.
#ifndef SHARD_TOKENS_CORPUS_H
#define SHARD_TOKENS_CORPUS_H

#include <stdint.h>

#include "shardrt/tokens.h"
#include "tokenizer.h"

typedef struct {
  tok_ids ids;
  int64_t *starts, *prompts; // docs + 1 starts (the last: ids.count), docs prompts
  int64_t docs, cap;
  int64_t pairs;             // prompt-completion documents
  int64_t prompt_tokens;     // their prompt tokens (BOS included)
  int64_t mismatched;        // pairs whose prompt ids are not a prefix of the pair's
  char first_mismatch[512];  // where the first one is
} corpus;

// Appends one document: BOS (bos >= 0), the ids of `text`, EOS (eos >= 0).
// A document of no tokens (an empty text, no BOS/EOS) is not recorded.
// `where` names it in errors ("'a.txt'", "'b.jsonl' line 3"). Returns 0, or
// -1 after printing the error (invalid UTF-8, out of memory).
int corpus_document(corpus *c, tok_tokenizer *t, const char *where, const char *text,
                    size_t len, int32_t bos, int32_t eos);

// Appends a prompt-completion pair as TRL's SFTTrainer tokenizes one
// (standard, not conversational; docs/data.md): BOS, the ids of
// prompt + completion (one text), then EOS unless those ids already end
// with it; the prompt length is BOS plus the ids of the prompt alone. When
// those are not the first ids of the pair (a token that spans the
// boundary) the length is kept, as TRL keeps it, and the pair is counted
// in c->mismatched. An empty completion is refused. Returns 0, or -1 after
// printing the error naming `where`.
int corpus_pair(corpus *c, tok_tokenizer *t, const char *where, const char *prompt,
                size_t prompt_len, const char *completion, size_t completion_len, int32_t bos,
                int32_t eos);

// Writes the corpus to `out` as a version 2 token file of vocabulary
// `vocab` made by `tok` (NULL: a version 1 file, tokens only). Returns 0,
// or -1 after printing the error.
int corpus_write(const corpus *c, const char *out, int64_t vocab,
                 const srt_tokenizer_identity *tok);

void corpus_free(corpus *c);

#endif // SHARD_TOKENS_CORPUS_H
