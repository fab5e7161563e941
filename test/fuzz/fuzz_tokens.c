// libFuzzer target: the token-file reader (runtime/src/tokens.c). An
// accepted file is read through every accessor: ids, the vocabulary
// check, batches of several shapes (which re-read the file), and a
// version 2 file's document index, which open checked.
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>

#include "fuzz_file.h"
#include "shardrt/tokens.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  const char *path = fuzz_write_file("input.tokens", data, size);
  srt_tokens *t = NULL;
  srt_status s = srt_tokens_open(path, &t);
  if (s) {
    if (t)
      abort();
    srt_status_free(s);
    return 0;
  }
  int64_t count = srt_tokens_count(t), vocab = srt_tokens_vocab(t);
  if (count < 0 || vocab < 1)
    abort();
  const int64_t *starts = srt_tokens_document_starts(t), *prompts = srt_tokens_prompt_lengths(t);
  for (int64_t d = 0; starts && d < srt_tokens_documents(t); ++d)
    if (starts[d + 1] <= starts[d] || prompts[d] < 0 || prompts[d] > starts[d + 1] - starts[d] ||
        starts[srt_tokens_documents(t)] != count)
      abort(); // open let a bad index through
  for (int64_t i = 0; i < count && i < 4096; ++i) {
    int64_t id = srt_tokens_at(t, i);
    if (id < -1 || id >= ((int64_t)1 << 32))
      abort();
  }
  // The declared vocabulary is not a promise about the ids (the driver
  // checks them against the model's): only a file that passes the check
  // must give batches inside it.
  s = srt_tokens_check_vocab(t, vocab);
  bool in_vocab = !s;
  srt_status_free(s);
  static const int64_t shapes[][3] = {{1, 1, 1}, {2, 2, 3}, {3, 1, 8}, {1000000, 2, 4}};
  int64_t ids[64];
  for (size_t k = 0; k < sizeof shapes / sizeof *shapes; ++k) {
    int64_t step = shapes[k][0], batch = shapes[k][1], seq = shapes[k][2];
    s = srt_tokens_batch(t, step, batch, seq, 0, batch, ids);
    if (!s && in_vocab)
      for (int64_t i = 0; i < batch * seq; ++i)
        if (ids[i] < 0 || ids[i] >= vocab)
          abort(); // an accepted batch holds only ids of the vocabulary
    srt_status_free(s);
  }
  srt_tokens_close(t);
  return 0;
}
