// golden_compare: compares a training driver's --dump with the values that
// Hugging Face transformers computed for the same step (generate.py's
// expected.safetensors).
//
//   golden_compare [--verbose] [--bf16] DUMP EXPECTED
//
// Tolerances (fp32 on both sides, different summation orders):
//   loss             |d| <= 1e-4 |ref|
//   logits           max |d| <= 1e-4 max |ref| (relative to the tensor's scale)
//   logits.checksum  sum, sum |x| and sqrt(sum x^2) of the dump's logits
//                    (fp64), each within 1e-4 of the reference's sum |x|
//                    (the plain sum may cancel to ~0), sqrt(sum x^2) and
//                    sum |x| respectively
//   grad_norm        |d| <= 1e-3 |ref|, the total norm before clipping
//   grad_norm.<p>    |d| <= 1e-3 |ref|, each parameter's norm before clipping
//   <p> (updated)    max |d| <= 1e-3 max |ref| per tensor, every element.
//                    This relies on the AdamW eps that generate.py uses
//                    (1e-6, see test/golden/check.sh): AdamW's first step
//                    moves an element by lr * g / (|g| + eps), whose slope
//                    in g is up to lr / eps, so an element whose gradient
//                    is ~0 turns the gradients' rounding differences into
//                    update differences of lr * noise / eps.
// --bf16: a --param-dtype bf16 step against transformers' step under
// torch.autocast("cpu", dtype=torch.bfloat16) (generate.py's
// llama-autocast). Both round to bf16 (u = 2^-8 relative per rounding), at
// different places: autocast rounds the GEMMs' inputs and outputs but keeps
// the residual stream, norms and softmax in fp32 (type promotion), ours
// holds every activation in bf16 (the cuda policy). So every activation may
// differ by a few u; measured at tp1, tp2, tp2 + SP (llama-autocast): loss
// 2.4e-5, grad norm 1.5e-3, per-parameter grad norms 6.4e-3, parameters
// 6.2e-2 of their scale. Allowed:
//   loss             |d| <= 2^-8 |ref| (u: a mean over every scored token
//                    of log-probabilities that differ by a few u each,
//                    whose differences average out)
//   grad_norm(s)     |d| <= 2^-5 |ref| (8u: the backward's chain of
//                    roundings), each parameter's too: the check of the
//                    backward here
//   <p> (updated)    max |d| <= 2^-3 max |ref| per tensor: AdamW's first
//                    step moves an element by about lr g / (|g| + eps), and
//                    a gradient that cancels to near 0 carries an unbounded
//                    relative rounding error, so such an element may move
//                    by up to 2 lr (lr 1e-2: 0.1-0.3 of a tensor's scale);
//                    only gross errors (a wrong sign or decay, a missing
//                    update of the larger elements) show here
//   logits           not compared (the bf16 program keeps no fp32 logits).
// Prints one line per failing tensor (every tensor with --verbose), then
//   max_rel loss X logits X checksum X grad_norm X grad_norms X params X
// (the largest error of each kind, relative as above).
// Exit status: 0 all pass, 1 a value differs or is missing, 2 usage or I/O.
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "shardrt/safetensors.h"

enum { KIND_LOSS, KIND_LOGITS, KIND_CHECKSUM, KIND_GRAD_NORM, KIND_GRAD_NORMS, KIND_PARAMS };
static const char *const kKindNames[] = {"loss",      "logits",     "checksum",
                                         "grad_norm", "grad_norms", "params"};
static const double kTolerance[] = {1e-4, 1e-4, 1e-4, 1e-3, 1e-3, 1e-3};
static const double kBf16Tolerance[] = {0x1p-8, 0, 0, 0x1p-5, 0x1p-5, 0x1p-3};

static double at(const srt_tensor_info *t, int64_t i) {
  float v;
  memcpy(&v, (const unsigned char *)t->data + (size_t)i * sizeof v, sizeof v);
  return v;
}

static srt_safetensors *open_or_die(const char *path) {
  srt_safetensors *f = NULL;
  srt_status s = srt_safetensors_open(path, &f);
  if (s) {
    fprintf(stderr, "golden_compare: %s\n", srt_status_message(s));
    srt_status_free(s);
    exit(2);
  }
  return f;
}

typedef struct compare {
  const srt_safetensors *dump, *ref;
  int verbose, bad;
  const double *tolerance; // kTolerance, or kBf16Tolerance with --bf16
  double worst[6];
} compare;

// The dump's tensor `name`, checked to be F32 with the reference's shape.
static const srt_tensor_info *candidate(compare *c, const srt_tensor_info *ref,
                                        const char *name) {
  const srt_tensor_info *t = srt_safetensors_lookup(c->dump, name);
  int same = t && t->dtype == SRT_F32 && ref->dtype == SRT_F32 && t->rank == ref->rank;
  for (int d = 0; same && d < t->rank; ++d)
    same = t->shape[d] == ref->shape[d];
  if (!same) {
    printf("MISSING %s: not in the dump, or not F32 of the reference's shape\n", name);
    c->bad = 1;
    return NULL;
  }
  return t;
}

// Records one comparison: `err` against the kind's tolerance (or `tol`).
static void record(compare *c, int kind, const char *name, double err, double tol,
                   const char *detail) {
  int fail = !(err <= tol); // NaN fails
  if (err > c->worst[kind] || isnan(err))
    c->worst[kind] = err;
  if (fail || c->verbose)
    printf("%s %s: %s %.3e (tolerance %.1e)%s\n", fail ? "MISMATCH" : "ok", name,
           kKindNames[kind], err, tol, detail);
  c->bad |= fail;
}

static void scalar(compare *c, int kind, const srt_tensor_info *ref) {
  const srt_tensor_info *t = candidate(c, ref, ref->name);
  if (!t)
    return;
  double x = at(t, 0), y = at(ref, 0);
  char detail[128];
  snprintf(detail, sizeof detail, " (%.9g vs %.9g)", x, y);
  record(c, kind, ref->name, fabs(x - y) / fabs(y), c->tolerance[kind], detail);
}

// max |d| / max |ref| over a tensor.
static void tensor(compare *c, int kind, const srt_tensor_info *ref) {
  const srt_tensor_info *t = candidate(c, ref, ref->name);
  if (!t)
    return;
  int64_t n = srt_tensor_numel(ref), where = 0;
  double scale = 0, maxdiff = 0;
  for (int64_t i = 0; i < n; ++i) {
    double x = at(t, i), y = at(ref, i), d = fabs(x - y);
    scale = fmax(scale, fabs(y));
    if (!(d <= maxdiff)) {
      maxdiff = d;
      where = i;
    }
  }
  char detail[160];
  snprintf(detail, sizeof detail, " (element %lld: %.9g vs %.9g, scale %.3e)",
           (long long)where, at(t, where), at(ref, where), scale);
  record(c, kind, ref->name, scale > 0 ? maxdiff / scale : maxdiff, c->tolerance[kind], detail);
}

static void checksum(compare *c, const srt_tensor_info *ref) {
  const srt_tensor_info *logits = srt_safetensors_lookup(c->dump, "logits");
  if (!logits || logits->dtype != SRT_F32 || ref->rank != 1 || ref->shape[0] != 3) {
    printf("MISSING logits.checksum: the dump has no F32 logits\n");
    c->bad = 1;
    return;
  }
  double sum = 0, abs_sum = 0, sq = 0;
  for (int64_t i = 0, n = srt_tensor_numel(logits); i < n; ++i) {
    double x = at(logits, i);
    sum += x;
    abs_sum += fabs(x);
    sq += x * x;
  }
  double mine[3] = {sum, abs_sum, sqrt(sq)};
  double scale[3] = {at(ref, 1), at(ref, 1), at(ref, 2)};
  double worst = 0;
  for (int k = 0; k < 3; ++k)
    worst = fmax(worst, fabs(mine[k] - at(ref, k)) / scale[k]);
  char detail[160];
  snprintf(detail, sizeof detail, " (sum %.9g vs %.9g, sum|x| %.9g vs %.9g)", sum, at(ref, 0),
           abs_sum, at(ref, 1));
  record(c, KIND_CHECKSUM, "logits.checksum", worst, c->tolerance[KIND_CHECKSUM], detail);
}

int main(int argc, char **argv) {
  compare c = {.tolerance = kTolerance};
  int argi = 1, bf16 = 0;
  for (; argi < argc && !strncmp(argv[argi], "--", 2); ++argi) {
    if (!strcmp(argv[argi], "--verbose")) {
      c.verbose = 1;
    } else if (!strcmp(argv[argi], "--bf16")) {
      bf16 = 1;
      c.tolerance = kBf16Tolerance;
    } else {
      fprintf(stderr, "golden_compare: unknown option '%s'\n", argv[argi]);
      return 2;
    }
  }
  if (argc - argi != 2) {
    fprintf(stderr, "usage: golden_compare [--verbose] [--bf16] DUMP EXPECTED\n");
    return 2;
  }
  srt_safetensors *dump = open_or_die(argv[argi]), *ref = open_or_die(argv[argi + 1]);
  c.dump = dump;
  c.ref = ref;
  for (size_t i = 0, n = srt_safetensors_count(ref); i < n; ++i) {
    const srt_tensor_info *t = srt_safetensors_get(ref, i);
    if (!strcmp(t->name, "loss")) {
      scalar(&c, KIND_LOSS, t);
    } else if (!strcmp(t->name, "grad_norm")) {
      scalar(&c, KIND_GRAD_NORM, t);
    } else if (!strncmp(t->name, "grad_norm.", 10)) {
      scalar(&c, KIND_GRAD_NORMS, t);
    } else if (bf16 && !strncmp(t->name, "logits", 6)) {
      continue; // the bf16 step keeps no fp32 logits
    } else if (!strcmp(t->name, "logits")) {
      tensor(&c, KIND_LOGITS, t);
    } else if (!strcmp(t->name, "logits.checksum")) {
      checksum(&c, t);
    } else {
      tensor(&c, KIND_PARAMS, t); // an updated parameter
    }
  }
  for (size_t i = 0, n = srt_safetensors_count(dump); i < n; ++i)
    if (!srt_safetensors_lookup(ref, srt_safetensors_get(dump, i)->name)) {
      printf("EXTRA %s: in the dump but not in the reference\n",
             srt_safetensors_get(dump, i)->name);
      c.bad = 1;
    }
  printf("max_rel");
  for (int k = 0; k < 6; ++k)
    printf(" %s %.2e", kKindNames[k], c.worst[k]);
  printf("\n");
  srt_safetensors_close(dump);
  srt_safetensors_close(ref);
  return c.bad;
}
