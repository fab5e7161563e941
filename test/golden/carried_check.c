// carried_check: after a step from a checkpoint that holds modules the
// program does not train (Gemma3ForConditionalGeneration's vision tower and
// projector), checks the driver's --save against the input checkpoint:
//
//   carried_check SAVED INPUT PREFIX...
//
// SAVED must hold exactly INPUT's tensor names (the input's layout of
// names kept) with the same shapes; a tensor whose name starts with a
// PREFIX must also have INPUT's dtype and bytes (carried through
// untouched); every other tensor must differ from INPUT (it was trained).
// Prints one line per problem and "carried N tensors, trained M".
// Exit status: 0 all hold, 1 one does not, 2 usage or I/O.
#include <stdio.h>
#include <string.h>

#include "shardrt/safetensors.h"

static srt_safetensors *open_file(const char *path) {
  srt_safetensors *f = NULL;
  srt_status s = srt_safetensors_open(path, &f);
  if (s) {
    fprintf(stderr, "carried_check: %s\n", srt_status_message(s));
    srt_status_free(s);
  }
  return f;
}

static int carried(const char *name, int n, char **prefixes) {
  for (int i = 0; i < n; ++i)
    if (!strncmp(name, prefixes[i], strlen(prefixes[i])))
      return 1;
  return 0;
}

static int same_shape(const srt_tensor_info *a, const srt_tensor_info *b) {
  if (a->rank != b->rank)
    return 0;
  for (int d = 0; d < a->rank; ++d)
    if (a->shape[d] != b->shape[d])
      return 0;
  return 1;
}

int main(int argc, char **argv) {
  if (argc < 4) {
    fprintf(stderr, "usage: carried_check SAVED INPUT PREFIX...\n");
    return 2;
  }
  srt_safetensors *saved = open_file(argv[1]), *input = open_file(argv[2]);
  if (!saved || !input)
    return 2;
  int bad = 0, kept = 0, trained = 0;
  for (size_t i = 0; i < srt_safetensors_count(input); ++i) {
    const srt_tensor_info *in = srt_safetensors_get(input, i);
    const srt_tensor_info *out = srt_safetensors_lookup(saved, in->name);
    if (!out || !same_shape(in, out)) {
      printf("%s: %s in the saved checkpoint\n", in->name, out ? "another shape" : "missing");
      bad = 1;
    } else if (carried(in->name, argc - 3, argv + 3)) {
      if (out->dtype != in->dtype || memcmp(out->data, in->data, in->nbytes)) {
        printf("%s: carried, but its dtype or bytes changed\n", in->name);
        bad = 1;
      }
      ++kept;
    } else {
      if (out->dtype == in->dtype && !memcmp(out->data, in->data, in->nbytes)) {
        printf("%s: trained, but saved unchanged\n", in->name);
        bad = 1;
      }
      ++trained;
    }
  }
  for (size_t i = 0; i < srt_safetensors_count(saved); ++i)
    if (!srt_safetensors_lookup(input, srt_safetensors_get(saved, i)->name)) {
      printf("%s: in the saved checkpoint but not in the input\n",
             srt_safetensors_get(saved, i)->name);
      bad = 1;
    }
  printf("carried %d tensors, trained %d\n", kept, trained);
  if (kept == 0) {
    printf("no tensor starts with a given prefix\n");
    bad = 1;
  }
  srt_safetensors_close(saved);
  srt_safetensors_close(input);
  return bad;
}
