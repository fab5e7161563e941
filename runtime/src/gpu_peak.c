// Dense bf16 tensor-core peaks from NVIDIA's datasheets, by device name.
#include "shardrt/gpu_peak.h"

#include <ctype.h>
#include <stddef.h>
#include <string.h>

typedef struct gpu_peak {
  const char *needle; // a substring of cudaDeviceProp.name
  const char *label;
  double tflops; // dense bf16
} gpu_peak;

// Most specific first: the first entry whose needle the name contains wins.
// The form factors differ in clocks and power, so in peak: H100 SXM 989.4,
// H100 PCIe 756.5, H100 NVL 835.5 (datasheets: 1979 / 1513 / 1671 with
// sparsity). Pre-Ampere GPUs have no bf16 tensor cores and are left out.
static const gpu_peak table[] = {
    {"GB200", "GB200", 2500.0},      {"B200", "B200", 2250.0},
    {"B100", "B100", 1750.0},        {"GH200", "GH200", 989.4},
    {"H200 NVL", "H200 NVL", 835.5}, {"H200", "H200 SXM", 989.4},
    {"H100 NVL", "H100 NVL", 835.5}, {"H100 PCIe", "H100 PCIe", 756.5},
    {"H100", "H100 SXM", 989.4},     {"H800 PCIe", "H800 PCIe", 756.5},
    {"H800", "H800 SXM", 989.4},     {"A100", "A100", 312.0},
    {"A800", "A800", 312.0},         {"L40S", "L40S", 362.05},
    {"L40", "L40", 181.05},          {"L4", "L4", 121.0},
    {"A10", "A10", 125.0},
};

double srt_gpu_datasheet_bf16_flops(const char *device_name, const char **matched) {
  if (matched)
    *matched = NULL;
  for (size_t i = 0; device_name && i < sizeof table / sizeof table[0]; ++i) {
    const char *at = strstr(device_name, table[i].needle);
    // "L4" must not match inside "L40", nor "A10" inside "A100" or "A10G":
    // the character after the needle may not continue the model's name.
    if (!at || isalnum((unsigned char)at[strlen(table[i].needle)]))
      continue;
    if (matched)
      *matched = table[i].label;
    return table[i].tflops * 1e12;
  }
  return 0;
}
