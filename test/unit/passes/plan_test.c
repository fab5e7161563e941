// Unit tests of plans as data (passes/plan.c): NeMo-RL's style strings,
// placement syntax, Hugging Face module pattern matching, custom plan
// parsing, the built-in plans' tables and the 'hf' plan's completion rules.
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <string.h>

#include "plan.h"

static void test_styles_match_the_reference(void **state) {
  (void)state;
  static const char *const known[] = {"colwise", "rowwise", "colwise_rep", "rowwise_rep",
                                      "colwise_gather_output", "sequence_parallel"};
  tp_style s;
  for (size_t i = 0; i < sizeof known / sizeof *known; ++i) {
    assert_true(tp_style_parse(known[i], &s));
    assert_string_equal(tp_style_name(s), known[i]);
  }
  assert_false(tp_style_parse("Colwise", &s));
  assert_false(tp_style_parse("colwise ", &s));
  assert_false(tp_style_parse("", &s));
}

static void test_placements(void **state) {
  (void)state;
  tp_placement p;
  assert_true(tp_placement_parse("Shard(-1)", &p));
  assert_int_equal(p.kind, TP_SHARD);
  assert_int_equal(p.dim, -1);
  assert_true(tp_placement_normalize(&p, 3));
  assert_int_equal(p.dim, 2);
  assert_true(tp_placement_parse("Replicate", &p));
  assert_int_equal(p.kind, TP_REPLICATE);
  assert_false(tp_placement_parse("Shard(1", &p));
  assert_false(tp_placement_parse("Shard(1)x", &p));
  p = TP_S(3);
  assert_false(tp_placement_normalize(&p, 3));
  char buf[32];
  assert_string_equal(tp_placement_str(TP_S(1), buf, sizeof buf), "Shard(1)");
}

static bool match(const char *pattern, const char *module) {
  return tp_pattern_match(pattern, module, strlen(module));
}

static void test_pattern_matching(void **state) {
  (void)state;
  assert_true(match("model.layers.*.self_attn.q_proj", "model.layers.0.self_attn.q_proj"));
  assert_true(match("model.layers.*.self_attn.q_proj", "model.layers.79.self_attn.q_proj"));
  // '*' is exactly one segment.
  assert_false(match("model.layers.*.self_attn.q_proj", "model.layers.0.1.self_attn.q_proj"));
  assert_false(match("model.layers.*.self_attn.q_proj", "model.layers.self_attn.q_proj"));
  // Whole segments only: no prefix or suffix matches.
  assert_false(match("model.layers.*.self_attn.q_proj", "model.layers.0.self_attn.q_proj_x"));
  assert_false(match("model.layers.*.self_attn.q", "model.layers.0.self_attn.q_proj"));
  assert_false(match("lm_head", "lm_head.weight"));
  assert_true(match("lm_head", "lm_head"));
  assert_false(match("model.norm", "model.language_model.norm"));
}

static void test_custom_plan(void **state) {
  (void)state;
  const char *text =
      "{\"model.layers.*.mlp.up_proj\": \"colwise\","
      " \"lm_head\": {\"style\": \"colwise\", \"input_layouts\": \"Shard(1)\","
      "   \"output_layouts\": [\"Shard(-1)\"], \"use_local_output\": false}}";
  tp_plan plan;
  char err[256];
  assert_true(tp_plan_parse(text, strlen(text), "t.json", &plan, err, sizeof err));
  assert_int_equal(plan.num_entries, 2);
  tp_plan_entry *e = tp_plan_match(&plan, "lm_head", 7);
  assert_non_null(e);
  assert_int_equal(e->style, TP_STYLE_COLWISE);
  assert_int_equal(e->num_inputs, 1);
  assert_int_equal(e->inputs[0].dim, 1);
  assert_int_equal(e->outputs[0].dim, -1);
  assert_false(e->use_local_output);
  assert_null(tp_plan_match(&plan, "model.layers.0.mlp.down_proj", 28));
  tp_plan_free(&plan);
}

static void test_custom_plan_errors(void **state) {
  (void)state;
  tp_plan plan;
  char err[256];
  const char *style = "{\"x\": \"colwize\"}";
  assert_false(tp_plan_parse(style, strlen(style), "p.json", &plan, err, sizeof err));
  assert_non_null(strstr(err, "Unknown parallel style 'colwize'"));
  tp_plan_free(&plan);
  const char *syntax = "{\"x\": \"colwise\",\n}";
  assert_false(tp_plan_parse(syntax, strlen(syntax), "p.json", &plan, err, sizeof err));
  assert_non_null(strstr(err, "p.json:2:1: malformed plan JSON"));
  tp_plan_free(&plan);
  const char *empty = "{}";
  assert_false(tp_plan_parse(empty, 2, "p.json", &plan, err, sizeof err));
  assert_non_null(strstr(err, "use --tp-size=1"));
  tp_plan_free(&plan);
}

static bool gemma_conditional(const char *prefix, void *data) {
  (void)data;
  return !strcmp(prefix, "model.language_model");
}

// The built-in tables, entry by entry, as the reference lists them.
static void test_builtin_qwen2_sequence_parallel(void **state) {
  (void)state;
  tp_plan plan;
  char err[256];
  assert_true(tp_plan_load("qwen2", true, NULL, &plan, err, sizeof err));
  tp_plan_entry *e = tp_plan_match(&plan, "model.embed_tokens", 18);
  assert_int_equal(e->style, TP_STYLE_ROWWISE);
  assert_int_equal(e->outputs[0].dim, 1);
  e = tp_plan_match(&plan, "model.layers.3.input_layernorm", 30);
  assert_int_equal(e->style, TP_STYLE_SEQUENCE_PARALLEL);
  e = tp_plan_match(&plan, "model.rotary_emb", 16);
  assert_int_equal(e->style, TP_STYLE_SEQUENCE_PARALLEL);
  assert_int_equal(e->num_inputs, 2);
  e = tp_plan_match(&plan, "model.layers.3.self_attn.o_proj", 31);
  assert_int_equal(e->style, TP_STYLE_ROWWISE);
  assert_int_equal(e->outputs[0].dim, 1);
  e = tp_plan_match(&plan, "lm_head", 7);
  assert_int_equal(e->inputs[0].dim, 1);
  assert_int_equal(e->outputs[0].dim, -1);
  tp_plan_free(&plan);
}

static void test_builtin_gemma3_prefix(void **state) {
  (void)state;
  tp_plan plan;
  char err[256];
  tp_model_facts facts = {"gemma3", gemma_conditional, NULL};
  assert_true(tp_plan_load("gemma3", true, &facts, &plan, err, sizeof err));
  const char *m = "model.language_model.layers.0.pre_feedforward_layernorm";
  assert_non_null(tp_plan_match(&plan, m, strlen(m)));
  assert_null(tp_plan_match(&plan, "model.layers.0.self_attn.q_proj", 31));
  // lm_head is never prefixed.
  assert_non_null(tp_plan_match(&plan, "lm_head", 7));
  tp_plan_free(&plan);
}

static void test_nemotron_sequence_parallel(void **state) {
  (void)state;
  tp_plan plan;
  char err[256];
  // Beyond the reference (which refuses it): the Mamba2 mixers split as
  // Megatron does, the norms sequence-parallel, the blocks reduce-scatter.
  assert_true(tp_plan_load("nemotron_h", true, NULL, &plan, err, sizeof err));
  const char *norm = "backbone.layers.3.norm", *in = "backbone.layers.0.mixer.in_proj",
             *out = "backbone.layers.0.mixer.out_proj";
  tp_plan_entry *e = tp_plan_match(&plan, norm, strlen(norm));
  assert_non_null(e);
  assert_int_equal(e->style, TP_STYLE_SEQUENCE_PARALLEL);
  e = tp_plan_match(&plan, in, strlen(in));
  assert_non_null(e);
  assert_int_equal(e->style, TP_STYLE_COLWISE);
  e = tp_plan_match(&plan, out, strlen(out));
  assert_non_null(e);
  assert_int_equal(e->style, TP_STYLE_ROWWISE);
  assert_int_equal(e->num_outputs, 1);
  assert_true(tp_placement_equal(e->outputs[0], TP_S(1)));
  tp_plan_free(&plan);
}

static void test_hf_plan_rules(void **state) {
  (void)state;
  tp_plan plan;
  char err[256];
  tp_model_facts facts = {"qwen3", NULL, NULL};
  assert_true(tp_plan_load("hf", false, &facts, &plan, err, sizeof err));
  // Missing embed_tokens -> rowwise_rep.
  tp_plan_entry *e = tp_plan_match(&plan, "model.embed_tokens", 18);
  assert_int_equal(e->style, TP_STYLE_ROWWISE_REP);
  // lm_head colwise_rep -> the loss-parallel form.
  e = tp_plan_match(&plan, "lm_head", 7);
  assert_int_equal(e->style, TP_STYLE_COLWISE);
  assert_int_equal(e->outputs[0].dim, -1);
  e = tp_plan_match(&plan, "model.layers.2.self_attn.k_norm", 31);
  assert_int_equal(e->style, TP_STYLE_REPLICATED_WITH_GRAD_ALLREDUCE);
  tp_plan_free(&plan);
  facts.model_type = "nemotron_h";
  assert_false(tp_plan_load("hf", false, &facts, &plan, err, sizeof err));
  assert_non_null(strstr(err, "use --tp-size=1 or a custom plan"));
  tp_plan_free(&plan);
  facts.model_type = "qwen2";
  assert_false(tp_plan_load("hf", true, &facts, &plan, err, sizeof err));
  tp_plan_free(&plan);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_styles_match_the_reference),
      cmocka_unit_test(test_placements),
      cmocka_unit_test(test_pattern_matching),
      cmocka_unit_test(test_custom_plan),
      cmocka_unit_test(test_custom_plan_errors),
      cmocka_unit_test(test_builtin_qwen2_sequence_parallel),
      cmocka_unit_test(test_builtin_gemma3_prefix),
      cmocka_unit_test(test_nemotron_sequence_parallel),
      cmocka_unit_test(test_hf_plan_rules),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
