// libFuzzer target: the --weights loader (tools/shard-import/weights.c)
// on a sharded checkpoint directory. The input is the directory's
// model.safetensors.index.json, then the separator line "\n--shard--\n",
// then the bytes of the one shard file "a.safetensors" (absent when the
// input has no separator), checked against a fixed tiny model: a tied
// embedding [8, 4] and a norm [4], both F32.
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fuzz_file.h"
#include "arch.h"
#include "weights.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const char kSeparator[] = "\n--shard--\n";

// The first occurrence of the separator in data[0, size), or NULL.
static const uint8_t *find_separator(const uint8_t *data, size_t size) {
  size_t n = sizeof kSeparator - 1;
  for (size_t i = 0; i + n <= size; ++i)
    if (data[i] == '\n' && !memcmp(data + i, kSeparator, n))
      return data + i;
  return NULL;
}

static import_param g_params[] = {
    {.name = "model.embed_tokens.weight", .kind = IMPORT_PARAM_EMBEDDING, .rank = 2,
     .dims = {8, 4, 0}},
    {.name = "model.norm.weight", .kind = IMPORT_PARAM_NORM, .rank = 1, .dims = {4, 0, 0}},
};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  char dir[4096];
  snprintf(dir, sizeof dir, "%s", fuzz_path("model"));
  mkdir(dir, 0700);
  const uint8_t *sep = find_separator(data, size);
  size_t index_len = sep ? (size_t)(sep - data) : size;
  fuzz_write_file("model/model.safetensors.index.json", data, index_len);
  const char *shard = fuzz_path("model/a.safetensors");
  if (sep) {
    const uint8_t *bytes = sep + sizeof kSeparator - 1;
    fuzz_write_file("model/a.safetensors", bytes, size - (size_t)(bytes - data));
  } else {
    unlink(shard);
  }
  import_model m = {.params = g_params, .num_params = 2, .tied_name = "lm_head.weight",
                    .tied_to = 0};
  char err[2048] = "";
  // Strict dtypes and plain names, then any float dtype under Gemma3
  // conditional generation's layouts (carried modules, renamed prefixes).
  if (!import_check_weights(dir, &m, SRT_F32, false, NULL, err, sizeof err) && !err[0])
    abort(); // a refusal says why
  err[0] = 0;
  const import_arch *gemma = import_arch_by_name("Gemma3ForConditionalGeneration");
  if (!import_check_weights(dir, &m, SRT_F32, true, gemma->checkpoint_names, err, sizeof err) &&
      !err[0])
    abort();
  return 0;
}
