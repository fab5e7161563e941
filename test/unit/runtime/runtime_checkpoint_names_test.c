// Unit tests of the checkpoint name layouts (shardrt/checkpoint_names.h):
// parsing, renaming both ways with transformers' Gemma3 layouts, carried
// prefixes, and the refusals of malformed text.
#include "runtime_test_util.h"

#include "shardrt/checkpoint_names.h"

// transformers' Gemma3ForConditionalGeneration layouts (as in arch.c).
static const char kGemma3[] =
    "carry model.vision_tower.\n"
    "carry model.multi_modal_projector.\n"
    "layout model.language_model.=language_model.model. lm_head.=language_model.lm_head. "
    "model.vision_tower.=vision_tower. model.multi_modal_projector.=multi_modal_projector.\n";

static void expect_stored(const srt_checkpoint_names *n, int layout, const char *mem,
                          const char *disk) {
  char buf[256], back[256];
  assert_true(srt_checkpoint_name_stored(n, layout, mem, buf, sizeof buf));
  assert_string_equal(buf, disk);
  assert_true(srt_checkpoint_name_in_memory(n, layout, disk, back, sizeof back));
  assert_string_equal(back, mem);
}

static void test_gemma3_layouts(void **state) {
  (void)state;
  srt_checkpoint_names n;
  assert_null(srt_checkpoint_names_parse(kGemma3, &n));
  assert_int_equal(n.num_layouts, 1);
  assert_int_equal(n.num_carried, 2);
  // Layout 0: the in-memory names themselves.
  expect_stored(&n, 0, "model.language_model.norm.weight", "model.language_model.norm.weight");
  // Layout 1: what save_pretrained writes.
  expect_stored(&n, 1, "model.language_model.layers.0.self_attn.q_proj.weight",
                "language_model.model.layers.0.self_attn.q_proj.weight");
  expect_stored(&n, 1, "lm_head.weight", "language_model.lm_head.weight");
  expect_stored(&n, 1, "model.vision_tower.vision_model.post_layernorm.weight",
                "vision_tower.vision_model.post_layernorm.weight");
  expect_stored(&n, 1, "model.multi_modal_projector.mm_input_projection_weight",
                "multi_modal_projector.mm_input_projection_weight");
  // A name no pair matches is stored as it is.
  expect_stored(&n, 1, "other.weight", "other.weight");
  assert_true(srt_checkpoint_name_carried(&n, "model.vision_tower.x"));
  assert_true(srt_checkpoint_name_carried(&n, "model.multi_modal_projector.y"));
  assert_false(srt_checkpoint_name_carried(&n, "model.language_model.norm.weight"));
  assert_false(srt_checkpoint_name_carried(&n, "vision_tower.x")); // an on-disk name
  // Too small a buffer is reported, not truncated silently.
  char tiny[8];
  assert_false(srt_checkpoint_name_stored(&n, 1, "lm_head.weight", tiny, sizeof tiny));
}

static void test_empty(void **state) {
  (void)state;
  srt_checkpoint_names n;
  assert_null(srt_checkpoint_names_parse(NULL, &n));
  assert_int_equal(n.num_layouts, 0);
  assert_null(srt_checkpoint_names_parse("", &n));
  char buf[64];
  assert_true(srt_checkpoint_name_stored(&n, 0, "lm_head.weight", buf, sizeof buf));
  assert_string_equal(buf, "lm_head.weight");
  assert_false(srt_checkpoint_name_carried(&n, "lm_head.weight"));
}

static void expect_refused(const char *text, const char *want) {
  srt_checkpoint_names n;
  srt_status s = srt_checkpoint_names_parse(text, &n);
  assert_non_null(s);
  assert_int_equal(srt_status_code(s), SRT_INVALID_ARGUMENT);
  if (!strstr(srt_status_message(s), want))
    fail_msg("'%s' lacks '%s'", srt_status_message(s), want);
  srt_status_free(s);
}

static void test_refusals(void **state) {
  (void)state;
  expect_refused("carry a.\nkeep b.\n", "line 2: expected 'carry PREFIX'");
  expect_refused("layout a.b.\n", "line 1: a renaming must be MEM=DISK");
  expect_refused("layout =b.\n", "MEM=DISK");
  expect_refused("layout a.=\n", "MEM=DISK");
  expect_refused("carry \n", "a carried prefix must be non-empty");
  expect_refused("layout a=b\nlayout a=b\nlayout a=b\nlayout a=b\nlayout a=b\n",
                 "line 5: too many layouts");
  char longp[200];
  memset(longp, 'x', sizeof longp);
  memcpy(longp, "carry ", 6);
  longp[sizeof longp - 1] = 0;
  expect_refused(longp, "at most 95 bytes");
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_gemma3_layouts),
      cmocka_unit_test(test_empty),
      cmocka_unit_test(test_refusals),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
