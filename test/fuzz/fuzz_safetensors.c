// libFuzzer target: the safetensors reader (runtime/src/safetensors.c).
// Any byte string is opened as a file; an accepted file must keep the
// promises of safetensors.h: every tensor's bytes lie inside the mapping
// (all are read, so ASan or a fault flags any that do not), nbytes is the
// shape's size, and lookups by name find the listed tensors.
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_file.h"
#include "shardrt/safetensors.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  const char *path = fuzz_write_file("input.safetensors", data, size);
  srt_safetensors *f = NULL;
  srt_status s = srt_safetensors_open(path, &f);
  if (s) {
    if (f || !srt_status_message(s)[0])
      abort(); // an error leaves *out NULL and says something
    srt_status_free(s);
    return 0;
  }
  volatile uint8_t sink = 0;
  for (size_t i = 0; i < srt_safetensors_count(f); ++i) {
    const srt_tensor_info *t = srt_safetensors_get(f, i);
    if ((size_t)srt_tensor_numel(t) * srt_dtype_size(t->dtype) != t->nbytes)
      abort();
    const uint8_t *bytes = t->data;
    for (size_t b = 0; b < t->nbytes; ++b)
      sink ^= bytes[b];
    if (srt_safetensors_lookup(f, t->name) != t)
      abort();
  }
  (void)srt_safetensors_metadata(f, "format");
  (void)sink;
  srt_safetensors_close(f);
  return 0;
}
