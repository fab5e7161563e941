// config.json parsing: the real published configs give the values their
// model cards state, both transformers spellings agree, and every kind of
// bad config gives one error naming the file, the position and the key.
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "config.h"

#ifndef SHARD_MODELS_DIR
#error "SHARD_MODELS_DIR must name examples/models"
#endif

static void load(const char *name, import_config *cfg) {
  char path[4096], err[2048];
  snprintf(path, sizeof path, "%s/%s", SHARD_MODELS_DIR, name);
  if (!import_config_load(path, cfg, err, sizeof err))
    fail_msg("%s", err);
}

//===----------------------------------------------------------------------===//
// The real configs
//===----------------------------------------------------------------------===//

static void qwen2_5_0_5b(void **state) {
  import_config c;
  load("qwen2.5-0.5b.json", &c);
  assert_string_equal(c.arch->architecture, "Qwen2ForCausalLM");
  assert_true(c.arch->qkv_bias);
  assert_false(c.attention_bias);
  assert_int_equal(c.vocab, 151936);
  assert_int_equal(c.hidden, 896);
  assert_int_equal(c.intermediate, 4864);
  assert_int_equal(c.layers, 24);
  assert_int_equal(c.heads, 14);
  assert_int_equal(c.kv_heads, 2);
  assert_int_equal(c.head_dim, 64); // implied: 896 / 14
  assert_true(c.tie);
  assert_true(c.eps == 1e-6);
  assert_true(c.rope.theta == 1e6);
  assert_string_equal(c.rope.type, "default");
  assert_true(c.attn_scale == 0.125);
  // use_sliding_window is false: sliding_window 32768 is not used.
  assert_int_equal(import_config_count_blocks(&c, IMPORT_BLOCK_FULL), 24);
  assert_int_equal(c.sliding_window, 0);
  assert_string_equal(c.dtype, "bfloat16");
  import_config_free(&c);
}

static void llama_3_1_70b_rope_scaling(void **state) {
  import_config c;
  load("llama-3.1-70b.json", &c);
  assert_string_equal(c.arch->model_type, "llama");
  assert_int_equal(c.layers, 80);
  assert_int_equal(c.head_dim, 128);
  assert_int_equal(c.kv_heads, 8);
  assert_false(c.tie);
  assert_true(c.eps == 1e-5);
  assert_string_equal(c.rope.type, "llama3");
  assert_true(c.rope.theta == 500000.0);
  assert_true(c.rope.factor == 8.0);
  assert_true(c.rope.low_freq_factor == 1.0);
  assert_true(c.rope.high_freq_factor == 4.0);
  assert_int_equal(c.rope.original_max_position_embeddings, 8192);
  import_config_free(&c);
}

static void gemma3_sliding_pattern(void **state) {
  import_config c;
  load("gemma-3-1b-it.json", &c);
  assert_string_equal(c.arch->architecture, "Gemma3ForCausalLM");
  assert_true(c.tie); // absent: Gemma's default
  assert_int_equal(c.head_dim, 256);
  assert_int_equal(c.kv_heads, 1);
  assert_true(c.attn_scale == 1.0 / 16.0); // query_pre_attn_scalar 256
  assert_int_equal(c.sliding_window, 512);
  assert_true(c.rope.theta == 1e6);
  assert_true(c.rope_local.theta == 10000.0);
  for (int64_t i = 0; i < c.layers; ++i)
    assert_int_equal(c.blocks[i], (i == 5 || i == 11 || i == 17 || i == 23)
                                      ? IMPORT_BLOCK_FULL
                                      : IMPORT_BLOCK_SLIDING);
  import_config_free(&c);
}

static void qwen3_both_spellings_agree(void **state) {
  import_config a, b;
  load("qwen3-0.6b.json", &a);
  load("qwen3-0.6b-v5-format.json", &b);
  assert_string_equal(b.dtype, "bfloat16"); // v5 `dtype`
  assert_int_equal(a.head_dim, 128);        // explicit, not 1024 / 16
  assert_true(a.arch->qk_norm);
  int64_t *fa[] = {&a.vocab, &a.hidden, &a.intermediate, &a.layers, &a.heads,
                   &a.kv_heads, &a.head_dim};
  int64_t *fb[] = {&b.vocab, &b.hidden, &b.intermediate, &b.layers, &b.heads,
                   &b.kv_heads, &b.head_dim};
  for (size_t i = 0; i < sizeof fa / sizeof *fa; ++i)
    assert_int_equal(*fa[i], *fb[i]);
  assert_true(a.rope.theta == 1e6 && b.rope.theta == 1e6);
  assert_string_equal(b.rope.type, "default");
  assert_true(a.tie && b.tie);
  for (int64_t i = 0; i < a.layers; ++i)
    assert_int_equal(a.blocks[i], b.blocks[i]);
  import_config_free(&a);
  import_config_free(&b);
}

static void nemotron_h_pattern(void **state) {
  import_config c;
  load("nemotron-h-8b-base-8k.json", &c);
  assert_int_equal(c.arch->family, IMPORT_NEMOTRON_H);
  assert_int_equal(c.layers, 52);
  assert_int_equal(import_config_count_blocks(&c, IMPORT_BLOCK_MAMBA), 24);
  assert_int_equal(import_config_count_blocks(&c, IMPORT_BLOCK_ATTENTION), 4);
  assert_int_equal(import_config_count_blocks(&c, IMPORT_BLOCK_MLP), 24);
  assert_int_equal(c.blocks[0], IMPORT_BLOCK_MAMBA);
  assert_int_equal(c.blocks[1], IMPORT_BLOCK_MLP);
  assert_int_equal(c.blocks[7], IMPORT_BLOCK_ATTENTION);
  assert_int_equal(c.head_dim, 128); // attention_head_dim
  assert_int_equal(c.mamba_heads, 128);
  assert_int_equal(c.mamba_head_dim, 64);
  assert_int_equal(c.n_groups, 8);
  assert_int_equal(c.ssm_state, 128);
  assert_int_equal(c.conv_kernel, 4);
  assert_int_equal(c.chunk_size, 128);
  assert_true(c.eps == 1e-5); // layer_norm_epsilon
  assert_false(c.tie);
  import_config_free(&c);
}

//===----------------------------------------------------------------------===//
// Inline configs
//===----------------------------------------------------------------------===//

// A tiny Qwen2 config; {X} marks where cases splice keys.
static const char kTiny[] =
    "{\n"
    "  \"architectures\": [\"Qwen2ForCausalLM\"],\n"
    "  \"model_type\": \"qwen2\",\n"
    "  \"vocab_size\": 256,\n"
    "  \"hidden_size\": 64,\n"
    "  \"intermediate_size\": 128,\n"
    "  \"num_hidden_layers\": 2,\n"
    "  \"num_attention_heads\": 4,\n"
    "  \"num_key_value_heads\": 2,\n"
    "  \"rms_norm_eps\": 1e-06,\n"
    "  \"rope_theta\": 10000.0,\n"
    "  \"tie_word_embeddings\": true\n"
    "}\n";

// kTiny with the line of `key` replaced by `line` (NULL: removed), into buf.
static const char *edit(const char *key, const char *line, char *buf, size_t len) {
  char needle[128];
  snprintf(needle, sizeof needle, "\"%s\":", key);
  const char *at = strstr(kTiny, needle);
  assert_non_null(at);
  while (at > kTiny && at[-1] != '\n')
    --at;
  const char *end = strchr(at, '\n') + 1;
  bool last = strncmp(end, "}", 1) == 0;
  snprintf(buf, len, "%.*s%s%s%s", (int)(at - kTiny), kTiny, line ? line : "",
           line ? "\n" : "", end);
  if (!line && last) { // drop the comma the previous line now has too many of
    char *comma = strrchr(buf, ',');
    memmove(comma, comma + 1, strlen(comma));
  }
  return buf;
}

// Parses `text` as "t.json" expecting an error containing every string of
// the NULL-terminated list.
static void expect_error(const char *text, ...) {
  import_config c;
  char err[2048];
  if (import_config_parse("t.json", text, strlen(text), &c, err, sizeof err))
    fail_msg("parsed, but expected an error for:\n%s", text);
  if (strncmp(err, "t.json:", 7) != 0)
    fail_msg("error does not start with the file name: %s", err);
  va_list ap;
  va_start(ap, text);
  for (const char *want; (want = va_arg(ap, const char *)) != NULL;)
    if (!strstr(err, want))
      fail_msg("error '%s' lacks '%s'", err, want);
  va_end(ap);
}

static void tiny_parses(void **state) {
  import_config c;
  char err[2048];
  assert_true(import_config_parse("t.json", kTiny, strlen(kTiny), &c, err, sizeof err));
  assert_int_equal(c.head_dim, 16);
  assert_int_equal(c.layers, 2);
  int line, col;
  assert_true(import_config_locate(&c, "hidden_size", &line, &col));
  assert_int_equal(line, 5);
  assert_int_equal(col, 3);
  assert_false(import_config_locate(&c, "head_dim", &line, &col));
  import_config_free(&c);
}

static void malformed_json(void **state) {
  expect_error("{\n  \"vocab_size\": 1,,\n}", "t.json:2:", "malformed JSON", NULL);
  expect_error("", "t.json:", "malformed JSON", NULL);
  expect_error("[1]", "the config must be a JSON object, got an array", NULL);
  char buf[4096];
  expect_error(edit("rms_norm_eps", "  \"vocab_size\": 8,", buf, sizeof buf),
               "malformed JSON", "duplicate", NULL);
}

// Absent keys take their config class's default (transformers'), and say
// so in defaults_used; a key no class defaults stays required.
static void class_defaults(void **state) {
  char buf[4096];
  import_config c;
  char err[2048];
  edit("hidden_size", NULL, buf, sizeof buf);
  if (!import_config_parse("t.json", buf, strlen(buf), &c, err, sizeof err))
    fail_msg("%s", err);
  assert_int_equal(c.hidden, 4096); // Qwen2Config.hidden_size
  assert_non_null(c.defaults_used);
  assert_non_null(strstr(c.defaults_used, "hidden_size = 4096 (Qwen2Config default, "
                                          "transformers 5.24.0 models/qwen2/"));
  assert_null(c.warnings);
  import_config_free(&c);
  // Qwen2Config.num_key_value_heads is 32 when absent (not the head count):
  // with 4 heads that is refused, as transformers' model cannot be built.
  expect_error(edit("num_key_value_heads", NULL, buf, sizeof buf),
               "num_attention_heads 4 is not a multiple of num_key_value_heads 32", NULL);
  // NemotronH without a block list has no layer count to derive.
  expect_error("{\"architectures\": [\"NemotronHForCausalLM\"]}",
               "missing required key 'num_hidden_layers'", NULL);
}

// Keys the compiled step does not read: one warning each, with the
// position; inert keys (token ids, bookkeeping) and zero dropout: none.
static void ignored_keys(void **state) {
  char buf[4096];
  import_config c;
  char err[2048];
  edit("rope_theta",
       "  \"rope_theta\": 10000.0, \"frobnicate\": 3, \"bos_token_id\": 1,"
       " \"attention_dropout\": 0.0, \"hidden_dropout\": 0.1,",
       buf, sizeof buf);
  if (!import_config_parse("t.json", buf, strlen(buf), &c, err, sizeof err))
    fail_msg("%s", err);
  assert_non_null(c.warnings);
  assert_non_null(strstr(c.warnings, "t.json:11:26: warning: key 'frobnicate' is not used"));
  assert_non_null(strstr(c.warnings, "key 'hidden_dropout' is 0.1: the compiled step has no "
                                     "dropout"));
  assert_null(strstr(c.warnings, "bos_token_id"));
  assert_null(strstr(c.warnings, "attention_dropout"));
  import_config_free(&c);
}

static void wrongly_typed_keys(void **state) {
  char buf[4096];
  expect_error(edit("hidden_size", "  \"hidden_size\": \"64\",", buf, sizeof buf),
               "t.json:5:3: error: key 'hidden_size' must be an integer, got a string",
               NULL);
  expect_error(edit("hidden_size", "  \"hidden_size\": 64.5,", buf, sizeof buf),
               "key 'hidden_size' must be an integer, got a real number", NULL);
  expect_error(edit("rms_norm_eps", "  \"rms_norm_eps\": \"small\",", buf, sizeof buf),
               "t.json:10:3:", "key 'rms_norm_eps' must be a number", NULL);
  expect_error(edit("tie_word_embeddings", "  \"tie_word_embeddings\": 1", buf, sizeof buf),
               "key 'tie_word_embeddings' must be true or false, got an integer", NULL);
  expect_error(edit("architectures", "  \"architectures\": \"Qwen2ForCausalLM\",", buf,
                    sizeof buf),
               "t.json:2:3:", "'architectures' must be a non-empty array of strings",
               NULL);
  expect_error(edit("rope_theta", "  \"rope_scaling\": 5,", buf, sizeof buf),
               "key 'rope_scaling' must be an object, got an integer", NULL);
}

static void unknown_architecture(void **state) {
  char buf[4096];
  expect_error(edit("architectures", "  \"architectures\": [\"MistralForCausalLM\"],", buf,
                    sizeof buf),
               "t.json:2:3: error: unknown architecture 'MistralForCausalLM' (supported: "
               "LlamaForCausalLM, Qwen2ForCausalLM",
               NULL);
  expect_error("{\"model_type\": \"mistral\"}", "unknown model_type 'mistral'", NULL);
  expect_error("{\"vocab_size\": 3}", "missing 'architectures' and 'model_type'", NULL);
  expect_error(edit("model_type", "  \"model_type\": \"llama\",", buf, sizeof buf),
               "architecture 'Qwen2ForCausalLM' has model_type 'qwen2', but the config "
               "says 'llama'",
               NULL);
}

static void impossible_sizes(void **state) {
  char buf[4096];
  expect_error(edit("num_hidden_layers", "  \"num_hidden_layers\": 0,", buf, sizeof buf),
               "t.json:7:3: error: key 'num_hidden_layers' must be positive, got 0", NULL);
  expect_error(edit("vocab_size", "  \"vocab_size\": -256,", buf, sizeof buf),
               "key 'vocab_size' must be positive, got -256", NULL);
  expect_error(edit("num_attention_heads", "  \"num_attention_heads\": 5,", buf, sizeof buf),
               "t.json:9:3:", "num_attention_heads 5 is not a multiple of "
               "num_key_value_heads 2", NULL);
  expect_error(edit("num_key_value_heads", "  \"num_key_value_heads\": 3,", buf, sizeof buf),
               "not a multiple of num_key_value_heads 3", NULL);
  // Heads not dividing hidden, head_dim implicit: an error ...
  expect_error(edit("hidden_size", "  \"hidden_size\": 66,", buf, sizeof buf),
               "t.json:8:3: error: num_attention_heads 4 does not divide hidden_size 66, "
               "and no head_dim is given",
               NULL);
  // ... but fine when head_dim is explicit (Qwen3 style).
  import_config c;
  char err[2048];
  edit("hidden_size", "  \"hidden_size\": 66, \"head_dim\": 32,", buf, sizeof buf);
  assert_true(import_config_parse("t.json", buf, strlen(buf), &c, err, sizeof err));
  assert_int_equal(c.head_dim, 32);
  import_config_free(&c);
  expect_error(edit("hidden_size", "  \"hidden_size\": 64, \"head_dim\": 15,", buf, sizeof buf),
               "head_dim 15 must be even for rotary embeddings", NULL);
  expect_error(edit("rms_norm_eps", "  \"rms_norm_eps\": 0,", buf, sizeof buf),
               "key 'rms_norm_eps' is 0: it must be in (0, 1]", NULL);
  // Numbers that import but train to NaN or to nothing are refused, named.
  expect_error(edit("rms_norm_eps", "  \"rms_norm_eps\": 1e308,", buf, sizeof buf),
               "t.json:10:3: error: key 'rms_norm_eps' is 1e+308: it must be in (0, 1]", NULL);
  expect_error(edit("rms_norm_eps", "  \"rms_norm_eps\": 1e-6, \"initializer_range\": 1e308,",
                    buf, sizeof buf),
               "key 'initializer_range' is 1e+308: it must be in (1e-08, 1]", NULL);
  expect_error(edit("rms_norm_eps", "  \"rms_norm_eps\": 1e-6, \"initializer_range\": 1e-308,",
                    buf, sizeof buf),
               "key 'initializer_range' is 1e-308: it must be in (1e-08, 1]", NULL);
  // Sizes whose products would overflow, and layer counts no model has.
  expect_error(edit("vocab_size", "  \"vocab_size\": 4294967296,", buf, sizeof buf),
               "t.json:4:3: error: key 'vocab_size' is 4294967296, beyond any real model",
               NULL);
  // More layers than the compiler takes function arguments (NN_MAX_FUNC_ARGS):
  // refused at import, not after minutes of passes.
  expect_error(edit("num_hidden_layers", "  \"num_hidden_layers\": 100000,", buf, sizeof buf),
               "t.json:7:3: error: num_hidden_layers 100000 is more than a compiled step takes "
               "(limit 4092: one parameter tensor per layer at least, 4096 function arguments "
               "in all)", NULL);
  expect_error(edit("num_hidden_layers", "  \"num_hidden_layers\": 4095,", buf, sizeof buf),
               "t.json:7:3: error: num_hidden_layers 4095 is more than a compiled step takes",
               NULL);
}

static void rope_errors(void **state) {
  char buf[4096];
  expect_error(edit("rope_theta", "  \"rope_scaling\": {\"rope_type\": \"yarn\", \"factor\": 8},",
                    buf, sizeof buf),
               "t.json:11:", "rope_type 'yarn' is not supported (supported: default, llama3, linear)",
               NULL);
  expect_error(edit("rope_theta", "  \"rope_scaling\": {\"rope_type\": \"linear\"},", buf,
                    sizeof buf),
               "missing required key 'rope_scaling.factor'", NULL);
  // Linear scaling (Gemma 3 4B's rope_scaling): the factor is kept.
  import_config c;
  char err[2048];
  edit("rope_theta", "  \"rope_scaling\": {\"rope_type\": \"linear\", \"factor\": 8},", buf,
       sizeof buf);
  assert_true(import_config_parse("t.json", buf, strlen(buf), &c, err, sizeof err));
  assert_string_equal(c.rope.type, "linear");
  assert_true(c.rope.factor == 8.0 && c.rope.theta == 10000.0);
  import_config_free(&c);
  expect_error(edit("rope_theta",
                    "  \"rope_scaling\": {\"rope_type\": \"llama3\", \"low_freq_factor\": 1,"
                    " \"high_freq_factor\": 4, \"original_max_position_embeddings\": 8192},",
                    buf, sizeof buf),
               "missing required key 'rope_scaling.factor'", NULL);
  expect_error(edit("rope_theta",
                    "  \"rope_parameters\": {\"rope_type\": \"llama3\", \"factor\": 8,"
                    " \"low_freq_factor\": 4, \"high_freq_factor\": 1,"
                    " \"original_max_position_embeddings\": 8192},",
                    buf, sizeof buf),
               "low_freq_factor 4 must be below high_freq_factor 1", NULL);
  expect_error(edit("rope_theta", "  \"rope_theta\": -1,", buf, sizeof buf),
               "key 'rope_theta' is -1: it must be in (1, 1e+12]", NULL);
  expect_error(edit("rope_theta", "  \"rope_theta\": 1e-308,", buf, sizeof buf),
               "t.json:11:3: error: key 'rope_theta' is 1e-308: it must be in (1, 1e+12]", NULL);
}

static void layer_kinds(void **state) {
  char buf[4096];
  expect_error(edit("rope_theta", "  \"layer_types\": [\"full_attention\"],", buf, sizeof buf),
               "layer_types must be an array of num_hidden_layers (2) strings", NULL);
  expect_error(edit("rope_theta",
                    "  \"layer_types\": [\"full_attention\", \"chunked\"],", buf, sizeof buf),
               "layer_types[1] must be", NULL);
  // A sliding layer without a window: Qwen2Config's sliding_window, 4096.
  import_config c;
  char err[2048];
  edit("rope_theta", "  \"layer_types\": [\"full_attention\", \"sliding_attention\"],",
       buf, sizeof buf);
  assert_true(import_config_parse("t.json", buf, strlen(buf), &c, err, sizeof err));
  assert_int_equal(c.sliding_window, 4096);
  assert_non_null(strstr(c.defaults_used, "sliding_window = 4096 (Qwen2Config default"));
  import_config_free(&c);
  // use_sliding_window with a null window: no window (Qwen2Config).
  edit("rope_theta", "  \"use_sliding_window\": true, \"sliding_window\": null,", buf, sizeof buf);
  assert_true(import_config_parse("t.json", buf, strlen(buf), &c, err, sizeof err));
  assert_int_equal(import_config_count_blocks(&c, IMPORT_BLOCK_SLIDING), 0);
  import_config_free(&c);
  // Qwen2 4.x: use_sliding_window makes layers >= max_window_layers sliding.
  edit("rope_theta",
       "  \"use_sliding_window\": true, \"max_window_layers\": 1, \"sliding_window\": 64,",
       buf, sizeof buf);
  assert_true(import_config_parse("t.json", buf, strlen(buf), &c, err, sizeof err));
  assert_int_equal(c.blocks[0], IMPORT_BLOCK_FULL);
  assert_int_equal(c.blocks[1], IMPORT_BLOCK_SLIDING);
  assert_int_equal(c.sliding_window, 64);
  import_config_free(&c);
}

static void nemotron_errors(void **state) {
  const char *base =
      "{\"architectures\": [\"NemotronHForCausalLM\"], \"vocab_size\": 64,"
      " \"hidden_size\": 32, \"intermediate_size\": 64, \"num_hidden_layers\": 3,"
      " \"num_attention_heads\": 4, \"num_key_value_heads\": 2,"
      " \"mamba_num_heads\": 4, \"mamba_head_dim\": 8, \"n_groups\": 2,"
      " \"ssm_state_size\": 8, \"conv_kernel\": 4, \"layer_norm_epsilon\": 1e-5,"
      " \"hybrid_override_pattern\": \"%s\"%s}";
  char buf[1024];
  snprintf(buf, sizeof buf, base, "M-", "");
  expect_error(buf, "hybrid_override_pattern has 2 blocks but num_hidden_layers is 3", NULL);
  snprintf(buf, sizeof buf, base, "M*E", "");
  expect_error(buf, "t.json:1:", "hybrid_override_pattern[2] is 'E'", NULL);
  snprintf(buf, sizeof buf, base, "M*-", ", \"use_conv_bias\": false");
  expect_error(buf, "use_conv_bias false is not supported", NULL);
  snprintf(buf, sizeof buf, base, "M*-", ", \"mlp_hidden_act\": \"silu\"");
  expect_error(buf, "mlp_hidden_act 'silu' is not supported for NemotronHForCausalLM", NULL);
  snprintf(buf, sizeof buf, base, "M*-", ", \"n_groups\": 3");
  expect_error(buf, "malformed JSON", "duplicate", NULL);

  import_config c;
  char err[2048];
  snprintf(buf, sizeof buf, base, "M*-", "");
  assert_true(import_config_parse("t.json", buf, strlen(buf), &c, err, sizeof err));
  assert_int_equal(c.blocks[1], IMPORT_BLOCK_ATTENTION);
  // No head_dim / attention_head_dim: NemotronHConfig.head_dim, 128 (not
  // hidden_size / num_attention_heads).
  assert_int_equal(c.head_dim, 128);
  import_config_free(&c);

  // transformers 5's own config.json: layers_block_type with its names and
  // no num_hidden_layers; attention reads head_dim.
  const char *v5 =
      "{\"architectures\": [\"NemotronHForCausalLM\"], \"vocab_size\": 64,"
      " \"hidden_size\": 32, \"intermediate_size\": 64, \"num_attention_heads\": 4,"
      " \"num_key_value_heads\": 2, \"head_dim\": 16, \"mamba_num_heads\": 4,"
      " \"mamba_head_dim\": 8, \"n_groups\": 2, \"ssm_state_size\": 8, \"conv_kernel\": 4,"
      " \"layers_block_type\": [\"linear_attention\", \"mlp\", \"full_attention\", %s]}";
  snprintf(buf, sizeof buf, v5, "\"mlp\"");
  if (!import_config_parse("t.json", buf, strlen(buf), &c, err, sizeof err))
    fail_msg("%s", err);
  assert_int_equal(c.layers, 4);
  assert_int_equal(c.blocks[0], IMPORT_BLOCK_MAMBA);
  assert_int_equal(c.blocks[2], IMPORT_BLOCK_ATTENTION);
  assert_int_equal(c.head_dim, 16);
  assert_true(c.eps == 1e-5); // NemotronHConfig.layer_norm_epsilon
  import_config_free(&c);
  // NemotronHConfig's aliases win over the plain keys, and
  // layers_block_type over hybrid_override_pattern, as in transformers 5.
  const char *alias =
      "{\"architectures\": [\"NemotronHForCausalLM\"], \"vocab_size\": 64,"
      " \"hidden_size\": 32, \"intermediate_size\": 64, \"num_attention_heads\": 4,"
      " \"num_key_value_heads\": 2, \"head_dim\": 16, \"mamba_num_heads\": 4,"
      " \"mamba_head_dim\": 8, \"n_groups\": 2, \"mamba_n_groups\": 4, \"ssm_state_size\": 8,"
      " \"conv_kernel\": 4, \"mamba_d_conv\": 3, \"hybrid_override_pattern\": \"M*--\","
      " \"layers_block_type\": [\"linear_attention\", \"mlp\", \"full_attention\", \"mlp\"]}";
  if (!import_config_parse("t.json", alias, strlen(alias), &c, err, sizeof err))
    fail_msg("%s", err);
  assert_int_equal(c.n_groups, 4);
  assert_int_equal(c.conv_kernel, 3);
  assert_int_equal(c.blocks[1], IMPORT_BLOCK_MLP);       // the list's, not the pattern's '*'
  assert_int_equal(c.blocks[2], IMPORT_BLOCK_ATTENTION);
  assert_null(c.warnings);
  import_config_free(&c);
  snprintf(buf, sizeof buf, v5, "\"moe\"");
  expect_error(buf, "layers_block_type[3] is \"moe\"",
               "mixture-of-experts blocks are not supported", NULL);
}

static void gemma3_conditional_generation(void **state) {
  // The text part of a multimodal Gemma3 config, 5.x spelling.
  const char *text =
      "{\"architectures\": [\"Gemma3ForConditionalGeneration\"],\n"
      " \"model_type\": \"gemma3\",\n"
      " \"text_config\": {\"model_type\": \"gemma3_text\", \"vocab_size\": 128,\n"
      "   \"hidden_size\": 64, \"intermediate_size\": 96, \"num_hidden_layers\": 3,\n"
      "   \"num_attention_heads\": 2, \"num_key_value_heads\": 1, \"head_dim\": 32,\n"
      "   \"query_pre_attn_scalar\": 64, \"sliding_window\": 16,\n"
      "   \"layer_types\": [\"sliding_attention\", \"sliding_attention\", \"full_attention\"],\n"
      "   \"rope_parameters\": {\"full_attention\": {\"rope_type\": \"default\", \"rope_theta\": 1000000.0},\n"
      "                       \"sliding_attention\": {\"rope_type\": \"default\", \"rope_theta\": 10000.0}}},\n"
      " \"vision_config\": {\"hidden_size\": 1152}}\n";
  import_config c;
  char err[2048];
  if (!import_config_parse("t.json", text, strlen(text), &c, err, sizeof err))
    fail_msg("%s", err);
  assert_string_equal(c.arch->prefix, "model.language_model");
  assert_int_equal(c.hidden, 64); // not vision_config's
  assert_true(c.tie);
  assert_true(c.attn_scale == 0.125);
  assert_true(c.rope.theta == 1e6);
  assert_true(c.rope_local.theta == 1e4);
  assert_int_equal(c.blocks[2], IMPORT_BLOCK_FULL);
  int line, col;
  assert_true(import_config_locate(&c, "hidden_size", &line, &col));
  assert_int_equal(line, 4);
  import_config_free(&c);

  expect_error("{\"architectures\": [\"Gemma3ForConditionalGeneration\"]}",
               "Gemma3ForConditionalGeneration needs the object 'text_config'", NULL);
  // A sparse text_config, as published Gemma 3 configs have: the rest is
  // Gemma3TextConfig's defaults, reported with the scope.
  const char *sparse = "{\"architectures\": [\"Gemma3ForConditionalGeneration\"],\n"
                       " \"text_config\": {\"model_type\": \"gemma3_text\", \"hidden_size\": 64}}";
  if (!import_config_parse("t.json", sparse, strlen(sparse), &c, err, sizeof err))
    fail_msg("%s", err);
  assert_int_equal(c.vocab, 262208);
  assert_int_equal(c.heads, 8);
  assert_int_equal(c.kv_heads, 4);
  assert_int_equal(c.head_dim, 256);
  assert_int_equal(c.layers, 26);
  assert_int_equal(c.padding_idx, 0);
  assert_int_equal(c.sliding_window, 4096);
  assert_true(c.attn_scale == 1.0 / 16); // query_pre_attn_scalar 256
  assert_true(c.tie);
  assert_true(c.rope.theta == 1e6 && c.rope_local.theta == 1e4);
  assert_int_equal(c.blocks[5], IMPORT_BLOCK_FULL); // sliding_window_pattern 6
  assert_int_equal(c.blocks[4], IMPORT_BLOCK_SLIDING);
  assert_non_null(strstr(c.defaults_used, "text_config.vocab_size = 262208 "
                                          "(Gemma3TextConfig default"));
  assert_non_null(strstr(c.defaults_used, "text_config.query_pre_attn_scalar = 256"));
  import_config_free(&c);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(qwen2_5_0_5b),
      cmocka_unit_test(llama_3_1_70b_rope_scaling),
      cmocka_unit_test(gemma3_sliding_pattern),
      cmocka_unit_test(qwen3_both_spellings_agree),
      cmocka_unit_test(nemotron_h_pattern),
      cmocka_unit_test(tiny_parses),
      cmocka_unit_test(malformed_json),
      cmocka_unit_test(class_defaults),
      cmocka_unit_test(ignored_keys),
      cmocka_unit_test(wrongly_typed_keys),
      cmocka_unit_test(unknown_architecture),
      cmocka_unit_test(impossible_sizes),
      cmocka_unit_test(rope_errors),
      cmocka_unit_test(layer_kinds),
      cmocka_unit_test(nemotron_errors),
      cmocka_unit_test(gemma3_conditional_generation),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
