// --batch-file: the batch of every step from a safetensors file instead of
// token-file windows, for checks against a reference that computed the same
// batch (test/golden) and for batches a Hugging Face collator wrote:
// input_ids and labels (I64 [batch, seq]), and optionally position_ids and
// attention_mask, read into positions and document segments by
// train_documents (documents.c), or position_ids and the step's own
// segment_ids (train_documents_segments). Any other tensor is refused: a name the
// driver would not read means the file holds something it would silently
// train without.
#include <inttypes.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "shardrt/safetensors.h"
#include "train_internal.h"

// The tensors a batch file may hold.
static const char *const batch_tensors[] = {"input_ids", "labels", "position_ids",
                                            "attention_mask", "segment_ids"};
enum { NUM_BATCH_TENSORS = sizeof batch_tensors / sizeof batch_tensors[0] };

// Copies this dp rank's rows of tensor `name` of `f` to `dst`, checking its
// dtype, its shape and every value (in [0, vocab), or -100 when allowed).
static srt_status copy_rows(const srt_safetensors *f, const srt_program *p, const char *name,
                            int allow_ignore, int64_t first_row, int64_t *dst) {
  const srt_tensor_info *t = NULL;
  SRT_RETURN_IF_ERROR(srt_safetensors_find(f, name, &t));
  char shape[160];
  if (t->dtype != SRT_I64 || t->rank != 2 || t->shape[0] != p->batch || t->shape[1] != p->seq)
    return SRT_ERROR(SRT_INVALID_ARGUMENT,
                     "batch file '%s': '%s' must be I64 [%lld, %lld] (the program's batch "
                     "and sequence length), got %s %s",
                     srt_safetensors_path(f), name, (long long)p->batch, (long long)p->seq,
                     srt_dtype_name(t->dtype),
                     srt_shape_format(shape, sizeof shape, t->rank, t->shape));
  int64_t n = p->batch * p->seq;
  for (int64_t i = 0; i < n; ++i) {
    int64_t v;
    memcpy(&v, (const uint8_t *)t->data + (size_t)i * sizeof v, sizeof v);
    if ((v < 0 || v >= p->vocab) && !(allow_ignore && v == -100))
      return SRT_ERROR(SRT_INVALID_ARGUMENT,
                       "batch file '%s': %s[%lld][%lld] = %" PRId64 " is outside [0, %lld)%s",
                       srt_safetensors_path(f), name, (long long)(i / p->seq),
                       (long long)(i % p->seq), v, (long long)p->vocab,
                       allow_ignore ? " and is not -100" : "");
  }
  // The mapping need not be aligned: copy bytes.
  memcpy(dst, (const uint8_t *)t->data + (size_t)(first_row * p->seq) * sizeof *dst,
         (size_t)(p->local_batch * p->seq) * sizeof *dst);
  return NULL;
}

// Refuses a tensor that is none of batch_tensors, naming it.
static srt_status check_names(const srt_safetensors *f) {
  size_t n = srt_safetensors_count(f);
  for (size_t i = 0; i < n; ++i) {
    const char *name = srt_safetensors_get(f, i)->name;
    bool known = false;
    for (int k = 0; k < NUM_BATCH_TENSORS; ++k)
      known |= !strcmp(name, batch_tensors[k]);
    if (!known)
      return SRT_ERROR(SRT_INVALID_ARGUMENT,
                       "batch file '%s': tensor '%s' is not one the driver reads (input_ids, "
                       "labels, position_ids, attention_mask, segment_ids): remove it, or the step would "
                       "train without it",
                       srt_safetensors_path(f), name);
  }
  return NULL;
}

int64_t train_max_positions(const srt_program *p) {
  json_t *c = p->config_json ? json_loads(p->config_json, 0, NULL) : NULL;
  json_t *v = json_object_get(c, "max_position_embeddings");
  if (!json_is_integer(v)) // a conditional model's text decoder
    v = json_object_get(json_object_get(c, "text_config"), "max_position_embeddings");
  int64_t max = json_is_integer(v) && json_integer_value(v) > 0 ? json_integer_value(v)
                                                                : INT64_MAX;
  json_decref(c);
  return max;
}

// A batch whose positions or segments differ from the defaults (0..S-1,
// one document) is refused rather than trained as one document by a
// program without document inputs.
static srt_status check_one_document(const srt_safetensors *f, const srt_program *p,
                                     int64_t first_row, const int64_t *positions,
                                     const int64_t *segments) {
  for (int64_t i = 0; i < p->local_batch * p->seq; ++i)
    if (positions[i] != i % p->seq || segments[i] != 0)
      return SRT_ERROR(SRT_FAILED_PRECONDITION,
                       "batch file '%s': row %lld, column %lld: position %lld, document %lld: "
                       "this program takes no position or document inputs, so packed "
                       "documents, restarted positions and padding cannot be honoured",
                       srt_safetensors_path(f), (long long)(first_row + i / p->seq),
                       (long long)(i % p->seq), (long long)positions[i],
                       (long long)segments[i]);
  return NULL;
}

// This dp rank's positions and segments of `f` (train_documents, or the
// file's own segment_ids), each [local_batch, seq], and the labels' check
// against its padding.
static srt_status load_documents(const srt_safetensors *f, const srt_program *p,
                                 int64_t first_row, int64_t *positions, int64_t *segments) {
  const char *path = srt_safetensors_path(f);
  const srt_tensor_info *mask = srt_safetensors_lookup(f, "attention_mask");
  const srt_tensor_info *seg = srt_safetensors_lookup(f, "segment_ids");
  if (seg && mask)
    return SRT_ERROR(SRT_INVALID_ARGUMENT,
                     "batch file '%s' holds both segment_ids and attention_mask: give one "
                     "(segment_ids -1 marks padding)",
                     path);
  SRT_RETURN_IF_ERROR(train_documents(path, srt_safetensors_lookup(f, "position_ids"), mask,
                                      p->batch, p->seq, train_max_positions(p), first_row,
                                      p->local_batch, positions, segments));
  if (seg)
    SRT_RETURN_IF_ERROR(train_documents_segments(path, seg, p->batch, p->seq, first_row,
                                                 p->local_batch, segments));
  // copy_rows checked the labels' dtype and shape
  return train_documents_check_labels(path, srt_safetensors_lookup(f, "labels"), mask, seg);
}

// A step without document inputs (a hand-written one: offsets -1): the
// documents into a scratch buffer, refused unless they are the one
// document per row at 0..S-1 that such a step computes.
static srt_status load_documents_unwired(const srt_safetensors *f, const srt_program *p,
                                         int64_t first_row) {
  size_t n = (size_t)(p->local_batch * p->seq);
  int64_t *positions = malloc(2 * n * sizeof *positions);
  if (!positions)
    return SRT_ERROR(SRT_RESOURCE_EXHAUSTED, "batch file '%s': no memory for %zu positions",
                     srt_safetensors_path(f), n);
  srt_status s = load_documents(f, p, first_row, positions, positions + n);
  if (!s)
    s = check_one_document(f, p, first_row, positions, positions + n);
  free(positions);
  return s;
}

srt_status train_load_batch_file(srt_context *ctx, const srt_program *p, uint8_t *arena,
                                 const char *path, int64_t micro) {
  int64_t first_row = train_first_row(ctx, p, micro);
  srt_safetensors *f = NULL;
  SRT_RETURN_IF_ERROR(srt_safetensors_open(path, &f));
  srt_status s = check_names(f);
  if (!s)
    s = copy_rows(f, p, "input_ids", 0, first_row,
                  (int64_t *)(void *)(arena + p->input_ids_offset));
  if (!s)
    s = copy_rows(f, p, "labels", 1, first_row, (int64_t *)(void *)(arena + p->labels_offset));
  if (!s && (p->position_ids_offset < 0 || p->segment_ids_offset < 0))
    s = load_documents_unwired(f, p, first_row);
  else if (!s)
    s = load_documents(f, p, first_row, (int64_t *)(void *)(arena + p->position_ids_offset),
                       (int64_t *)(void *)(arena + p->segment_ids_offset));
  srt_safetensors_close(f);
  return s;
}
