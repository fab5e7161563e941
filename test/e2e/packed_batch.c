// Writes the two batch files of the packed-documents test (documents.sh):
// the same documents packed back to back and each alone in its own row.
//
// usage: packed_batch VOCAB PACKED.safetensors SOLO.safetensors JOINED.safetensors
//                     [CYCLED.safetensors DOCS.tokens]
//
// Batch 4 x 32. Documents: A_r of 12 and B_r of 20 tokens for r = 0, 1
// (token ids from a fixed LCG in [0, VOCAB)).
//   packed: row r (r < 2) = [A_r, B_r], rows 2 and 3 padding;
//   solo:   rows A_0, B_0, A_1, B_1, each followed by padding.
// position_ids restart at 0 in each document (transformers' padding-free
// convention) and are 0 on padding; segment_ids number the documents of a
// row from 0, -1 on padding. Labels are the input ids (the loss shifts
// them) except -100 at each document's first token (so no loss crosses a
// boundary) and on padding. Both batches predict the same tokens from the
// same contexts: with documents isolated, the loss and gradients of one
// step are the same on both, up to the order of the sums. JOINED is PACKED
// without position_ids and segment_ids (each row one sequence, documents
// attending across the boundary): the control that isolation changes
// something.
// DOCS is a version 2 token file of the four documents A_0, B_0, A_1, B_1
// in that order; CYCLED is the batch the driver's packer must make of it at
// every step (docs/data.md: next-fit fills row 0 with A_0 B_0 and row 1
// with A_1 B_1, exactly 32 tokens each, and a step's 4 rows cycle the
// epoch's 2): rows [A_0 B_0], [A_1 B_1], [A_0 B_0], [A_1 B_1], written here
// from the documents' definition, not by the packer.
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "shardrt/safetensors_write.h"
#include "shardrt/tokens.h"

enum { kRows = 4, kSeq = 32, kLenA = 12, kLenB = 20 };

typedef struct batch {
  int64_t ids[kRows][kSeq], labels[kRows][kSeq], pos[kRows][kSeq], seg[kRows][kSeq];
} batch;

// Appends document `doc` (n tokens) at column `at` of row r as segment s.
static void put(batch *b, int r, int at, const int64_t *doc, int n, int64_t s) {
  for (int t = 0; t < n; ++t) {
    b->ids[r][at + t] = doc[t];
    b->labels[r][at + t] = t == 0 ? -100 : doc[t];
    b->pos[r][at + t] = t;
    b->seg[r][at + t] = s;
  }
}

// Every position padding: id 0, label -100, position 0, segment -1.
static void clear(batch *b) {
  for (int r = 0; r < kRows; ++r)
    for (int t = 0; t < kSeq; ++t) {
      b->ids[r][t] = b->pos[r][t] = 0;
      b->labels[r][t] = -100;
      b->seg[r][t] = -1;
    }
}

// Writes `b` (its first `n` tensors: 2 leaves the documents out).
static int write_batch(const char *path, const batch *b, size_t n) {
  const int64_t shape[2] = {kRows, kSeq};
  srt_safetensors_entry e[4] = {
      {.name = "input_ids", .dtype = SRT_I64, .ndim = 2, .shape = shape, .data = b->ids},
      {.name = "labels", .dtype = SRT_I64, .ndim = 2, .shape = shape, .data = b->labels},
      {.name = "position_ids", .dtype = SRT_I64, .ndim = 2, .shape = shape, .data = b->pos},
      {.name = "segment_ids", .dtype = SRT_I64, .ndim = 2, .shape = shape, .data = b->seg},
  };
  srt_status s = srt_safetensors_write(path, e, n, NULL, 0);
  if (!s)
    return 0;
  fprintf(stderr, "packed_batch: %s\n", srt_status_message(s));
  srt_status_free(s);
  return 1;
}

// The next token id of the LCG state *x, in [0, vocab).
static int64_t next_id(uint32_t *x, long vocab) {
  *x = *x * 1664525u + 1013904223u;
  return (int64_t)(*x >> 8) % vocab;
}

// Writes the four documents as a version 2 token file (byte-level identity).
static int write_docs(const char *path, const int64_t a[2][kLenA], const int64_t b[2][kLenB],
                      long vocab) {
  int64_t tokens[2 * (kLenA + kLenB)], starts[5], prompts[4] = {0};
  int64_t n = 0, d = 0;
  for (int r = 0; r < 2; ++r) {
    starts[d++] = n;
    for (int t = 0; t < kLenA; ++t)
      tokens[n++] = a[r][t];
    starts[d++] = n;
    for (int t = 0; t < kLenB; ++t)
      tokens[n++] = b[r][t];
  }
  starts[4] = n;
  srt_tokenizer_identity id = {.kind = SRT_TOKENIZER_BYTES, .name = "bytes"};
  srt_status s = srt_tokens_write_documents(path, tokens, n, vocab, starts, prompts, 4, &id);
  if (!s)
    return 0;
  fprintf(stderr, "packed_batch: %s\n", srt_status_message(s));
  srt_status_free(s);
  return 1;
}

int main(int argc, char **argv) {
  long vocab = argc == 5 || argc == 7 ? strtol(argv[1], NULL, 10) : 0;
  if (vocab < 2) {
    fprintf(stderr, "usage: packed_batch VOCAB PACKED.safetensors SOLO.safetensors "
                    "JOINED.safetensors [CYCLED.safetensors DOCS.tokens]\n");
    return 2;
  }
  int64_t a[2][kLenA], bdoc[2][kLenB];
  uint32_t x = 12345;
  for (int r = 0; r < 2; ++r) {
    for (int t = 0; t < kLenA; ++t)
      a[r][t] = next_id(&x, vocab);
    for (int t = 0; t < kLenB; ++t)
      bdoc[r][t] = next_id(&x, vocab);
  }
  static batch packed, solo, cycled;
  clear(&packed);
  clear(&solo);
  for (int r = 0; r < 2; ++r) {
    put(&packed, r, 0, a[r], kLenA, 0);
    put(&packed, r, kLenA, bdoc[r], kLenB, 1);
    put(&solo, 2 * r, 0, a[r], kLenA, 0);
    put(&solo, 2 * r + 1, 0, bdoc[r], kLenB, 0);
  }
  for (int r = 0; r < kRows; ++r) {
    put(&cycled, r, 0, a[r % 2], kLenA, 0);
    put(&cycled, r, kLenA, bdoc[r % 2], kLenB, 1);
  }
  if (write_batch(argv[2], &packed, 4) || write_batch(argv[3], &solo, 4) ||
      write_batch(argv[4], &packed, 2))
    return 1;
  return argc == 7 && (write_batch(argv[5], &cycled, 4) || write_docs(argv[6], a, bdoc, vocab));
}
