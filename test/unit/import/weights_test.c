// --weights: checkpoints this test writes for a tiny Qwen2 derived from the
// real Qwen2.5-0.5B config are checked tensor by tensor against the graph:
// exact files pass; a missing, extra, misshapen or mistyped tensor, a bad
// index or a broken file gives one error naming the file and the tensor.
#include <jansson.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "config.h"
#include "model.h"
#include "st_writer.h"
#include "summary.h"
#include "weights.h"

typedef struct fixture {
  MlirContext ctx;
  import_config cfg;
  import_model model;
  char *dir;
  char path[4096];
  char err[2048];
} fixture;

// The real config with small sizes: 2 layers, hidden 64, 4 heads / 2 KV.
static char *tiny_qwen2(void) {
  json_error_t jerr;
  json_t *c = json_load_file(SHARD_MODELS_DIR "/qwen2.5-0.5b.json", 0, &jerr);
  if (!c)
    return NULL;
  json_object_set_new(c, "vocab_size", json_integer(256));
  json_object_set_new(c, "hidden_size", json_integer(64));
  json_object_set_new(c, "intermediate_size", json_integer(128));
  json_object_set_new(c, "num_hidden_layers", json_integer(2));
  json_object_set_new(c, "num_attention_heads", json_integer(4));
  json_object_set_new(c, "num_key_value_heads", json_integer(2));
  char *text = json_dumps(c, JSON_INDENT(2));
  json_decref(c);
  return text;
}

static int setup(void **state) {
  fixture *f = calloc(1, sizeof *f);
  char *text = tiny_qwen2();
  if (!f || !text)
    return -1;
  bool ok = import_config_parse("tiny-qwen2.json", text, strlen(text), &f->cfg, f->err,
                                sizeof f->err);
  free(text);
  if (!ok) {
    fprintf(stderr, "%s\n", f->err);
    return -1;
  }
  f->ctx = nn_context_create();
  import_options opts = {.batch = 1, .seq = 8};
  if (mlirContextIsNull(f->ctx) ||
      !import_model_build(f->ctx, &f->cfg, &opts, &f->model, f->err, sizeof f->err))
    return -1;
  f->dir = st_make_temp_dir();
  snprintf(f->path, sizeof f->path, "%s/model.safetensors", f->dir);
  *state = f;
  return f->dir ? 0 : -1;
}

static int teardown(void **state) {
  fixture *f = *state;
  import_model_free(&f->model);
  mlirContextDestroy(f->ctx);
  import_config_free(&f->cfg);
  st_remove_tree(f->dir);
  free(f->dir);
  free(f);
  return 0;
}

// How write_params deviates from the graph.
typedef struct variant {
  const char *dtype;       // of every tensor (default F32)
  const char *skip;        // leave this parameter out
  const char *transpose;   // write this 2-D parameter transposed
  const char *extra;       // add this name (shape [4])
  int first, count;        // write params[first .. first+count) (count 0: all)
} variant;

static bool write_params(const fixture *f, const char *path, variant v) {
  const import_model *m = &f->model;
  st_tensor *t = calloc((size_t)m->num_params + 1, sizeof *t);
  int n = 0, end = v.count ? v.first + v.count : m->num_params;
  for (int i = v.first; i < end; ++i) {
    const import_param *p = &m->params[i];
    if (v.skip && !strcmp(p->name, v.skip))
      continue;
    t[n] = (st_tensor){p->name, v.dtype ? v.dtype : "F32", p->rank, {0}};
    memcpy(t[n].shape, p->dims, (size_t)p->rank * sizeof *p->dims);
    if (v.transpose && !strcmp(p->name, v.transpose)) {
      t[n].shape[0] = p->dims[1];
      t[n].shape[1] = p->dims[0];
    }
    ++n;
  }
  if (v.extra)
    t[n++] = (st_tensor){v.extra, v.dtype ? v.dtype : "F32", 1, {4}};
  bool ok = st_write(path, t, n);
  free(t);
  return ok;
}

// Runs the check expecting failure with every listed string in the error.
static void expect_error(fixture *f, const char *path, srt_dtype dtype, ...) {
  if (import_check_weights(path, &f->model, dtype, false, NULL, f->err, sizeof f->err))
    fail_msg("check of %s passed, expected an error", path);
  va_list ap;
  va_start(ap, dtype);
  for (const char *want; (want = va_arg(ap, const char *)) != NULL;)
    if (!strstr(f->err, want))
      fail_msg("error '%s' lacks '%s'", f->err, want);
  va_end(ap);
}

static void expect_ok(fixture *f, const char *path, srt_dtype dtype) {
  if (!import_check_weights(path, &f->model, dtype, false, NULL, f->err, sizeof f->err))
    fail_msg("%s", f->err);
}

//===----------------------------------------------------------------------===//
// Tests
//===----------------------------------------------------------------------===//

static void graph_parameters(void **state) {
  fixture *f = *state;
  // embed + 2 x (2 norms, q/k/v weights and biases, o, gate/up/down) + norm
  assert_int_equal(f->model.num_params, 1 + 2 * 12 + 1);
  assert_string_equal(f->model.params[0].name, "model.embed_tokens.weight");
  assert_int_equal(f->model.tied_to, 0);
  assert_string_equal(f->model.tied_name, "lm_head.weight");
  // 256*64 + 2*(64+64 + 64*64+64 + 2*(32*64+32) + 64*64 + 3*128*64) + 64
  assert_int_equal(import_summary_total(&f->model), 90688);
  assert_int_equal(import_summary_count(&f->model, IMPORT_PARAM_LM_HEAD), 0);
}

static void exact_file_and_directory_pass(void **state) {
  fixture *f = *state;
  assert_true(write_params(f, f->path, (variant){0}));
  expect_ok(f, f->path, SRT_F32);
  expect_ok(f, f->dir, SRT_F32); // the directory holding model.safetensors
}

static void missing_tensor(void **state) {
  fixture *f = *state;
  assert_true(write_params(f, f->path,
                           (variant){.skip = "model.layers.1.mlp.down_proj.weight"}));
  expect_error(f, f->path, SRT_F32, f->path,
               "missing tensor 'model.layers.1.mlp.down_proj.weight' (F32 [64, 128]",
               NULL);
}

static void extra_tensor(void **state) {
  fixture *f = *state;
  assert_true(write_params(f, f->path,
                           (variant){.extra = "model.layers.2.input_layernorm.weight"}));
  expect_error(f, f->path, SRT_F32, f->path,
               "tensor 'model.layers.2.input_layernorm.weight' is not a parameter of the "
               "graph (extra tensor)",
               NULL);
}

static void wrong_shape(void **state) {
  fixture *f = *state;
  assert_true(write_params(f, f->path,
                           (variant){.transpose = "model.layers.0.mlp.up_proj.weight"}));
  expect_error(f, f->path, SRT_F32,
               "tensor 'model.layers.0.mlp.up_proj.weight' has shape [64, 128], but the "
               "graph expects [128, 64]",
               NULL);
}

static void wrong_dtype(void **state) {
  fixture *f = *state;
  assert_true(write_params(f, f->path, (variant){.dtype = "BF16"}));
  expect_error(f, f->path, SRT_F32, "is BF16, but the graph's parameters are F32 "
                                    "(import with --dtype bf16)", NULL);
  expect_ok(f, f->path, SRT_BF16);
}

static void tied_lm_head_copy(void **state) {
  fixture *f = *state;
  // Some checkpoints of tied models store lm_head.weight too: accepted when
  // it matches the embedding, an error when it does not.
  const import_model *m = &f->model;
  st_tensor *t = calloc((size_t)m->num_params + 1, sizeof *t);
  for (int i = 0; i < m->num_params; ++i) {
    t[i] = (st_tensor){m->params[i].name, "F32", m->params[i].rank, {0}};
    memcpy(t[i].shape, m->params[i].dims, sizeof m->params[i].dims);
  }
  t[m->num_params] = (st_tensor){"lm_head.weight", "F32", 2, {256, 64}};
  assert_true(st_write(f->path, t, m->num_params + 1));
  expect_ok(f, f->path, SRT_F32);
  t[m->num_params].shape[0] = 255;
  assert_true(st_write(f->path, t, m->num_params + 1));
  expect_error(f, f->path, SRT_F32, "tensor 'lm_head.weight' has shape [255, 64]", NULL);
  free(t);
}

// Writes two shards (first `split` params, then the rest) and an index.
static void write_sharded(fixture *f, int split, const char *index_extra) {
  char path[4096];
  const char *names[2] = {"model-00001-of-00002.safetensors",
                          "model-00002-of-00002.safetensors"};
  snprintf(path, sizeof path, "%s/%s", f->dir, names[0]);
  assert_true(write_params(f, path, (variant){.first = 0, .count = split}));
  snprintf(path, sizeof path, "%s/%s", f->dir, names[1]);
  assert_true(write_params(
      f, path, (variant){.first = split, .count = f->model.num_params - split}));
  json_t *map = json_object();
  for (int i = 0; i < f->model.num_params; ++i)
    json_object_set_new(map, f->model.params[i].name, json_string(names[i >= split]));
  json_t *index = json_pack("{s:{s:i}, s:o}", "metadata", "total_size", 0, "weight_map", map);
  if (index_extra) {
    json_error_t jerr;
    json_t *patch = json_loads(index_extra, 0, &jerr);
    json_object_update(map, patch);
    json_decref(patch);
  }
  snprintf(path, sizeof path, "%s/model.safetensors.index.json", f->dir);
  assert_int_equal(json_dump_file(index, path, JSON_INDENT(1)), 0);
  json_decref(index);
}

static void sharded_index(void **state) {
  fixture *f = *state;
  write_sharded(f, 10, NULL);
  expect_ok(f, f->dir, SRT_F32);

  // The map names the wrong shard for a tensor.
  write_sharded(f, 10, "{\"model.norm.weight\": \"model-00001-of-00002.safetensors\"}");
  expect_error(f, f->dir, SRT_F32, "model.safetensors.index.json",
               "weight_map puts tensor 'model.norm.weight' in "
               "'model-00001-of-00002.safetensors', which has no such tensor",
               NULL);

  // A name the graph lacks, listed and present.
  write_sharded(f, 10, "{\"model.layers.0.self_attn.o_proj.bias\": "
                       "\"model-00001-of-00002.safetensors\"}");
  expect_error(f, f->dir, SRT_F32, "weight_map puts tensor 'model.layers.0.self_attn.o_proj.bias'",
               NULL);

  // Escaping the directory is refused.
  write_sharded(f, 10, "{\"model.norm.weight\": \"../model.safetensors\"}");
  expect_error(f, f->dir, SRT_F32,
               "weight_map entry 'model.norm.weight' must be a file name in the same "
               "directory",
               NULL);
}

static void sharded_index_missing_and_unlisted(void **state) {
  fixture *f = *state;
  write_sharded(f, 10, NULL);
  // Rewrite the index without the last parameter: it is missing, and the
  // shard holding it has an unlisted tensor, which the reader refuses.
  char path[4096];
  snprintf(path, sizeof path, "%s/model.safetensors.index.json", f->dir);
  json_error_t jerr;
  json_t *index = json_load_file(path, 0, &jerr);
  json_object_del(json_object_get(index, "weight_map"), "model.norm.weight");
  json_dump_file(index, path, 0);
  json_decref(index);
  expect_error(f, f->dir, SRT_F32, "model-00002-of-00002.safetensors: error: holds tensor "
               "'model.norm.weight', which", "model.safetensors.index.json lists nowhere", NULL);

  FILE *out = fopen(path, "w");
  fputs("{\"weight_map\": {\"a\": \"x.safetensors\",}}", out);
  fclose(out);
  expect_error(f, f->dir, SRT_F32, "model.safetensors.index.json",
               "malformed JSON at line 1", NULL);
  out = fopen(path, "w");
  fputs("{\"metadata\": {}}", out);
  fclose(out);
  expect_error(f, f->dir, SRT_F32, "missing or non-object key 'weight_map'", NULL);
}

static void broken_files_and_empty_directory(void **state) {
  fixture *f = *state;
  expect_error(f, f->dir, SRT_F32, "neither model.safetensors.index.json nor "
                                   "model.safetensors", NULL);
  assert_true(st_write_raw(f->path, 4096, "{}", 2, NULL, 0));
  expect_error(f, f->path, SRT_F32, f->path, "header length 4096 runs past the end", NULL);
  char missing[4200];
  snprintf(missing, sizeof missing, "%s/none.safetensors", f->dir);
  expect_error(f, missing, SRT_F32, "none.safetensors: error: cannot open", NULL);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(graph_parameters, setup, teardown),
      cmocka_unit_test_setup_teardown(exact_file_and_directory_pass, setup, teardown),
      cmocka_unit_test_setup_teardown(missing_tensor, setup, teardown),
      cmocka_unit_test_setup_teardown(extra_tensor, setup, teardown),
      cmocka_unit_test_setup_teardown(wrong_shape, setup, teardown),
      cmocka_unit_test_setup_teardown(wrong_dtype, setup, teardown),
      cmocka_unit_test_setup_teardown(tied_lm_head_copy, setup, teardown),
      cmocka_unit_test_setup_teardown(sharded_index, setup, teardown),
      cmocka_unit_test_setup_teardown(sharded_index_missing_and_unlisted, setup, teardown),
      cmocka_unit_test_setup_teardown(broken_files_and_empty_directory, setup, teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
