// The driver's side of version 2 token files (documents; docs/data.md):
// their row plan, the check that the program can take packed rows, and the
// warning when the file was made by another tokenizer than the model's.
#include <stdio.h>
#include <string.h>

#include "train_internal.h"

srt_status train_pack_setup(const srt_tokens *tokens, int64_t seq, train_pack_plan *plan) {
  *plan = (train_pack_plan){.seq = seq};
  if (srt_tokens_version(tokens) != SRT_TOKENS_VERSION_DOCUMENTS)
    return NULL;
  if (srt_tokens_documents(tokens) == 0)
    return SRT_ERROR(SRT_OUT_OF_RANGE, "token file '%s' holds no document: nothing to train on",
                     srt_tokens_path(tokens));
  return train_pack_plan_build(srt_tokens_document_starts(tokens),
                               srt_tokens_prompt_lengths(tokens), srt_tokens_documents(tokens),
                               seq, plan);
}

srt_status train_packed_supported(const srt_program *p, const char *path) {
  // A step without the two inputs (a hand-written graph) would attend
  // across the documents of a packed row with positions 0..S-1: a silently
  // wrong step.
  if (p->position_ids_offset >= 0 && p->segment_ids_offset >= 0)
    return NULL;
  return SRT_ERROR(SRT_FAILED_PRECONDITION,
                   "token file '%s' holds documents (version 2): packed documents need a "
                   "step that takes position_ids and segment_ids, and this program's does "
                   "not (a hand-written graph?); give a version 1 token file "
                   "(shard-tokens --windows)",
                   path);
}

bool train_tokenizer_mismatch(const srt_program *p, const srt_tokens *tokens, char *buf,
                              size_t size) {
  srt_tokenizer_identity id;
  const char *json = p->tokenizer_json;
  if (!json || !*json || !srt_tokens_tokenizer(tokens, &id))
    return false;
  const char *model = p->model ? p->model : "(unknown)";
  if (id.kind == SRT_TOKENIZER_BYTES) {
    snprintf(buf, size,
             "'%s' holds byte-level tokens (one per byte, made without a tokenizer), but the "
             "model has its own tokenizer (the tokenizer.json beside '%s'): its ids mean other "
             "tokens; make the file with shard-tokens --tokenizer",
             srt_tokens_path(tokens), model);
    return true;
  }
  uint64_t mine = srt_tokenizer_digest(json, strlen(json));
  if (mine == id.digest)
    return false;
  snprintf(buf, size,
           "'%s' was made by tokenizer '%s' (digest %016llx), but the program was compiled "
           "with the tokenizer.json beside '%s' (digest %016llx): the file's ids may mean "
           "other tokens",
           srt_tokens_path(tokens), id.name, (unsigned long long)id.digest, model,
           (unsigned long long)mine);
  return true;
}
