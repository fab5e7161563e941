// libFuzzer target: the tensor-parallel plan parser (passes/plan.c): JSON
// plans as --tp-plan=FILE reads them, then matching module names against
// the parsed patterns, and the placement parser on the raw text.
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "plan.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const char *const kModules[] = {
    "lm_head", "model.embed_tokens", "model.layers.0.self_attn.q_proj",
    "model.layers.11.mlp.down_proj", "model.norm", "", "model..x", "*",
};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  tp_plan plan;
  char err[1024] = "";
  if (tp_plan_parse((const char *)data, size, "fuzz-plan.json", &plan, err, sizeof err)) {
    for (size_t i = 0; i < sizeof kModules / sizeof *kModules; ++i)
      (void)tp_plan_match(&plan, kModules[i], strlen(kModules[i]));
    tp_plan_free(&plan);
  } else if (!err[0]) {
    abort(); // a refusal says why
  }
  char *text = malloc(size + 1);
  if (!text)
    return 0;
  memcpy(text, data, size);
  text[size] = 0;
  tp_placement p;
  if (tp_placement_parse(text, &p)) {
    char buf[64];
    (void)tp_placement_str(p, buf, sizeof buf);
    (void)tp_placement_normalize(&p, 3);
  }
  tp_style style;
  (void)tp_style_parse(text, &style);
  (void)tp_pattern_match(text, "model.layers.0.mlp", strlen("model.layers.0.mlp"));
  free(text);
  return 0;
}
