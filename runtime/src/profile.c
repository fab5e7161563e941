// Op kinds of the step profile (shardrt/profile.h), by runtime op name.
#include "shardrt/profile.h"

#include <string.h>

static int starts_with(const char *s, const char *prefix) {
  return strncmp(s, prefix, strlen(prefix)) == 0;
}

srt_op_kind srt_op_kind_of(const char *name) {
  if (starts_with(name, "linear") && strcmp(name, "linear_grad_bias") != 0)
    return SRT_OP_KIND_GEMM;
  if (starts_with(name, "attention"))
    return SRT_OP_KIND_ATTENTION;
  if (starts_with(name, "cross_entropy") || starts_with(name, "ce_"))
    return SRT_OP_KIND_LOSS;
  static const char *const collectives[] = {"all_reduce", "all_gather", "reduce_scatter",
                                            "all_to_all"};
  for (size_t i = 0; i < sizeof collectives / sizeof *collectives; i++)
    if (starts_with(name, collectives[i])) // and the _start forms
      return SRT_OP_KIND_COLLECTIVE;
  if (!strcmp(name, "collective_wait"))
    return SRT_OP_KIND_COLLECTIVE;
  if (!strcmp(name, "optimizer_step"))
    return SRT_OP_KIND_OPTIMIZER;
  return SRT_OP_KIND_ELEMENTWISE;
}

const char *srt_op_kind_name(srt_op_kind kind) {
  static const char *const names[SRT_OP_KIND_COUNT] = {
      "GEMM", "attention", "elementwise", "loss", "collectives", "optimizer"};
  return kind >= 0 && kind < SRT_OP_KIND_COUNT ? names[kind] : "?";
}
