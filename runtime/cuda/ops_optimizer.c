// The optimizer op of a cuda step (shardrt/cuda.h): the gradient norm in
// one pass over every gradient (srt_get_grad_norm's counting: a gradient
// replicated on an axis is added on that axis's rank 0 only), summed in
// fp64 over dp then tp with NCCL (max for the inf-norm; NaN travels as a
// flag), clipping by total norm (NeMo-RL's clip_grad_by_total_norm_:
// coef = max / (norm + 1e-6), applied when < 1) folded into one AdamW
// launch over every parameter, which also refreshes the bf16 compute
// copies. The only host synchronisation of the step: the loss, the norm
// and the bad-label record are read back here. With --cpu-offload the
// gradients come back with them and AdamW runs on the host (offload.h).
#include <math.h>

#include "offload.h"
#include "ops_internal.h"

// The value (sum or max) and the NaN flag (max) of the pair over one axis.
static srt_status reduce_pair(srt_cuda_device *d, int axis, bool is_inf) {
  if (!d->has_comms[axis])
    return SRT_ERROR(SRT_UNAVAILABLE, "cuda backend: the grad norm's all-reduce: the NCCL "
                     "communicators were aborted after an earlier failure");
  d->last_collective[axis] = "the grad norm's all-reduce";
  SRT_NCCL_CHECK(ncclAllReduce(d->norm_acc, d->norm_acc, 1, ncclFloat64,
                               is_inf ? ncclMax : ncclSum, d->comms[axis], d->comm));
  SRT_NCCL_CHECK(ncclAllReduce(d->norm_acc + 1, d->norm_acc + 1, 1, ncclFloat64, ncclMax,
                               d->comms[axis], d->comm));
  return NULL;
}

// Reduces the [value, nan flag] pair over the dp, then the tp
// communicator, in place on the device.
static srt_status reduce_norm(srt_cuda_device *d, bool is_inf) {
  SRT_RETURN_IF_ERROR(srt_cuda_comm_begin(d));
  for (int axis = 0; axis < SRT_MESH_NDIMS; ++axis)
    SRT_NCCL_GROUP(reduce_pair(d, axis, is_inf));
  return srt_cuda_comm_end(d);
}

srt_status srt_cuda_op_optimizer_step(srt_exec *e, const srt_program *program,
                                      const srt_step_options *options, int64_t loss_offset,
                                      srt_step_result *result) {
  const char *op = "srt_cuda_op_optimizer_step";
  srt_cuda_device *d;
  SRT_RETURN_IF_ERROR(srt_cuda_device_of(e, op, &d));
  if (!program || !options || !result)
    return SRT_ERROR(SRT_INVALID_ARGUMENT, "%s: program, options or result is NULL", op);
  if (options->step < 1)
    return SRT_ERROR(SRT_INVALID_ARGUMENT, "%s: AdamW step %lld must be >= 1", op,
                     (long long)options->step);
  if (options->accumulate) // shard-compile refuses --micro-batch for cuda
    return SRT_ERROR(SRT_FAILED_PRECONDITION,
                     "%s: gradient accumulation is not available on the cuda backend yet",
                     op);
  if (options->forward_only) { // an evaluation: the loss, nothing changed
    float loss;
    SRT_CUDA_CHECK(cudaMemcpyAsync(&loss, cu_f32(e, loss_offset), sizeof loss,
                                   cudaMemcpyDeviceToHost, d->compute));
    SRT_RETURN_IF_ERROR(srt_cuda_wait(d, d->compute, "the evaluation's read-back (loss)"));
    *result = (srt_step_result){.loss = loss};
    return NULL;
  }
  double p = options->norm_type;
  if (!(p > 0))
    return SRT_ERROR(SRT_INVALID_ARGUMENT, "%s: norm_type %g must be > 0 or inf", op, p);
  bool is_inf = isinf(p);
  SRT_RETURN_IF_ERROR(CU_LAUNCH(srt_cuda_grad_norm_partial(d->norm_acc, d->slots, d->num_slots,
                                                           d->total_numel, p, d->norm_partials,
                                                           d->compute)));
  SRT_RETURN_IF_ERROR(reduce_norm(d, is_inf));
  // With offload the gradients travel with the read-back (wasted on a
  // skipped step, which is rare).
  if (d->offload)
    SRT_RETURN_IF_ERROR(srt_cuda_offload_copy(d, program, SRT_OFFLOAD_GRADS_TO_HOST));
  // One read-back: [norm value, nan flag, bad row + 1, bad label] and the loss.
  double acc[2];
  int64_t bad[2];
  float loss;
  SRT_CUDA_CHECK(cudaMemcpyAsync(acc, d->norm_acc, sizeof acc, cudaMemcpyDeviceToHost,
                                 d->compute));
  SRT_CUDA_CHECK(cudaMemcpyAsync(bad, d->bad_label, sizeof bad, cudaMemcpyDeviceToHost,
                                 d->compute));
  SRT_CUDA_CHECK(cudaMemcpyAsync(&loss, cu_f32(e, loss_offset), sizeof loss,
                                 cudaMemcpyDeviceToHost, d->compute));
  SRT_RETURN_IF_ERROR(srt_cuda_wait(d, d->compute, "the step's read-back (loss, grad norm)"));
  if (bad[0]) {
    SRT_CUDA_CHECK(cudaMemsetAsync(d->bad_label, 0, 2 * sizeof(int64_t), d->compute));
    return SRT_ERROR(SRT_OUT_OF_RANGE,
                     "%s: label %lld of row %lld lies outside the vocabulary and is not "
                     "ignore_index",
                     op, (long long)bad[1], (long long)(bad[0] - 1));
  }
  double norm = acc[1] != 0 ? NAN : is_inf ? acc[0] : pow(acc[0], 1.0 / p);
  result->loss = loss;
  result->grad_norm = norm;
  result->skipped = !isfinite(norm);
  if (result->skipped)
    return NULL;
  double coef = options->max_grad_norm > 0 ? options->max_grad_norm / (norm + 1e-6) : 1.0;
  srt_cuda_adamw_args a = {.step = options->step,
                           .lr = options->lr,
                           .beta1 = options->beta1,
                           .beta2 = options->beta2,
                           .eps = options->eps,
                           .weight_decay = options->weight_decay,
                           .clip_coef = coef < 1.0 ? (float)coef : 1.0f};
  if (d->offload) { // AdamW on the host, the new bf16 weights back
    SRT_RETURN_IF_ERROR(srt_cuda_offload_step(program, d->host, options, a.clip_coef));
    return srt_cuda_offload_copy(d, program, SRT_OFFLOAD_COPIES_TO_DEVICE);
  }
  return CU_LAUNCH(srt_cuda_adamw(d->slots, d->num_slots, d->total_numel, a, d->compute));
}
