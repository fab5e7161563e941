// The driver's console: errors printed once (naming the rank when only
// some ranks failed), the outcome of collective writes, the last complete
// checkpoint when a collective times out, the threads line and --profile's
// table.
#include <limits.h>
#include <stdio.h>

#include "shardrt/collectives.h"
#include "shardrt/kernels.h"
#include "run.h"

// The last checkpoint this run completed (saved, or loaded to resume):
// what a job ended by a lost peer resumes from.
static char last_checkpoint[PATH_MAX];
static long long last_checkpoint_step = -1;

void train_note_checkpoint(const char *path, int64_t step) {
  snprintf(last_checkpoint, sizeof last_checkpoint, "%s", path);
  last_checkpoint_step = (long long)step;
}

// Ends the whole job after a collective timed out on `world_rank`.
static void end_job(int world_rank) {
  if (last_checkpoint_step >= 0)
    fprintf(stderr, "train: rank %d: the last complete checkpoint is '%s' (step %lld)\n",
            world_rank, last_checkpoint, last_checkpoint_step);
  else
    fprintf(stderr, "train: rank %d: no complete checkpoint of this run (none saved or "
            "loaded yet)\n", world_rank);
  fprintf(stderr, "train: rank %d: ending the job (a collective %s)\n", world_rank,
          train_plane_mesh() ? "timed out or lost its peer" : "timed out");
  fflush(stderr);
  train_plane_abort();
}

// Whether `s` means a peer is gone, so the whole job must end: a
// collective past its deadline (a peer stalled or dead will not take part
// in anything else, so no orderly shutdown can finish) or, over an env
// launch's TCP plane, a peer whose sockets closed (it died).
static bool ends_job(srt_status s) {
  srt_code code = srt_status_code(s);
  return code == SRT_DEADLINE_EXCEEDED || (code == SRT_UNAVAILABLE && train_plane_mesh());
}

// Prints `s` as "train: ..." (with the rank when given; -1: the message
// is the job's, printed by rank 0 alone) and frees it.
void train_report(srt_status s, int rank) {
  if (rank >= 0)
    fprintf(stderr, "train: rank %d: %s\n", rank, srt_status_message(s));
  else
    fprintf(stderr, "train: %s\n", srt_status_message(s));
  // End the whole job (every rank, exit status 1).
  if (ends_job(s)) {
    int world_rank = rank; // -1 above: the line that ends the job still names its rank
    if (world_rank < 0)
      world_rank = train_plane_rank();
    end_job(world_rank);
  }
  srt_status_free(s);
}

// The outcome of a collective write (every rank holds rank 0's): rank 0
// reports the error, or prints `done`. Returns 1 on error. A collective of
// the write past its deadline is each rank's own (the others' may have
// completed): every rank reports it, which ends the job. Freed silently on
// another rank it went on to MPI_Finalize and waited there for the lost
// peer (e2e/host_faults/down: a rank of the cut-off host stayed up until
// TCP gave up, 25 s after the cut).
int train_collective_outcome(srt_status s, int rank, const char *done) {
  if (s) {
    if (rank == 0)
      train_report(s, -1);
    else if (ends_job(s))
      train_report(s, rank);
    else
      srt_status_free(s);
    return 1;
  }
  if (rank == 0) {
    printf("%s\n", done);
    fflush(stdout);
  }
  return 0;
}

// Makes the ranks agree on a step that may fail on some of them only (files,
// checkpoints): returns 1 when any rank failed, after each failing rank
// printed its error (only rank 0's when rank 0 failed too, so an error that
// every rank hit is printed once).
int train_any_failed(srt_context *ctx, srt_status s) {
  srt_group *world = srt_context_group(ctx, SRT_GROUP_WORLD);
  int rank = srt_group_rank(world);
  int32_t mine = s != NULL, any = mine, root = mine;
  srt_status c = srt_all_reduce(world, &any, 1, SRT_I32, SRT_REDUCE_MAX);
  if (!c)
    c = srt_broadcast(world, &root, 1, SRT_I32, 0);
  if (c) { // communication itself failed: report both and stop
    if (s)
      train_report(s, rank);
    train_report(c, rank);
    return 1;
  }
  if (mine && (rank == 0 || !root))
    train_report(s, rank == 0 ? -1 : rank);
  else
    srt_status_free(s);
  return any != 0;
}

// The kernels' threads and, on the cpu backend, the GEMM library.
void train_print_threads(const train_threads *t, const srt_backend *backend) {
  printf("train: %d thread%s per rank (%d cores, %d rank%s on this node", t->threads,
         t->threads == 1 ? "" : "s", t->cores, t->local_ranks, t->local_ranks == 1 ? "" : "s");
  if (t->bound > 0 && t->bound < t->cores)
    printf(", bound to %d", t->bound);
  printf(t->from_env ? "; from OMP_NUM_THREADS)" : "; --threads N overrides)");
  if (backend->host) {
    char lib[128];
    srt_cpu_gemm_library(lib, sizeof lib);
    printf("; GEMM: %s", lib);
  }
  printf("\n");
  if (t->threads < t->asked)
    printf("train: note: %d thread%s asked, OpenMP grants %d%s: the kernels use %d\n", t->asked,
           t->asked == 1 ? "" : "s", t->threads,
           t->thread_limit < t->asked ? " (OMP_THREAD_LIMIT)" : "", t->threads);
  if (t->was_dynamic)
    printf("train: note: OMP_DYNAMIC turned off: the GEMMs need every team at its full "
           "size\n");
  if (t->had_no_level)
    printf("train: note: OMP_MAX_ACTIVE_LEVELS=0 raised to 1: every parallel region would "
           "run on one thread\n");
  int usable = t->bound > 0 ? t->bound : t->cores;
  if (t->threads > usable)
    printf("train: note: %d threads per rank on %d CPU%s it may use: they will take turns "
           "(slower); see --threads\n",
           t->threads, usable, usable == 1 ? "" : "s");
}

// --profile: rank 0's seconds per step by op kind; "other" is the step's
// time outside the runtime ops (the generated code, the driver's batch).
void train_print_profile(const srt_profile *p, bool warm_up_left_out) {
  if (p->steps == 0)
    return;
  double steps = (double)p->steps, total = p->step_seconds / steps, ops = 0.0;
  printf("profile: rank 0, %lld step%s (%s), %.3f ms per step\n", (long long)p->steps,
         p->steps == 1 ? "" : "s",
         warm_up_left_out ? "the first, warm-up step left out" : "the only step run",
         total * 1e3);
  printf("profile: %-12s %10s %7s %12s\n", "kind", "ms/step", "share", "calls/step");
  for (int k = 0; k < SRT_OP_KIND_COUNT; k++) {
    double sec = p->seconds[k] / steps;
    ops += sec;
    printf("profile: %-12s %10.3f %6.1f%% %12.1f\n", srt_op_kind_name((srt_op_kind)k),
           sec * 1e3, total > 0 ? 100.0 * sec / total : 0.0, (double)p->calls[k] / steps);
  }
  printf("profile: %-12s %10.3f %6.1f%%\n", "other", (total - ops) * 1e3,
         total > 0 ? 100.0 * (total - ops) / total : 0.0);
}
