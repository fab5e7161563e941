// --batch-file: the input ids and labels of every step from a safetensors
// file (input_ids, labels: I64 [batch, seq]) instead of token-file windows,
// for checks against a reference that computed the same batch (test/golden).
#include <inttypes.h>
#include <string.h>

#include "shardrt/safetensors.h"
#include "train_internal.h"

// Copies this dp rank's rows of tensor `name` of `f` to `dst`, checking its
// dtype, its shape and every value (in [lo, hi), or -100 when allowed).
static srt_status copy_rows(const srt_safetensors *f, const srt_program *p, const char *name,
                            int64_t lo, int64_t hi, int allow_ignore, int64_t first_row,
                            int64_t *dst) {
  const srt_tensor_info *t = NULL;
  SRT_RETURN_IF_ERROR(srt_safetensors_find(f, name, &t));
  if (t->dtype != SRT_I64 || t->rank != 2 || t->shape[0] != p->batch || t->shape[1] != p->seq)
    return SRT_ERROR(SRT_INVALID_ARGUMENT,
                     "batch file '%s': '%s' must be I64 [%lld, %lld] (the program's batch "
                     "and sequence length), got %s of rank %d [%lld, %lld]",
                     srt_safetensors_path(f), name, (long long)p->batch, (long long)p->seq,
                     srt_dtype_name(t->dtype), t->rank, (long long)t->shape[0],
                     (long long)(t->rank > 1 ? t->shape[1] : 0));
  int64_t n = p->batch * p->seq;
  for (int64_t i = 0; i < n; ++i) {
    int64_t v;
    memcpy(&v, (const uint8_t *)t->data + (size_t)i * sizeof v, sizeof v);
    if ((v < lo || v >= hi) && !(allow_ignore && v == -100))
      return SRT_ERROR(SRT_INVALID_ARGUMENT,
                       "batch file '%s': %s[%lld][%lld] = %" PRId64 " is outside [%lld, %lld)%s",
                       srt_safetensors_path(f), name, (long long)(i / p->seq),
                       (long long)(i % p->seq), v, (long long)lo, (long long)hi,
                       allow_ignore ? " and is not -100" : "");
  }
  // The mapping need not be aligned: copy bytes.
  memcpy(dst, (const uint8_t *)t->data + (size_t)(first_row * p->seq) * sizeof *dst,
         (size_t)(p->local_batch * p->seq) * sizeof *dst);
  return NULL;
}

// The document structure of the batch: the file's position_ids and
// segment_ids (I64 [batch, seq], positions >= 0, segments >= -1) where it
// has both, else one document per row (train_one_document).
static srt_status copy_documents(const srt_safetensors *f, const srt_program *p,
                                 uint8_t *arena, int64_t first_row) {
  if (p->position_ids_offset < 0 || p->segment_ids_offset < 0 ||
      !srt_safetensors_lookup(f, "position_ids") || !srt_safetensors_lookup(f, "segment_ids")) {
    train_one_document(p, arena);
    return NULL;
  }
  SRT_RETURN_IF_ERROR(copy_rows(f, p, "position_ids", 0, INT64_MAX, 0, first_row,
                                (int64_t *)(void *)(arena + p->position_ids_offset)));
  return copy_rows(f, p, "segment_ids", -1, INT64_MAX, 0, first_row,
                   (int64_t *)(void *)(arena + p->segment_ids_offset));
}

srt_status train_load_batch_file(srt_context *ctx, const srt_program *p, uint8_t *arena,
                                 const char *path, int64_t micro) {
  int64_t first_row = train_first_row(ctx, p, micro);
  srt_safetensors *f = NULL;
  SRT_RETURN_IF_ERROR(srt_safetensors_open(path, &f));
  srt_status s = copy_rows(f, p, "input_ids", 0, p->vocab, 0, first_row,
                           (int64_t *)(void *)(arena + p->input_ids_offset));
  if (!s)
    s = copy_rows(f, p, "labels", 0, p->vocab, 1, first_row,
                  (int64_t *)(void *)(arena + p->labels_offset));
  if (!s)
    s = copy_documents(f, p, arena, first_row);
  srt_safetensors_close(f);
  return s;
}
