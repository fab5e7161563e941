// st_compare: compares two safetensors files tensor by tensor.
//
//   st_compare [--rtol R] [--verbose] CANDIDATE REFERENCE
//
// Both files must hold the same tensor names with the same shapes, as F32.
// A tensor passes when every element satisfies
//     |candidate[i] - reference[i]| <= R * max_j |reference[j]|
// i.e. the error is measured relative to the reference tensor's scale (an
// elementwise relative error is meaningless for weights that cross zero).
// Prints one line per failing tensor (all tensors with --verbose) and a last
// line "max_rel <x> tensors <n>" with the largest error / scale seen.
// Exit status: 0 all pass, 1 a tensor differs or is missing, 2 usage or I/O.
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "shardrt/safetensors.h"

static float load_f32(const srt_tensor_info *t, int64_t i) {
  float v;
  memcpy(&v, (const unsigned char *)t->data + (size_t)i * sizeof v, sizeof v);
  return v;
}

static void print_shape(const srt_tensor_info *t) {
  printf("[");
  for (int d = 0; d < t->rank; ++d)
    printf("%s%lld", d ? ", " : "", (long long)t->shape[d]);
  printf("]");
}

static srt_safetensors *open_or_die(const char *path) {
  srt_safetensors *f = NULL;
  srt_status s = srt_safetensors_open(path, &f);
  if (s) {
    fprintf(stderr, "st_compare: %s\n", srt_status_message(s));
    srt_status_free(s);
    exit(2);
  }
  return f;
}

int main(int argc, char **argv) {
  double rtol = 1e-5;
  int verbose = 0, argi = 1;
  for (; argi < argc && argv[argi][0] == '-' && argv[argi][1] == '-'; ++argi) {
    if (!strcmp(argv[argi], "--rtol") && argi + 1 < argc) {
      char *end;
      rtol = strtod(argv[++argi], &end);
      if (*end || !(rtol >= 0)) {
        fprintf(stderr, "st_compare: bad --rtol '%s'\n", argv[argi]);
        return 2;
      }
    } else if (!strcmp(argv[argi], "--verbose")) {
      verbose = 1;
    } else {
      fprintf(stderr, "st_compare: unknown option '%s'\n", argv[argi]);
      return 2;
    }
  }
  if (argc - argi != 2) {
    fprintf(stderr, "usage: st_compare [--rtol R] [--verbose] CANDIDATE REFERENCE\n");
    return 2;
  }
  srt_safetensors *a = open_or_die(argv[argi]), *b = open_or_die(argv[argi + 1]);
  int bad = 0;
  double worst = 0;
  size_t na = srt_safetensors_count(a), nb = srt_safetensors_count(b);
  for (size_t i = 0; i < na; ++i)
    if (!srt_safetensors_lookup(b, srt_safetensors_get(a, i)->name)) {
      printf("extra tensor %s in %s\n", srt_safetensors_get(a, i)->name, argv[argi]);
      bad = 1;
    }
  for (size_t i = 0; i < nb; ++i) {
    const srt_tensor_info *tb = srt_safetensors_get(b, i);
    const srt_tensor_info *ta = srt_safetensors_lookup(a, tb->name);
    if (!ta) {
      printf("missing tensor %s in %s\n", tb->name, argv[argi]);
      bad = 1;
      continue;
    }
    int same_shape = ta->rank == tb->rank;
    for (int d = 0; same_shape && d < ta->rank; ++d)
      same_shape = ta->shape[d] == tb->shape[d];
    if (!same_shape || ta->dtype != SRT_F32 || tb->dtype != SRT_F32) {
      printf("%s: shape or dtype differs: %s ", tb->name, srt_dtype_name(ta->dtype));
      print_shape(ta);
      printf(" vs %s ", srt_dtype_name(tb->dtype));
      print_shape(tb);
      printf("\n");
      bad = 1;
      continue;
    }
    int64_t n = srt_tensor_numel(tb), at = -1;
    double scale = 0, maxdiff = 0;
    int nonfinite = 0;
    for (int64_t k = 0; k < n; ++k) {
      double x = load_f32(ta, k), y = load_f32(tb, k);
      if (!isfinite(x) || !isfinite(y))
        nonfinite = 1;
      if (fabs(y) > scale)
        scale = fabs(y);
      if (fabs(x - y) > maxdiff) {
        maxdiff = fabs(x - y);
        at = k;
      }
    }
    double rel = scale > 0 ? maxdiff / scale : maxdiff;
    if (rel > worst)
      worst = rel;
    int fail = nonfinite || rel > rtol;
    if (fail || verbose) {
      printf("%s %s: max |diff| %.3e, scale %.3e, rel %.3e", fail ? "MISMATCH" : "ok",
             tb->name, maxdiff, scale, rel);
      if (at >= 0)
        printf(" (element %lld: %.9g vs %.9g)", (long long)at, load_f32(ta, at),
               load_f32(tb, at));
      printf("%s\n", nonfinite ? " non-finite values" : "");
    }
    bad |= fail;
  }
  printf("max_rel %.3e tensors %zu\n", worst, nb);
  srt_safetensors_close(a);
  srt_safetensors_close(b);
  return bad;
}
