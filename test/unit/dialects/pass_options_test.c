// Unit tests of pass option parsing (passes/pass.c) and pipeline splitting
// (tools/common/pipeline.c): the parts of shard-opt's pipeline handling that
// MLIR does not do for us.
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <string.h>

#include "pass.h"
#include "pipeline.h"

typedef struct collected {
  char items[8][64];
  int n;
} collected;

static bool collect(const char *elem, size_t len, void *data) {
  collected *c = data;
  snprintf(c->items[c->n++], 64, "%.*s", (int)len, elem);
  return c->n < 8;
}

static void test_split_respects_nesting(void **state) {
  (void)state;
  collected c = {0};
  const char *text = " a , func.func(b{x=1 y=\"p,q\"}, c), d{z=(1,2)} ";
  assert_true(tool_pipeline_split(text, strlen(text), collect, &c));
  assert_int_equal(c.n, 3);
  assert_string_equal(c.items[0], "a");
  assert_string_equal(c.items[1], "func.func(b{x=1 y=\"p,q\"}, c)");
  assert_string_equal(c.items[2], "d{z=(1,2)}");
}

static void test_split_rejects_unbalanced(void **state) {
  (void)state;
  collected c = {0};
  assert_false(tool_pipeline_split("a(b", 3, collect, &c));
  c.n = 0;
  assert_false(tool_pipeline_split("a)b(", 4, collect, &c));
}

static void test_lookup(void **state) {
  (void)state;
  assert_ptr_equal(tp_pass_lookup("nn-verify", 9), &tp_nn_verify_pass);
  assert_null(tp_pass_lookup("nn-verif", 8));
  assert_null(tp_pass_lookup("nn-verify-x", 11));
}

static void test_unknown_option_names_it(void **state) {
  (void)state;
  char err[256] = "";
  MlirPass p = tp_pass_create(&tp_nn_verify_pass, "bogus=3", err, sizeof err);
  assert_null(p.ptr);
  assert_non_null(strstr(err, "nn-verify"));
  assert_non_null(strstr(err, "'bogus'"));
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_split_respects_nesting),
      cmocka_unit_test(test_split_rejects_unbalanced),
      cmocka_unit_test(test_lookup),
      cmocka_unit_test(test_unknown_option_names_it),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
