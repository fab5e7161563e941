// libFuzzer target: the tokenizer.json loader (tools/shard-tokens/
// tokenizer_json.c). A file it accepts must encode and decode a fixed text
// with every id inside its vocabulary; one it refuses must say why.
#include <stdlib.h>
#include <string.h>

#include "fuzz_file.h"
#include "tokenizer.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  const char *path = fuzz_write_file("tokenizer.json", data, size);
  char *error = NULL;
  tok_tokenizer *t = tok_load(path, &error);
  if (!t) {
    if (!error)
      abort();
    free(error);
    return 0;
  }
  static const char text[] = "Hello, world! caf\xC3\xA9 \xE6\x97\xA5\xE6\x9C\xAC 123 <s>\n";
  tok_ids ids = {0};
  if (tok_encode(t, text, sizeof text - 1, &ids, &error))
    free(error); // a regex engine limit is an error, not a crash
  for (size_t i = 0; i < ids.count; ++i)
    if (ids.ids[i] < 0 || ids.ids[i] >= tok_vocab_size(t))
      abort();
  tok_buf back = {0};
  if (tok_decode(t, ids.ids, ids.count, &back, &error))
    abort(); // ids the tokenizer made must decode
  free(back.data);
  free(ids.ids);
  tok_free(t);
  return 0;
}
