// Unit tests of the GPU datasheet table (shardrt/gpu_peak.h): the names
// CUDA reports for each form factor map to that form factor's dense bf16
// peak, names that contain a shorter model's name are not taken for it,
// and unknown GPUs get 0 (the backend then measures).
#include "runtime_test_util.h"

#include "shardrt/gpu_peak.h"

static void expect_peak(const char *name, double tflops, const char *label) {
  const char *matched = "unset";
  double flops = srt_gpu_datasheet_bf16_flops(name, &matched);
  assert_float_equal(flops, tflops * 1e12, 1e6);
  if (label)
    assert_string_equal(matched, label);
  else
    assert_null(matched);
}

static void test_form_factors(void **state) {
  (void)state;
  // cudaDeviceProp.name as the driver reports these GPUs.
  expect_peak("NVIDIA H100 80GB HBM3", 989.4, "H100 SXM");
  expect_peak("NVIDIA H100 PCIe", 756.5, "H100 PCIe");
  expect_peak("NVIDIA H100 NVL", 835.5, "H100 NVL");
  expect_peak("NVIDIA H200", 989.4, "H200 SXM");
  expect_peak("NVIDIA H200 NVL", 835.5, "H200 NVL");
  expect_peak("NVIDIA GH200 480GB", 989.4, "GH200");
  expect_peak("NVIDIA A100-SXM4-80GB", 312.0, "A100");
  expect_peak("NVIDIA A100 80GB PCIe", 312.0, "A100");
  expect_peak("NVIDIA B200", 2250.0, "B200");
  expect_peak("NVIDIA L40S", 362.05, "L40S");
  expect_peak("NVIDIA L4", 121.0, "L4");
  expect_peak("NVIDIA A10", 125.0, "A10");
}

static void test_unknown(void **state) {
  (void)state;
  // A prefix of a known name is not that GPU: A10G is not an A10, and no
  // pre-Ampere GPU (no bf16 tensor cores) is in the table.
  expect_peak("NVIDIA A10G", 0, NULL);
  expect_peak("Tesla V100-SXM2-16GB", 0, NULL);
  expect_peak("NVIDIA GeForce RTX 4090", 0, NULL);
  expect_peak("", 0, NULL);
  assert_float_equal(srt_gpu_datasheet_bf16_flops(NULL, NULL), 0, 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_form_factors),
      cmocka_unit_test(test_unknown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
