// row_absmax: the largest |x| of one row (index along dim 0) of an F32
// tensor in a safetensors file, printed as "%.9g"; for checks of
// initialised or saved weights (the padding row of an embedding).
//
//   row_absmax FILE TENSOR ROW
//
// Exit status: 0 printed, 2 usage, I/O, no such tensor or row, not F32.
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "shardrt/safetensors.h"

int main(int argc, char **argv) {
  if (argc != 4) {
    fprintf(stderr, "usage: row_absmax FILE TENSOR ROW\n");
    return 2;
  }
  srt_safetensors *f = NULL;
  srt_status s = srt_safetensors_open(argv[1], &f);
  if (s) {
    fprintf(stderr, "row_absmax: %s\n", srt_status_message(s));
    srt_status_free(s);
    return 2;
  }
  const srt_tensor_info *t = srt_safetensors_lookup(f, argv[2]);
  long row = strtol(argv[3], NULL, 10);
  if (!t || t->dtype != SRT_F32 || t->rank < 1 || row < 0 || row >= t->shape[0]) {
    fprintf(stderr, "row_absmax: no F32 tensor '%s' with a row %ld in %s\n", argv[2], row,
            argv[1]);
    srt_safetensors_close(f);
    return 2;
  }
  int64_t width = srt_tensor_numel(t) / t->shape[0];
  double m = 0;
  for (int64_t i = 0; i < width; ++i) {
    float v;
    memcpy(&v, (const char *)t->data + ((size_t)row * (size_t)width + (size_t)i) * 4, 4);
    m = fmax(m, fabs((double)v));
  }
  printf("%.9g\n", m);
  srt_safetensors_close(f);
  return 0;
}
