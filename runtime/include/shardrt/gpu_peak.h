// The dense bf16 tensor-core peak of a GPU from its name: the denominator of
// MFU on a device backend (the convention of torchtitan, Megatron and PaLM's
// MFU: model FLOP/s over the datasheet's dense peak, not the measured one).
#ifndef SHARDRT_GPU_PEAK_H
#define SHARDRT_GPU_PEAK_H

/// The datasheet's dense (not 2:4 sparse) bf16 tensor-core peak, in FLOP/s,
/// of the GPU that CUDA names `device_name` (cudaDeviceProp.name, e.g.
/// "NVIDIA H100 80GB HBM3", "NVIDIA H200", "NVIDIA A100-SXM4-80GB").
/// Figures are NVIDIA's published datasheets (the sparse figure halved where
/// only that is given); a name is matched by the most specific entry it
/// contains (case-sensitive), so "H100 PCIe" and "H100 NVL" are told apart
/// from the SXM "H100". Returns 0 for a GPU not in the table (the caller
/// measures instead); `matched`, when not NULL, receives the entry's label
/// (e.g. "H100 SXM") or NULL.
double srt_gpu_datasheet_bf16_flops(const char *device_name, const char **matched);

#endif // SHARDRT_GPU_PEAK_H
