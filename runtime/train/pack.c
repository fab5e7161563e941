// Packing documents into rows (train_internal.h, docs/data.md "Packed
// documents"): the row plan of one epoch (next-fit in file order, documents
// longer than a row split into row-sized pieces) and the filling of any
// step's rows from it.
#include <stdlib.h>

#include "train_internal.h"

void train_pack_plan_free(train_pack_plan *plan) {
  free(plan->row_first);
  free(plan->pieces);
  *plan = (train_pack_plan){.seq = 0};
}

// Appends piece (doc, offset, length) to the current row of `plan`
// (capacity *cap, grown as needed). Returns -1 when out of memory.
static int push_piece(train_pack_plan *plan, int64_t *cap, int64_t doc, int64_t offset,
                      int64_t length) {
  if (plan->num_pieces == *cap) {
    int64_t n = *cap ? 2 * *cap : 64;
    train_pack_piece *grown = realloc(plan->pieces, (size_t)n * sizeof *grown);
    if (!grown)
      return -1;
    plan->pieces = grown;
    *cap = n;
  }
  plan->pieces[plan->num_pieces++] = (train_pack_piece){doc, offset, length};
  return 0;
}

// Ends the current row (when it holds a piece): its pieces end here.
static int close_row(train_pack_plan *plan, int64_t *cap_rows, int64_t *used) {
  if (*used == 0)
    return 0;
  if (plan->rows + 2 > *cap_rows) {
    int64_t n = 2 * *cap_rows;
    int64_t *grown = realloc(plan->row_first, (size_t)n * sizeof *grown);
    if (!grown)
      return -1;
    plan->row_first = grown;
    *cap_rows = n;
  }
  plan->row_first[++plan->rows] = plan->num_pieces;
  *used = 0;
  return 0;
}

// Places document d (`length` tokens) after what the current row holds
// (*used tokens): next-fit, splitting a document longer than a row.
static int place(train_pack_plan *plan, int64_t d, int64_t length, int64_t *cap,
                 int64_t *cap_rows, int64_t *used) {
  int64_t seq = plan->seq, offset = 0;
  if (*used + length > seq && close_row(plan, cap_rows, used))
    return -1;
  // A document longer than a row: full rows, then its tail opens a row
  // that the next documents may share.
  for (; length - offset > seq; offset += seq) {
    *used = seq;
    if (push_piece(plan, cap, d, offset, seq) || close_row(plan, cap_rows, used))
      return -1;
  }
  *used += length - offset;
  if (push_piece(plan, cap, d, offset, length - offset))
    return -1;
  return *used == seq ? close_row(plan, cap_rows, used) : 0;
}

srt_status train_pack_plan_build(const int64_t *starts, const int64_t *prompts,
                                 int64_t documents, int64_t seq, train_pack_plan *out) {
  *out = (train_pack_plan){.seq = seq, .starts = starts, .prompts = prompts,
                           .documents = documents};
  if (seq <= 0 || documents <= 0)
    return SRT_ERROR(SRT_INVALID_ARGUMENT,
                     "packing: %lld documents into rows of %lld tokens (need both > 0)",
                     (long long)documents, (long long)seq);
  int64_t cap = 0, cap_rows = 64, used = 0;
  out->row_first = malloc((size_t)cap_rows * sizeof *out->row_first);
  int failed = !out->row_first;
  if (!failed)
    out->row_first[0] = 0;
  for (int64_t d = 0; d < documents && !failed; ++d)
    failed = place(out, d, starts[d + 1] - starts[d], &cap, &cap_rows, &used);
  if (!failed)
    failed = close_row(out, &cap_rows, &used);
  if (failed) {
    train_pack_plan_free(out);
    return SRT_ERROR(SRT_RESOURCE_EXHAUSTED, "packing: out of memory (%lld documents)",
                     (long long)documents);
  }
  return NULL;
}

// The epoch row that global row `row` of step `step` reads: step k's row r
// is row ((k - 1) * batch + r) of the endless repetition of the epoch.
static srt_status epoch_row(const train_pack_plan *plan, int64_t step, int64_t batch,
                            int64_t row, int64_t *out) {
  if (step < 1 || batch <= 0 || row < 0 || row >= batch || step - 1 > (INT64_MAX - batch) / batch)
    return SRT_ERROR(SRT_INVALID_ARGUMENT,
                     "packing: step %lld, row %lld of a batch of %lld (need step >= 1, the row "
                     "within the batch, (step - 1) x batch within int64)",
                     (long long)step, (long long)row, (long long)batch);
  *out = ((step - 1) * batch + row) % plan->rows;
  return NULL;
}

srt_status train_pack_stats_of(const train_pack_plan *plan, int64_t step, int64_t batch,
                               int64_t row0, int64_t rows, train_pack_stats *stats) {
  *stats = (train_pack_stats){.rows = rows};
  for (int64_t r = 0; r < rows; ++r) {
    int64_t e = 0;
    SRT_RETURN_IF_ERROR(epoch_row(plan, step, batch, row0 + r, &e));
    stats->documents += plan->row_first[e + 1] - plan->row_first[e];
    for (int64_t i = plan->row_first[e]; i < plan->row_first[e + 1]; ++i)
      stats->tokens += plan->pieces[i].length;
  }
  stats->padding = rows * plan->seq - stats->tokens;
  return NULL;
}

// Fills one row (`seq` entries of each output) from epoch row `e`.
static srt_status fill_row(const train_pack_plan *plan, int64_t e, int64_t pad_id,
                           train_token_reader read, const void *source,
                           const train_pack_rows *out, int64_t at) {
  int64_t t = 0;
  for (int64_t i = plan->row_first[e]; i < plan->row_first[e + 1]; ++i) {
    const train_pack_piece *pc = &plan->pieces[i];
    int64_t *ids = out->ids + at + t;
    SRT_RETURN_IF_ERROR(read(source, plan->starts[pc->doc] + pc->offset, pc->length, ids));
    for (int64_t j = 0; j < pc->length; ++j) {
      int64_t k = pc->offset + j; // the token's place in its document
      // No loss on prompt tokens nor on a document's first token (the
      // shifted loss would score it from the previous document's last).
      out->labels[at + t + j] = k == 0 || k < plan->prompts[pc->doc] ? -100 : ids[j];
      if (out->positions)
        out->positions[at + t + j] = k;
      if (out->segments)
        out->segments[at + t + j] = i - plan->row_first[e];
    }
    t += pc->length;
  }
  for (; t < plan->seq; ++t) {
    out->ids[at + t] = pad_id;
    out->labels[at + t] = -100;
    if (out->positions)
      out->positions[at + t] = 0;
    if (out->segments)
      out->segments[at + t] = -1;
  }
  return NULL;
}

srt_status train_pack_fill(const train_pack_plan *plan, int64_t step, int64_t batch,
                           int64_t row0, int64_t rows, int64_t pad_id, train_token_reader read,
                           const void *source, const train_pack_rows *out) {
  if (rows < 0 || row0 < 0 || row0 + rows > batch)
    return SRT_ERROR(SRT_INVALID_ARGUMENT,
                     "packing: rows [%lld, %lld) outside the batch of %lld", (long long)row0,
                     (long long)(row0 + rows), (long long)batch);
  for (int64_t r = 0; r < rows; ++r) {
    int64_t e = 0;
    SRT_RETURN_IF_ERROR(epoch_row(plan, step, batch, row0 + r, &e));
    SRT_RETURN_IF_ERROR(fill_row(plan, e, pad_id, read, source, out, r * plan->seq));
  }
  return NULL;
}
