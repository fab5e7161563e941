// Unit tests of srt_status: the annotation helper that adds an error's
// context (the rank, the group) once, keeping the site that raised it.
#include "runtime_test_util.h"

#include <string.h>

#include "shardrt/status.h"

static void test_annotate_appends_context_keeps_site(void **state) {
  (void)state;
  srt_status s = srt_status_make(SRT_OUT_OF_RANGE, "site.c", 7, "op: size %d", 3);
  s = srt_status_annotate(s, 2, "rank %d", 2);
  assert_string_equal(srt_status_message(s), "op: size 3 (rank 2)");
  assert_int_equal(srt_status_code(s), SRT_OUT_OF_RANGE);
  assert_int_equal(srt_status_rank(s), 2);
  char buf[128];
  assert_string_equal(srt_status_format(s, buf, sizeof buf),
                      "site.c:7: OUT_OF_RANGE: op: size 3 (rank 2)");
  srt_status_free(s);
}

// A status names one rank: a second rank context (an outer caller's) is not
// added when a deeper one already named it; a context without a rank is.
static void test_annotate_names_rank_once(void **state) {
  (void)state;
  srt_status s = srt_status_make(SRT_UNAVAILABLE, "c.c", 1, "all_reduce: failed");
  assert_int_equal(srt_status_rank(s), -1);
  s = srt_status_annotate(s, 1, "on group '%s', world rank %d", "tp", 1);
  s = srt_status_annotate(s, 1, "rank %d", 1);
  assert_string_equal(srt_status_message(s), "all_reduce: failed (on group 'tp', world rank 1)");
  s = srt_status_annotate(s, -1, "step %d", 4);
  assert_string_equal(srt_status_message(s),
                      "all_reduce: failed (on group 'tp', world rank 1) (step 4)");
  assert_int_equal(srt_status_rank(s), 1);
  srt_status_free(s);
}

static void test_annotate_ok_is_ok(void **state) {
  (void)state;
  assert_null(srt_status_annotate(NULL, 0, "rank %d", 0));
  assert_int_equal(srt_status_rank(NULL), -1);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_annotate_appends_context_keeps_site),
      cmocka_unit_test(test_annotate_names_rank_once),
      cmocka_unit_test(test_annotate_ok_is_ok),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
