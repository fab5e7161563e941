// The document structure of a Hugging Face batch (--batch-file): the
// rotary position and the document index (segment) of every token, from the
// batch's optional `position_ids` and `attention_mask`, read the way
// transformers 5 reads them (masking_utils: _preprocess_mask_arguments,
// find_packed_sequence_indices, padding_mask_function; the decoder models'
// default position_ids):
// - no position_ids: positions 0..S-1 in every row (the models' arange);
// - no attention_mask: packing is inferred from the positions, a new
//   document starting wherever a position is not the previous one plus 1
//   (the first token of a row opens document 0 whatever its position, so a
//   row may start inside a split document, at position k);
// - an attention_mask: 0 marks a padded key (segment -1), every other token
//   of the row is one document (segment 0), and packing is not inferred from
//   the positions, since masking_utils looks for packed sequences only when
//   no 2D mask is given; a label scored right after padding is refused
//   (train_documents_check_labels), as its logits are a padding query's.
#include <inttypes.h>
#include <string.h>

#include "train_internal.h"

// Element i of an integer tensor (I64, I32, I8, U8 or BOOL) stored at an
// unaligned address.
static int64_t element(const srt_tensor_info *t, int64_t i) {
  const uint8_t *at = (const uint8_t *)t->data + (size_t)i * srt_dtype_size(t->dtype);
  switch (t->dtype) {
  case SRT_I64: {
    int64_t v;
    memcpy(&v, at, sizeof v);
    return v;
  }
  case SRT_I32: {
    int32_t v;
    memcpy(&v, at, sizeof v);
    return v;
  }
  case SRT_I8:
    return (int8_t)*at;
  default: // U8, BOOL: one byte
    return *at;
  }
}

// Checks that tensor `name` of batch file `file` is [batch, seq] of one of
// `n` dtypes `ok` (listed in `ok_text` for the message).
static srt_status check_layout(const char *file, const char *name, const srt_tensor_info *t,
                               int64_t batch, int64_t seq, const srt_dtype *ok, int n,
                               const char *ok_text) {
  bool dtype_ok = false;
  for (int i = 0; i < n; ++i)
    dtype_ok |= t->dtype == ok[i];
  if (dtype_ok && t->rank == 2 && t->shape[0] == batch && t->shape[1] == seq)
    return NULL;
  char shape[160];
  return SRT_ERROR(SRT_INVALID_ARGUMENT,
                   "batch file '%s': '%s' must be %s [%lld, %lld] (the program's batch and "
                   "sequence length), got %s %s",
                   file, name, ok_text, (long long)batch, (long long)seq,
                   srt_dtype_name(t->dtype), srt_shape_format(shape, sizeof shape, t->rank, t->shape));
}

// Every position in [0, max_positions).
static srt_status check_positions(const char *file, const srt_tensor_info *t,
                                  int64_t max_positions) {
  int64_t seq = t->shape[1], n = t->shape[0] * seq;
  for (int64_t i = 0; i < n; ++i) {
    int64_t v = element(t, i);
    if (v < 0)
      return SRT_ERROR(SRT_INVALID_ARGUMENT,
                       "batch file '%s': position_ids[%lld][%lld] = %" PRId64 " is negative",
                       file, (long long)(i / seq), (long long)(i % seq), v);
    if (v >= max_positions)
      return SRT_ERROR(SRT_INVALID_ARGUMENT,
                       "batch file '%s': position_ids[%lld][%lld] = %" PRId64
                       " is not below the model's max_position_embeddings %lld",
                       file, (long long)(i / seq), (long long)(i % seq), v,
                       (long long)max_positions);
  }
  return NULL;
}

// Every mask value 0 or 1 (a BOOL byte other than 0 and 1 is no bool), and
// padding only at the ends of a row: transformers keeps the two sides of a
// hole (1 0 1) one document, which runs of segment ids cannot say.
static srt_status check_mask(const char *file, const srt_tensor_info *t) {
  int64_t seq = t->shape[1], n = t->shape[0] * seq;
  int64_t hole = -1; // the first 0 after a 1 in this row, or -1
  for (int64_t i = 0; i < n; ++i) {
    int64_t v = element(t, i);
    if (v != 0 && v != 1)
      return SRT_ERROR(SRT_INVALID_ARGUMENT,
                       "batch file '%s': attention_mask[%lld][%lld] = %" PRId64
                       " is neither 0 (padding) nor 1 (a token)",
                       file, (long long)(i / seq), (long long)(i % seq), v);
    if (i % seq == 0)
      hole = -1;
    if (v == 0 && hole < 0 && i % seq > 0 && element(t, i - 1) == 1)
      hole = i;
    if (v == 1 && hole >= 0)
      return SRT_ERROR(SRT_INVALID_ARGUMENT,
                       "batch file '%s': attention_mask row %lld has padding at column %lld "
                       "between tokens (columns %lld and %lld): only left and right padding "
                       "are taken (a hole would keep both sides one document in transformers; "
                       "give position_ids and segment_ids instead)",
                       file, (long long)(i / seq), (long long)(hole % seq),
                       (long long)(hole % seq - 1), (long long)(i % seq));
  }
  return NULL;
}

// Row `row`'s positions and segments (seq each) into pos, seg.
static void fill_row(const srt_tensor_info *position_ids, const srt_tensor_info *attention_mask,
                     int64_t row, int64_t seq, int64_t *pos, int64_t *seg) {
  int64_t doc = 0;
  for (int64_t t = 0; t < seq; ++t) {
    int64_t i = row * seq + t;
    pos[t] = position_ids ? element(position_ids, i) : t;
    if (attention_mask)
      seg[t] = element(attention_mask, i) ? 0 : -1;
    else {
      doc += t > 0 && pos[t] != pos[t - 1] + 1;
      seg[t] = doc;
    }
  }
}

srt_status train_documents(const char *file, const srt_tensor_info *position_ids,
                           const srt_tensor_info *attention_mask, int64_t batch, int64_t seq,
                           int64_t max_positions, int64_t first_row, int64_t rows,
                           int64_t *positions, int64_t *segments) {
  static const srt_dtype pos_types[] = {SRT_I64};
  static const srt_dtype mask_types[] = {SRT_I64, SRT_I32, SRT_I8, SRT_U8, SRT_BOOL};
  if (first_row < 0 || rows < 0 || first_row + rows > batch)
    return SRT_ERROR(SRT_INVALID_ARGUMENT,
                     "batch file '%s': rows [%lld, %lld) are not rows of a batch of %lld", file,
                     (long long)first_row, (long long)(first_row + rows), (long long)batch);
  if (position_ids) {
    SRT_RETURN_IF_ERROR(
        check_layout(file, "position_ids", position_ids, batch, seq, pos_types, 1, "I64"));
    SRT_RETURN_IF_ERROR(check_positions(file, position_ids, max_positions));
  }
  if (attention_mask) {
    SRT_RETURN_IF_ERROR(check_layout(file, "attention_mask", attention_mask, batch, seq,
                                     mask_types, 5, "I64, I32, I8, U8 or BOOL"));
    SRT_RETURN_IF_ERROR(check_mask(file, attention_mask));
  }
  for (int64_t r = 0; r < rows; ++r)
    fill_row(position_ids, attention_mask, first_row + r, seq, positions + r * seq,
             segments + r * seq);
  return NULL;
}

srt_status train_documents_check_labels(const char *file, const srt_tensor_info *labels,
                                        const srt_tensor_info *attention_mask,
                                        const srt_tensor_info *segment_ids) {
  if (!attention_mask && !segment_ids)
    return NULL;
  int64_t seq = labels->shape[1], n = labels->shape[0] * seq;
  for (int64_t i = 0; i < n; ++i) {
    int64_t label;
    memcpy(&label, (const uint8_t *)labels->data + (size_t)i * sizeof label, sizeof label);
    if (i % seq == 0 || label == -100)
      continue;
    bool padding = attention_mask ? element(attention_mask, i - 1) == 0
                                  : element(segment_ids, i - 1) == -1;
    if (!padding)
      continue;
    return SRT_ERROR(SRT_INVALID_ARGUMENT,
                     "batch file '%s': labels[%lld][%lld] = %lld is scored, but the logits "
                     "that predict it are those of token %lld, padding (%s), which attends to "
                     "no key here (transformers' eager attention still lets it attend, so the "
                     "two losses would differ): set the label to -100, as a padded position "
                     "carries no loss",
                     file, (long long)(i / seq), (long long)(i % seq), (long long)label,
                     (long long)(i % seq - 1),
                     attention_mask ? "attention_mask 0" : "segment_ids -1");
  }
  return NULL;
}

srt_status train_documents_segments(const char *file, const srt_tensor_info *segment_ids,
                                    int64_t batch, int64_t seq, int64_t first_row, int64_t rows,
                                    int64_t *segments) {
  static const srt_dtype types[] = {SRT_I64};
  SRT_RETURN_IF_ERROR(check_layout(file, "segment_ids", segment_ids, batch, seq, types, 1, "I64"));
  for (int64_t r = 0; r < batch; ++r) {
    int64_t last = -1; // the largest document id seen in the row
    for (int64_t t = 0; t < seq; ++t) {
      int64_t i = r * seq + t, v = element(segment_ids, i);
      bool starts = v >= 0 && (t == 0 || element(segment_ids, i - 1) != v);
      if (v < -1 || (starts && v <= last))
        return SRT_ERROR(SRT_INVALID_ARGUMENT,
                         "batch file '%s': segment_ids[%lld][%lld] = %lld: %s", file,
                         (long long)r, (long long)t, (long long)v,
                         v < -1 ? "below -1 (-1 is padding)"
                                : "a document must have a larger id than every earlier one "
                                  "of its row, and its tokens must be contiguous");
      if (v > last)
        last = v;
    }
  }
  for (int64_t i = 0; i < rows * seq; ++i)
    segments[i] = element(segment_ids, first_row * seq + i);
  return NULL;
}
