// Host waits on the cuda backend's streams under the collective deadline
// (device.h: srt_cuda_wait). The MPI collectives of the CPU path poll
// non-blocking requests against the same deadline (src/collectives.c); on
// the GPU the collectives are NCCL kernels, so a stalled peer shows as a
// stream that never drains: the wait polls it, and on the deadline aborts
// the communicators so that those kernels end and the rank can exit. The
// deadline bounds each host wait, which includes the compute queued before
// it (a whole step, at the step's read-back): --timeout must exceed a
// step's time, as it does by far at its default of 600 s.
#include <stdio.h>
#include <time.h>

#include "device.h"

static double now_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

// Aborts every communicator (they cannot be used after a timeout or an
// asynchronous error) and marks them gone, so close does not destroy them.
static void abort_comms(srt_cuda_device *d) {
  for (int i = 0; i < SRT_CUDA_NUM_COMMS; ++i)
    if (d->has_comms[i]) {
      ncclCommAbort(d->comms[i]);
      d->has_comms[i] = false;
      d->comms[i] = NULL;
    }
}

// The first asynchronous NCCL error of any communicator, as a status.
static srt_status async_error(srt_cuda_device *d, const char *what) {
  static const char *const axes[SRT_CUDA_NUM_COMMS] = {"dp", "tp", "cp"};
  for (int i = 0; i < SRT_CUDA_NUM_COMMS; ++i) {
    ncclResult_t r = ncclSuccess;
    if (!d->has_comms[i] || ncclCommGetAsyncError(d->comms[i], &r) != ncclSuccess ||
        r == ncclSuccess || r == ncclInProgress)
      continue;
    const char *op = d->last_collective[i];
    srt_status s = SRT_ERROR(SRT_UNAVAILABLE,
                             "cuda backend: NCCL failed on mesh axis %s at step %lld during "
                             "%s (last collective there: %s): %s",
                             axes[i], (long long)srt_context_step(d->ctx), what,
                             op ? op : "none", ncclGetErrorString(r));
    abort_comms(d);
    return s;
  }
  return NULL;
}

static srt_status timed_out(srt_cuda_device *d, const char *what, double waited) {
  const char *dp = d->last_collective[0], *tp = d->last_collective[1];
  const char *cp = d->last_collective[SRT_CUDA_COMM_CP];
  srt_status s = SRT_ERROR(
      SRT_DEADLINE_EXCEEDED,
      "cuda backend: %s at step %lld did not complete within the %g s collective timeout "
      "(waited %.1f s; last collectives enqueued: dp %s, tp %s%s%s): a peer rank stalled or "
      "died; the NCCL communicators were aborted",
      what, (long long)srt_context_step(d->ctx), srt_context_timeout(d->ctx), waited,
      dp ? dp : "none", tp ? tp : "none", d->has_comms[SRT_CUDA_COMM_CP] ? ", cp " : "",
      d->has_comms[SRT_CUDA_COMM_CP] ? (cp ? cp : "none") : "");
  abort_comms(d);
  return s;
}

srt_status srt_cuda_wait(srt_cuda_device *d, cudaStream_t stream, const char *what) {
  double timeout = srt_context_timeout(d->ctx), start = now_s();
  long nap_ns = 0;
  for (unsigned polls = 1;; ++polls) {
    cudaError_t e = cudaStreamQuery(stream);
    if (e == cudaSuccess)
      return NULL;
    if (e != cudaErrorNotReady) {
      // The device is unusable: peers waiting in a collective with this
      // rank must not be waited for either.
      abort_comms(d);
      return SRT_ERROR(SRT_UNAVAILABLE, "cuda backend: %s at step %lld failed on the device: "
                       "%s (%s)", what, (long long)srt_context_step(d->ctx),
                       cudaGetErrorName(e), cudaGetErrorString(e));
    }
    if (!nap_ns && polls % 256)
      continue; // spinning: look at the clock and NCCL now and then
    SRT_RETURN_IF_ERROR(async_error(d, what));
    double waited = now_s() - start;
    if (timeout > 0 && waited > timeout)
      return timed_out(d, what, waited);
    if (waited < 0.02)
      continue;
    nap_ns = nap_ns ? (nap_ns * 2 < 1000000 ? nap_ns * 2 : 1000000) : 10000;
    struct timespec nap = {0, nap_ns};
    nanosleep(&nap, NULL);
  }
}
