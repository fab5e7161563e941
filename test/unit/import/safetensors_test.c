// The safetensors reader: a well-formed file read back exactly, and every
// kind of malformed file rejected with a status naming the file and tensor.
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "shardrt/safetensors.h"
#include "st_writer.h"

typedef struct fixture {
  char *dir;
  char path[4096];
} fixture;

static int setup(void **state) {
  fixture *f = calloc(1, sizeof *f);
  if (!f || !(f->dir = st_make_temp_dir()))
    return -1;
  snprintf(f->path, sizeof f->path, "%s/model.safetensors", f->dir);
  *state = f;
  return 0;
}

static int teardown(void **state) {
  fixture *f = *state;
  st_remove_tree(f->dir);
  free(f->dir);
  free(f);
  return 0;
}

// Opens f->path expecting failure with `code` and every string of the
// NULL-terminated list in the message.
static void expect_error(const fixture *f, srt_code code, ...) {
  srt_safetensors *file = (srt_safetensors *)1;
  srt_status s = srt_safetensors_open(f->path, &file);
  assert_non_null(s);
  assert_null(file);
  const char *msg = srt_status_message(s);
  if (srt_status_code(s) != code || !strstr(msg, f->path))
    fail_msg("got %s: %s", srt_code_name(srt_status_code(s)), msg);
  va_list ap;
  va_start(ap, code);
  for (const char *want; (want = va_arg(ap, const char *)) != NULL;)
    if (!strstr(msg, want))
      fail_msg("message '%s' lacks '%s'", msg, want);
  va_end(ap);
  srt_status_free(s);
}

//===----------------------------------------------------------------------===//
// Well-formed files
//===----------------------------------------------------------------------===//

static void reads_tensors_back(void **state) {
  fixture *f = *state;
  // Written out of name order, with metadata and a gap-free layout.
  float w[6] = {1, 2, 3, 4, 5, 6};
  unsigned char data[24 + 8];
  memcpy(data, w, sizeof w);
  for (int i = 0; i < 8; ++i)
    data[24 + i] = (unsigned char)(0xa0 + i);
  const char *header =
      "{\"z.weight\":{\"dtype\":\"F32\",\"shape\":[2,3],\"data_offsets\":[0,24]},"
      "\"__metadata__\":{\"format\":\"pt\"},"
      "\"a.bias\":{\"dtype\":\"BF16\",\"shape\":[4],\"data_offsets\":[24,32]}}";
  assert_true(st_write_text(f->path, header, data, sizeof data));

  srt_safetensors *file;
  srt_status s = srt_safetensors_open(f->path, &file);
  assert_null(s);
  assert_string_equal(srt_safetensors_path(file), f->path);
  assert_int_equal(srt_safetensors_count(file), 2);
  assert_string_equal(srt_safetensors_metadata(file, "format"), "pt");
  assert_null(srt_safetensors_metadata(file, "absent"));

  const srt_tensor_info *a = srt_safetensors_get(file, 0); // name order
  assert_string_equal(a->name, "a.bias");
  assert_int_equal(a->dtype, SRT_BF16);
  assert_int_equal(a->rank, 1);
  assert_int_equal(a->shape[0], 4);
  assert_int_equal(a->nbytes, 8);
  assert_int_equal(a->offset, 24);
  assert_int_equal(((const unsigned char *)a->data)[0], 0xa0);
  assert_int_equal(((const unsigned char *)a->data)[7], 0xa7);

  const srt_tensor_info *z;
  assert_null(srt_safetensors_find(file, "z.weight", &z));
  assert_int_equal(z->dtype, SRT_F32);
  assert_int_equal(z->rank, 2);
  assert_int_equal(z->shape[0], 2);
  assert_int_equal(z->shape[1], 3);
  assert_int_equal(srt_tensor_numel(z), 6);
  float back[6];
  memcpy(back, z->data, sizeof back); // data need not be aligned
  for (int i = 0; i < 6; ++i)
    assert_true(back[i] == w[i]);
  assert_null(srt_safetensors_get(file, 2));

  const srt_tensor_info *missing;
  s = srt_safetensors_find(file, "model.norm.weight", &missing);
  assert_null(missing);
  assert_int_equal(srt_status_code(s), SRT_NOT_FOUND);
  assert_non_null(strstr(srt_status_message(s), "model.norm.weight"));
  assert_non_null(strstr(srt_status_message(s), f->path));
  srt_status_free(s);
  assert_null(srt_safetensors_lookup(file, "a"));
  srt_safetensors_close(file);
}

static void scalars_empty_tensors_and_no_tensors(void **state) {
  fixture *f = *state;
  // A scalar, an empty tensor sharing its offset (no bytes, so no overlap),
  // and an I64 vector.
  const char *header =
      "{\"s\":{\"dtype\":\"F32\",\"shape\":[],\"data_offsets\":[0,4]},"
      "\"e\":{\"dtype\":\"F32\",\"shape\":[0,5],\"data_offsets\":[4,4]},"
      "\"e2\":{\"dtype\":\"F16\",\"shape\":[3,0],\"data_offsets\":[0,0]},"
      "\"i\":{\"dtype\":\"I64\",\"shape\":[2],\"data_offsets\":[4,20]}}";
  assert_true(st_write_text(f->path, header, NULL, 20));
  srt_safetensors *file;
  assert_null(srt_safetensors_open(f->path, &file));
  assert_int_equal(srt_safetensors_count(file), 4);
  const srt_tensor_info *t = srt_safetensors_lookup(file, "s");
  assert_int_equal(t->rank, 0);
  assert_int_equal(srt_tensor_numel(t), 1);
  assert_int_equal(t->nbytes, 4);
  t = srt_safetensors_lookup(file, "e");
  assert_int_equal(t->nbytes, 0);
  assert_int_equal(srt_tensor_numel(t), 0);
  srt_safetensors_close(file);

  assert_true(st_write_text(f->path, "{}", NULL, 0));
  assert_null(srt_safetensors_open(f->path, &file));
  assert_int_equal(srt_safetensors_count(file), 0);
  srt_safetensors_close(file);
  srt_safetensors_close(NULL);
}

static void reads_files_written_by_the_helper(void **state) {
  fixture *f = *state;
  st_tensor t[] = {{"w", "F32", 2, {3, 4}}, {"b", "BF16", 1, {3}}};
  assert_true(st_write(f->path, t, 2));
  srt_safetensors *file;
  assert_null(srt_safetensors_open(f->path, &file));
  const srt_tensor_info *w = srt_safetensors_lookup(file, "w");
  const srt_tensor_info *b = srt_safetensors_lookup(file, "b");
  assert_int_equal(w->nbytes, 48);
  assert_int_equal(b->offset, 48);
  assert_int_equal(((const unsigned char *)w->data)[47], 1);
  assert_int_equal(((const unsigned char *)b->data)[0], 2);
  srt_safetensors_close(file);
}

//===----------------------------------------------------------------------===//
// Malformed files: one test per kind
//===----------------------------------------------------------------------===//

static void missing_file(void **state) {
  fixture *f = *state;
  expect_error(f, SRT_NOT_FOUND, "cannot open", NULL);
}

static void directory_is_not_a_file(void **state) {
  fixture *f = *state;
  snprintf(f->path, sizeof f->path, "%s", f->dir);
  expect_error(f, SRT_IO, "not a regular file", NULL);
}

static void truncated_before_header_length(void **state) {
  fixture *f = *state;
  FILE *out = fopen(f->path, "wb");
  fwrite("\x10\x00\x00", 1, 3, out);
  fclose(out);
  expect_error(f, SRT_DATA_LOSS, "truncated: 3 bytes", NULL);
  out = fopen(f->path, "wb");
  fclose(out);
  expect_error(f, SRT_DATA_LOSS, "truncated: 0 bytes", NULL);
}

static void header_length_past_the_end(void **state) {
  fixture *f = *state;
  const char *h = "{}";
  assert_true(st_write_raw(f->path, 100, h, 2, NULL, 0));
  expect_error(f, SRT_DATA_LOSS, "header length 100 runs past the end of the file (10 bytes",
               NULL);
  assert_true(st_write_raw(f->path, UINT64_MAX, h, 2, NULL, 0));
  expect_error(f, SRT_DATA_LOSS, "exceeds the", "not a safetensors file?",
               "read \"\\xff\\xff\\xff\\xff\\xff\\xff\\xff\\xff\"", NULL);
  // A token file given as a checkpoint shows its magic (how it once read: a
  // bare "header length 23445227156296275 exceeds the ... limit").
  FILE *out = fopen(f->path, "wb");
  fwrite("SRTTOKS\0{}", 1, 10, out);
  fclose(out);
  expect_error(f, SRT_DATA_LOSS, "header length 23445227156296275 exceeds",
               "read \"SRTTOKS\\x00\"", NULL);
}

static void bad_header_json(void **state) {
  fixture *f = *state;
  assert_true(st_write_text(f->path, "{\"a\": {\"dtype\": \"F32\",, }}", NULL, 0));
  expect_error(f, SRT_DATA_LOSS, "bad header JSON at header line 1, column", NULL);
  assert_true(st_write_text(f->path, "[1, 2]", NULL, 0));
  expect_error(f, SRT_DATA_LOSS, "header is not a JSON object", NULL);
  // Truncated in the middle of the header: the length says more than the
  // file holds once data is missing, but here the header itself is cut.
  assert_true(st_write_raw(f->path, 6, "{\"a\":1", 6, NULL, 0));
  expect_error(f, SRT_DATA_LOSS, "bad header JSON", NULL);
}

static void duplicate_names(void **state) {
  fixture *f = *state;
  const char *header =
      "{\"w\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},"
      "\"w\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}}";
  assert_true(st_write_text(f->path, header, NULL, 8));
  expect_error(f, SRT_DATA_LOSS, "duplicate", "w", NULL);
}

static void unknown_dtype(void **state) {
  fixture *f = *state;
  assert_true(st_write_text(
      f->path,
      "{\"model.w\":{\"dtype\":\"F8_E4M3\",\"shape\":[4],\"data_offsets\":[0,4]}}",
      NULL, 4));
  expect_error(f, SRT_DATA_LOSS, "tensor 'model.w'", "unknown dtype 'F8_E4M3'", NULL);
}

static void byte_size_not_matching_shape(void **state) {
  fixture *f = *state;
  assert_true(st_write_text(
      f->path,
      "{\"model.w\":{\"dtype\":\"F32\",\"shape\":[2,2],\"data_offsets\":[0,12]}}",
      NULL, 16));
  expect_error(f, SRT_DATA_LOSS, "tensor 'model.w'",
               "data_offsets [0, 12] hold 12 bytes but F32 [2, 2] needs 16", NULL);
}

static void overlapping_offsets(void **state) {
  fixture *f = *state;
  assert_true(st_write_text(
      f->path,
      "{\"a\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[0,16]},"
      "\"b\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[8,24]}}",
      NULL, 24));
  expect_error(f, SRT_DATA_LOSS, "tensors 'a' (bytes 0..16) and 'b' (bytes 8..24) overlap",
               NULL);
}

static void out_of_range_offsets(void **state) {
  fixture *f = *state;
  assert_true(st_write_text(
      f->path, "{\"a\":{\"dtype\":\"U8\",\"shape\":[64],\"data_offsets\":[0,64]}}",
      NULL, 10));
  expect_error(f, SRT_OUT_OF_RANGE, "tensor 'a'",
               "run past the end of the data section (10 bytes)", NULL);
  assert_true(st_write_text(
      f->path, "{\"a\":{\"dtype\":\"U8\",\"shape\":[0],\"data_offsets\":[8,4]}}",
      NULL, 10));
  expect_error(f, SRT_DATA_LOSS, "tensor 'a'", "end before they begin", NULL);
}

static void malformed_entries(void **state) {
  fixture *f = *state;
  static const struct {
    const char *header;
    const char *want;
  } cases[] = {
      {"{\"a\":5}", "header entry is not a JSON object"},
      {"{\"a\":{\"shape\":[1],\"data_offsets\":[0,1]}}", "missing or non-string 'dtype'"},
      {"{\"a\":{\"dtype\":\"U8\",\"data_offsets\":[0,1]}}", "missing or non-array 'shape'"},
      {"{\"a\":{\"dtype\":\"U8\",\"shape\":[-1],\"data_offsets\":[0,1]}}",
       "shape[0] is not a non-negative integer"},
      {"{\"a\":{\"dtype\":\"U8\",\"shape\":[1.5],\"data_offsets\":[0,1]}}",
       "shape[0] is not a non-negative integer"},
      {"{\"a\":{\"dtype\":\"U8\",\"shape\":[1,1,1,1,1,1,1,1,1],\"data_offsets\":[0,1]}}",
       "rank 9 exceeds the maximum of 8"},
      {"{\"a\":{\"dtype\":\"U8\",\"shape\":[1]}}", "'data_offsets' must be two"},
      {"{\"a\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0]}}",
       "'data_offsets' must be two"},
      {"{\"a\":{\"dtype\":\"U8\",\"shape\":[4294967296,4294967296,16],"
       "\"data_offsets\":[0,1]}}",
       "overflows"},
      {"{\"__metadata__\":{\"format\":1}}", "'__metadata__' entry 'format' is not a string"},
      {"{\"__metadata__\":[]}", "'__metadata__' is not a JSON object"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof *cases; ++i) {
    assert_true(st_write_text(f->path, cases[i].header, NULL, 1));
    expect_error(f, SRT_DATA_LOSS, cases[i].want, NULL);
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(reads_tensors_back, setup, teardown),
      cmocka_unit_test_setup_teardown(scalars_empty_tensors_and_no_tensors, setup, teardown),
      cmocka_unit_test_setup_teardown(reads_files_written_by_the_helper, setup, teardown),
      cmocka_unit_test_setup_teardown(missing_file, setup, teardown),
      cmocka_unit_test_setup_teardown(directory_is_not_a_file, setup, teardown),
      cmocka_unit_test_setup_teardown(truncated_before_header_length, setup, teardown),
      cmocka_unit_test_setup_teardown(header_length_past_the_end, setup, teardown),
      cmocka_unit_test_setup_teardown(bad_header_json, setup, teardown),
      cmocka_unit_test_setup_teardown(duplicate_names, setup, teardown),
      cmocka_unit_test_setup_teardown(unknown_dtype, setup, teardown),
      cmocka_unit_test_setup_teardown(byte_size_not_matching_shape, setup, teardown),
      cmocka_unit_test_setup_teardown(overlapping_offsets, setup, teardown),
      cmocka_unit_test_setup_teardown(out_of_range_offsets, setup, teardown),
      cmocka_unit_test_setup_teardown(malformed_entries, setup, teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
