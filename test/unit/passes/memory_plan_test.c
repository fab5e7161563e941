// Unit tests of the static memory planner (passes/memory_plan.c): buffer
// alignment, the persistent region below every temporary, reuse of dead
// buffers, first fit into holes, inclusive liveness, and on random
// programs that no two buffers live at one op overlap (checked against a
// brute-force scan of every op index).
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdlib.h>

#include "memory_plan.h"

static void test_alignment(void **state) {
  (void)state;
  assert_int_equal(tp_align(0), 0);
  assert_int_equal(tp_align(1), TP_BUFFER_ALIGN);
  assert_int_equal(tp_align(TP_BUFFER_ALIGN), TP_BUFFER_ALIGN);
  assert_int_equal(tp_align(TP_BUFFER_ALIGN + 1), 2 * TP_BUFFER_ALIGN);
}

static void test_empty_program_needs_the_persistent_region_only(void **state) {
  (void)state;
  assert_int_equal(tp_plan_memory(NULL, 0, 4096), 4096);
}

static void test_dead_buffers_are_reused(void **state) {
  (void)state;
  // a dies at op 1, b is defined at op 2: b takes a's place.
  tp_interval v[2] = {{0, 1, 100, 0}, {2, 3, 100, 0}};
  int64_t arena = tp_plan_memory(v, 2, 1024);
  assert_int_equal(v[0].offset, 1024);
  assert_int_equal(v[1].offset, 1024);
  assert_int_equal(arena, 1024 + 128);
}

static void test_liveness_is_inclusive(void **state) {
  (void)state;
  // a's last use is b's definition (b = f(a)): both live at op 1.
  tp_interval v[2] = {{0, 1, 64, 0}, {1, 2, 64, 0}};
  int64_t arena = tp_plan_memory(v, 2, 0);
  assert_int_equal(v[0].offset, 0);
  assert_int_equal(v[1].offset, 64);
  assert_int_equal(arena, 128);
}

static void test_first_fit_fills_a_hole(void **state) {
  (void)state;
  // a, b, c live together; b dies; d (64 bytes) fits b's hole, e (128) does not.
  tp_interval v[5] = {{0, 5, 64, 0}, {0, 1, 64, 0}, {0, 5, 64, 0}, {2, 5, 64, 0}, {2, 5, 128, 0}};
  int64_t arena = tp_plan_memory(v, 5, 0);
  assert_int_equal(v[0].offset, 0);
  assert_int_equal(v[1].offset, 64);
  assert_int_equal(v[2].offset, 128);
  assert_int_equal(v[3].offset, 64);
  assert_int_equal(v[4].offset, 192);
  assert_int_equal(arena, 320);
}

static void test_zero_byte_values_get_a_slot(void **state) {
  (void)state;
  // A scalar of no elements still needs a distinct address while live.
  tp_interval v[2] = {{0, 1, 0, 0}, {0, 1, 4, 0}};
  tp_plan_memory(v, 2, 0);
  assert_int_not_equal(v[0].offset, v[1].offset);
}

static uint64_t next(uint64_t *s) { // xorshift64*
  *s ^= *s >> 12, *s ^= *s << 25, *s ^= *s >> 27;
  return *s * 2685821657736338717ull;
}

static void test_random_programs_never_overlap_live_buffers(void **state) {
  (void)state;
  enum { kPrograms = 200, kValues = 60, kOps = 40 };
  uint64_t seed = 0x9E3779B97F4A7C15ull;
  for (int prog = 0; prog < kPrograms; ++prog) {
    tp_interval v[kValues];
    for (int i = 0; i < kValues; ++i) {
      int64_t first = (int64_t)(next(&seed) % kOps);
      int64_t len = (int64_t)(next(&seed) % 10);
      v[i] = (tp_interval){first, first + len, (int64_t)(next(&seed) % 5000), -1};
    }
    int64_t base = 64 * (int64_t)(next(&seed) % 100);
    int64_t arena = tp_plan_memory(v, kValues, base);
    int64_t peak_live = 0;
    for (int64_t op = 0; op < kOps + 10; ++op) {
      int64_t live = 0;
      for (int i = 0; i < kValues; ++i) {
        if (v[i].first > op || v[i].last < op)
          continue;
        live += tp_align(v[i].bytes > 0 ? v[i].bytes : 1);
        for (int j = i + 1; j < kValues; ++j) {
          if (v[j].first > op || v[j].last < op)
            continue;
          int64_t ei = v[i].offset + tp_align(v[i].bytes > 0 ? v[i].bytes : 1);
          int64_t ej = v[j].offset + tp_align(v[j].bytes > 0 ? v[j].bytes : 1);
          assert_true(ei <= v[j].offset || ej <= v[i].offset);
        }
      }
      peak_live = live > peak_live ? live : peak_live;
    }
    for (int i = 0; i < kValues; ++i) {
      assert_true(v[i].offset >= base);
      assert_int_equal(v[i].offset % TP_BUFFER_ALIGN, base % TP_BUFFER_ALIGN);
      assert_true(v[i].offset + v[i].bytes <= arena);
    }
    // No plan can use less than the most bytes live at once.
    assert_true(arena - base >= peak_live);
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_alignment),
      cmocka_unit_test(test_empty_program_needs_the_persistent_region_only),
      cmocka_unit_test(test_dead_buffers_are_reused),
      cmocka_unit_test(test_liveness_is_inclusive),
      cmocka_unit_test(test_first_fit_fills_a_hole),
      cmocka_unit_test(test_zero_byte_values_get_a_slot),
      cmocka_unit_test(test_random_programs_never_overlap_live_buffers),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
