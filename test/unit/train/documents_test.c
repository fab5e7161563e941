// The document structure of a batch file (runtime/train/documents.c)
// against cases worked out by hand from transformers 5's masking_utils:
// find_packed_sequence_indices (a document starts wherever a position is not
// the previous one plus 1; the first token of a row opens document 0),
// _preprocess_mask_arguments (packing is inferred only without a 2D
// attention_mask) and padding_mask_function (mask 0: a padded key), and the
// decoders' default positions (arange). Then the refusals, each naming the
// file, tensor, row, column and value, and the labels a padding query would
// predict. Exact integers throughout.
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "../runtime/runtime_test_util.h"
#include "train_internal.h"

enum { MAX_ELEMS = 64 };

// A [b, s] tensor of `dtype` whose elements are `v` (converted), stored one
// byte past an aligned address, as a safetensors mapping may place it.
typedef struct tensor {
  srt_tensor_info info;
  uint8_t bytes[MAX_ELEMS * 8 + 1];
} tensor;

static void make(tensor *t, srt_dtype dtype, int64_t b, int64_t s, const int64_t *v) {
  size_t size = srt_dtype_size(dtype);
  assert_true(b * s <= MAX_ELEMS);
  for (int64_t i = 0; i < b * s; ++i) {
    uint8_t *at = t->bytes + 1 + (size_t)i * size;
    if (dtype == SRT_I64)
      memcpy(at, &v[i], 8);
    else if (dtype == SRT_I32) {
      int32_t x = (int32_t)v[i];
      memcpy(at, &x, 4);
    } else
      *at = (uint8_t)v[i];
  }
  t->info = (srt_tensor_info){.name = "t", .dtype = dtype, .rank = 2, .shape = {b, s},
                              .data = t->bytes + 1, .nbytes = (size_t)(b * s) * size};
}

static void expect(const int64_t *got, const int64_t *want, int64_t n, const char *what) {
  for (int64_t i = 0; i < n; ++i)
    if (got[i] != want[i])
      fail_msg("%s[%lld] = %lld, expected %lld", what, (long long)i, (long long)got[i],
               (long long)want[i]);
}

// Runs train_documents on all `b` rows and compares both outputs.
static void check(const srt_tensor_info *pos, const srt_tensor_info *mask, int64_t b,
                  int64_t s, const int64_t *want_pos, const int64_t *want_seg) {
  int64_t p[MAX_ELEMS], g[MAX_ELEMS];
  srt_status st = train_documents("batch.safetensors", pos, mask, b, s, 512, 0, b, p, g);
  if (st)
    fail_msg("%s", srt_status_message(st));
  expect(p, want_pos, b * s, "positions");
  expect(g, want_seg, b * s, "segments");
}

// The refusal of train_documents on these inputs must name every string
// of `needles` (NULL-terminated).
static void refused(const srt_tensor_info *pos, const srt_tensor_info *mask, int64_t b,
                    int64_t s, int64_t max_positions, int64_t first_row, int64_t rows,
                    const char *const *needles) {
  int64_t p[MAX_ELEMS], g[MAX_ELEMS];
  assert_refused(
      train_documents("batch.safetensors", pos, mask, b, s, max_positions, first_row, rows, p, g),
      SRT_INVALID_ARGUMENT, needles);
}

static void test_defaults(void **state) {
  (void)state; // no position_ids, no mask: positions 0..S-1, one document
  const int64_t pos[] = {0, 1, 2, 3, 0, 1, 2, 3}, seg[8] = {0};
  check(NULL, NULL, 2, 4, pos, seg);
}

static void test_packed(void **state) {
  (void)state; // DataCollatorWithFlattening: documents of 3, 2, 4 tokens
  const int64_t v[] = {0, 1, 2, 0, 1, 0, 1, 2, 3};
  const int64_t seg[] = {0, 0, 0, 1, 1, 2, 2, 2, 2};
  tensor pos;
  make(&pos, SRT_I64, 1, 9, v);
  check(&pos.info, NULL, 1, 9, v, seg);
}

static void test_split_and_odd_steps(void **state) {
  (void)state;
  // Row 0 starts inside a document (at position 5) and another starts at
  // 0; row 1: a repeated position (diff 0), a jump by 2 and a step down
  // each open a document (torch.diff != 1); documents count from 0 per row.
  const int64_t v[] = {5, 6, 7, 0, 1, 2, /**/ 0, 0, 1, 3, 4, 2};
  const int64_t seg[] = {0, 0, 0, 1, 1, 1, /**/ 0, 1, 1, 2, 2, 3};
  tensor pos;
  make(&pos, SRT_I64, 2, 6, v);
  check(&pos.info, NULL, 2, 6, v, seg);
}

static void test_mask_pads_and_stops_packing(void **state) {
  (void)state;
  // Left padding (row 0), right padding (row 1), with each mask dtype a
  // collator may save; the positions restart (as if packed) but a mask is
  // given, so each row stays one document: masking_utils infers packing
  // only without a 2D mask.
  const int64_t m[] = {0, 0, 1, 1, 1, /**/ 1, 1, 1, 0, 0};
  const int64_t v[] = {0, 1, 2, 0, 1, /**/ 0, 1, 2, 3, 4};
  const int64_t seg[] = {-1, -1, 0, 0, 0, /**/ 0, 0, 0, -1, -1};
  const int64_t arange[] = {0, 1, 2, 3, 4, 0, 1, 2, 3, 4};
  const srt_dtype types[] = {SRT_I64, SRT_I32, SRT_I8, SRT_U8, SRT_BOOL};
  for (size_t k = 0; k < sizeof types / sizeof types[0]; ++k) {
    tensor mask, pos;
    make(&mask, types[k], 2, 5, m);
    make(&pos, SRT_I64, 2, 5, v);
    check(&pos.info, &mask.info, 2, 5, v, seg);
    check(NULL, &mask.info, 2, 5, arange, seg); // the default positions
  }
}

static void test_rows_of_one_rank(void **state) {
  (void)state; // rows 1 and 2 of 3 (a dp rank's share), packed
  const int64_t v[] = {0, 1, 2, 3, /**/ 0, 1, 0, 1, /**/ 7, 0, 1, 2};
  tensor pos;
  make(&pos, SRT_I64, 3, 4, v);
  int64_t p[8], g[8];
  srt_status st = train_documents("b", &pos.info, NULL, 3, 4, 512, 1, 2, p, g);
  assert_null(st);
  const int64_t want_pos[] = {0, 1, 0, 1, 7, 0, 1, 2}, want_seg[] = {0, 0, 1, 1, 0, 1, 1, 1};
  expect(p, want_pos, 8, "positions");
  expect(g, want_seg, 8, "segments");
}

static void test_refusals(void **state) {
  (void)state;
  const int64_t v[] = {0, 1, 2, 3, 0, 1, -1, 2};
  tensor pos;
  make(&pos, SRT_I64, 2, 4, v);
  // A negative position in row 1, refused even when only row 0 is read.
  refused(&pos.info, NULL, 2, 4, 512, 0, 1,
          (const char *[]){"batch.safetensors", "position_ids[1][2] = -1", "negative", NULL});
  const int64_t big[] = {0, 1, 2, 3, 0, 1, 2, 8};
  make(&pos, SRT_I64, 2, 4, big); // 8 >= max_position_embeddings 8
  refused(&pos.info, NULL, 2, 4, 8, 0, 2,
          (const char *[]){"position_ids[1][3] = 8", "max_position_embeddings 8", NULL});
  const int64_t ok[] = {0, 1, 2, 3, 0, 1, 2, 3};
  make(&pos, SRT_I32, 2, 4, ok); // positions must be I64
  refused(&pos.info, NULL, 2, 4, 512, 0, 2,
          (const char *[]){"'position_ids'", "I64 [2, 4]", "I32", NULL});
  make(&pos, SRT_I64, 2, 4, ok);
  refused(&pos.info, NULL, 2, 3, 512, 0, 2, // the program's seq is 3
          (const char *[]){"'position_ids'", "I64 [2, 3]", "[2, 4]", NULL});
  pos.info.rank = 1; // [8]
  pos.info.shape[0] = 8;
  pos.info.shape[1] = 0;
  refused(&pos.info, NULL, 2, 4, 512, 0, 2, (const char *[]){"got I64 [8]", NULL});
  const int64_t m[] = {1, 1, 1, 1, 0, 1, 2, 1};
  tensor mask;
  make(&mask, SRT_I64, 2, 4, m);
  refused(NULL, &mask.info, 2, 4, 512, 0, 2,
          (const char *[]){"attention_mask[1][2] = 2", "neither 0", NULL});
  make(&mask, SRT_BOOL, 2, 4, m); // a bool byte that is not 0 or 1
  refused(NULL, &mask.info, 2, 4, 512, 0, 2, (const char *[]){"attention_mask[1][2] = 2", NULL});
  make(&mask, SRT_I64, 2, 4, ok);
  mask.info.dtype = SRT_F32; // a float mask
  refused(NULL, &mask.info, 2, 4, 512, 0, 2, (const char *[]){"'attention_mask'", "F32", NULL});
  refused(NULL, NULL, 2, 4, 512, 1, 2, (const char *[]){"rows [1, 3)", "batch of 2", NULL});
}

static void test_labels_after_padding(void **state) {
  (void)state;
  // Row 0 left-padded, row 1 right-padded: a label may be scored after a
  // token (row 1, column 3: a padding token's own label) but not right
  // after padding, where the logits of a padding query would be scored.
  const int64_t m[] = {0, 0, 1, 1, 1, /**/ 1, 1, 1, 0, 0};
  const int64_t ok[] = {-100, -100, -100, 7, 8, /**/ 1, 2, 3, 4, -100};
  tensor mask, labels;
  make(&mask, SRT_BOOL, 2, 5, m);
  make(&labels, SRT_I64, 2, 5, ok);
  assert_null(train_documents_check_labels("b.safetensors", &labels.info, &mask.info, NULL));
  assert_null(train_documents_check_labels("b.safetensors", &labels.info, NULL, NULL));
  const int64_t first[] = {-100, -100, 5, 7, 8, /**/ 1, 2, 3, 4, -100};
  make(&labels, SRT_I64, 2, 5, first); // the first real token, scored from token 1
  srt_status st = train_documents_check_labels("b.safetensors", &labels.info, &mask.info, NULL);
  assert_non_null(st);
  assert_non_null(strstr(srt_status_message(st), "'b.safetensors': labels[0][2] = 5"));
  assert_non_null(strstr(srt_status_message(st), "token 1, padding"));
  srt_status_free(st);
  const int64_t tail[] = {-100, -100, -100, 7, 8, /**/ 1, 2, 3, 4, 9};
  make(&labels, SRT_I64, 2, 5, tail); // scored from the padding token at column 3
  st = train_documents_check_labels("b.safetensors", &labels.info, &mask.info, NULL);
  assert_non_null(st);
  assert_non_null(strstr(srt_status_message(st), "labels[1][4] = 9"));
  srt_status_free(st);
  // The same padding given as segment_ids -1: the same refusal.
  const int64_t sg[] = {-1, -1, 0, 0, 0, /**/ 0, 0, 0, -1, -1};
  tensor seg;
  make(&seg, SRT_I64, 2, 5, sg);
  st = train_documents_check_labels("b.safetensors", &labels.info, NULL, &seg.info);
  assert_non_null(st);
  assert_non_null(strstr(srt_status_message(st), "labels[1][4] = 9"));
  assert_non_null(strstr(srt_status_message(st), "token 3, padding (segment_ids -1)"));
  srt_status_free(st);
  make(&labels, SRT_I64, 2, 5, ok);
  assert_null(train_documents_check_labels("b.safetensors", &labels.info, NULL, &seg.info));
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_defaults),
      cmocka_unit_test(test_packed),
      cmocka_unit_test(test_split_and_odd_steps),
      cmocka_unit_test(test_mask_pads_and_stops_packing),
      cmocka_unit_test(test_rows_of_one_rank),
      cmocka_unit_test(test_refusals),
      cmocka_unit_test(test_labels_after_padding),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
