// The training driver's main: `mpirun -np N ./train --data TOKENS --steps K
// --lr F --max-grad-norm F ...` around a compiled step (`shard_program`).
// Creates the context (world = dp x tp), allocates the arena once,
// initialises or loads the weights, feeds each step its deterministic batch
// (or the one of --batch-file), logs one line per step from rank 0, saves
// checkpoints atomically and, with --dump, writes what the last step
// computed.
// Errors are printed once, naming the rank when only some ranks failed, and
// every rank exits with status 1 (no rank is left waiting in a collective).
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <time.h>

#include "shardrt/collectives.h"
#include "shardrt/tensor.h"
#include "shardrt/tokens.h"
#include "shardrt/kernels.h"
#include "shardrt/output.h"
#include "shardrt/profile.h"
#include "train_internal.h"

static double now_seconds(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

// Prints `s` as "train: ..." (with the rank when given; -1: the message
// is the job's, printed by rank 0 alone) and frees it.
static void report(srt_status s, int rank) {
  if (rank >= 0)
    fprintf(stderr, "train: rank %d: %s\n", rank, srt_status_message(s));
  else
    fprintf(stderr, "train: %s\n", srt_status_message(s));
  // A collective past its deadline: a peer is stalled or dead and will not
  // take part in anything else, so no orderly shutdown can finish. End the
  // whole job (every rank, exit status 1).
  if (srt_status_code(s) == SRT_DEADLINE_EXCEEDED) {
    int world_rank = rank; // -1 above: the line that ends the job still names its rank
    if (world_rank < 0)
      MPI_Comm_rank(MPI_COMM_WORLD, &world_rank);
    fprintf(stderr, "train: rank %d: ending the job (a collective timed out)\n", world_rank);
    fflush(stderr);
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  srt_status_free(s);
}

// The outcome of a collective write (every rank holds rank 0's): rank 0
// reports the error, or prints `done`. Returns 1 on error.
static int collective_outcome(srt_status s, int rank, const char *done) {
  if (s) {
    if (rank == 0)
      report(s, -1);
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
static int any_failed(srt_context *ctx, srt_status s) {
  srt_group *world = srt_context_group(ctx, SRT_GROUP_WORLD);
  int rank = srt_group_rank(world);
  int32_t mine = s != NULL, any = mine, root = mine;
  srt_status c = srt_all_reduce(world, &any, 1, SRT_I32, SRT_REDUCE_MAX);
  if (!c)
    c = srt_broadcast(world, &root, 1, SRT_I32, 0);
  if (c) { // communication itself failed: report both and stop
    if (s)
      report(s, rank);
    report(c, rank);
    return 1;
  }
  if (mine && (rank == 0 || !root))
    report(s, rank == 0 ? -1 : rank);
  else
    srt_status_free(s);
  return any != 0;
}

// Checks that the program fits this runtime and mesh: ABI, shapes, offsets.
static srt_status check_program(const srt_program *p, const srt_mesh *mesh) {
  if (p->abi != SRT_PROGRAM_ABI)
    return SRT_ERROR(SRT_FAILED_PRECONDITION,
                     "program was compiled for runtime ABI %d, this driver is ABI %d: "
                     "recompile with this shard-compile",
                     (int)p->abi, SRT_PROGRAM_ABI);
  if (p->batch <= 0 || p->seq <= 0 || p->grad_accum_steps < 1 ||
      p->local_batch * p->dp * p->grad_accum_steps != p->batch || p->vocab <= 0 ||
      p->arena_bytes <= 0 || p->persistent_bytes > p->arena_bytes || !p->step)
    return SRT_ERROR(SRT_INVALID_ARGUMENT,
                     "program: inconsistent header (batch %lld, local batch %lld, dp %lld, "
                     "micro-batches %d, seq %lld, vocab %lld, arena %lld bytes, persistent "
                     "%lld bytes)",
                     (long long)p->batch, (long long)p->local_batch, (long long)p->dp,
                     (int)p->grad_accum_steps,
                     (long long)p->seq, (long long)p->vocab, (long long)p->arena_bytes,
                     (long long)p->persistent_bytes);
  if (p->offload_bytes < 0 || p->offload_bytes > p->persistent_bytes ||
      (p->offload_bytes > 0 && !p->backend))
    return SRT_ERROR(SRT_INVALID_ARGUMENT,
                     "program: host-only prefix of %lld bytes (--cpu-offload) does not fit a "
                     "persistent region of %lld bytes on the %s backend",
                     (long long)p->offload_bytes, (long long)p->persistent_bytes,
                     p->backend ? p->backend->name : "cpu");
  // The driver writes input ids and labels each step into its host arena:
  // anywhere in the cpu backend's (the arena itself); on a device backend in
  // the persistent region the host copies over, after a host-only prefix.
  const int64_t inputs[2] = {p->input_ids_offset, p->labels_offset};
  int64_t in_lo = p->offload_bytes, in_hi = p->backend ? p->persistent_bytes : p->arena_bytes;
  for (int i = 0; i < 2; ++i)
    if (inputs[i] < in_lo || inputs[i] + p->local_batch * p->seq * 8 > in_hi)
      return SRT_ERROR(SRT_INVALID_ARGUMENT,
                       "program: %s [%lld, %lld) lies outside [%lld, %lld), where the driver "
                       "can write them",
                       i ? "labels" : "input ids", (long long)inputs[i],
                       (long long)(inputs[i] + p->local_batch * p->seq * 8), (long long)in_lo,
                       (long long)in_hi);
  for (int32_t k = 0; k < p->num_params; ++k) {
    const srt_param_info *pi = &p->params[k];
    int64_t local[SRT_MAX_RANK];
    SRT_RETURN_IF_ERROR(
        srt_local_shape(pi->name, pi->rank, pi->global_shape, pi->placement, mesh, local));
    for (int d = 0; d < pi->rank; ++d)
      if (local[d] != pi->local_shape[d])
        return SRT_ERROR(SRT_INVALID_ARGUMENT,
                         "program: parameter '%s' dim %d has local size %lld, but its "
                         "placements on a %dx%d mesh give %lld",
                         pi->name, d, (long long)pi->local_shape[d], mesh->shape[0],
                         mesh->shape[1], (long long)local[d]);
    int64_t bytes = srt_shape_numel(pi->rank, pi->local_shape) * 4;
    const int64_t offs[5] = {pi->offset, pi->grad_offset, pi->m_offset, pi->v_offset,
                             pi->compute_offset};
    for (int i = 0; i < (p->backend ? 5 : 4); ++i) { // the bf16 copy: half the bytes
      // With --cpu-offload the weights and moments lie in the host-only
      // prefix, the gradient and bf16 copy (what the device reads) after it.
      bool on_host = i == 0 || i == 2 || i == 3;
      int64_t lo = p->offload_bytes && !on_host ? p->offload_bytes : 0;
      int64_t hi = p->offload_bytes && on_host ? p->offload_bytes : p->persistent_bytes;
      int64_t end = offs[i] + (i == 4 ? bytes / 2 : bytes);
      if (offs[i] < lo || end > hi)
        return SRT_ERROR(SRT_INVALID_ARGUMENT,
                         "program: parameter '%s' buffer %d [%lld, %lld) lies outside its "
                         "region [%lld, %lld) of the persistent region",
                         pi->name, i, (long long)offs[i], (long long)end, (long long)lo,
                         (long long)hi);
    }
  }
  return NULL;
}

// `path` names a file that can be created or replaced: its directory (that
// of the file a symbolic link resolves to) exists and is writable, and it
// is not itself a directory; or a writable character device (/dev/null),
// which is written in place and needs no folder.
static srt_status check_writable(const char *path, const char *flag) {
  struct stat st;
  if (!*path)
    return SRT_ERROR(SRT_INVALID_ARGUMENT, "%s: empty path", flag);
  bool exists = stat(path, &st) == 0;
  if (exists && S_ISDIR(st.st_mode))
    return SRT_ERROR(SRT_INVALID_ARGUMENT, "%s '%s' is a directory, not a file", flag, path);
  if (exists && S_ISCHR(st.st_mode) && access(path, W_OK) == 0) // /dev/null: in place
    return NULL;
  char dir[4096], *dest; // the temporary goes beside the file a link resolves to
  SRT_RETURN_IF_ERROR(srt_output_destination(flag, path, &dest));
  snprintf(dir, sizeof dir, "%s", dest);
  free(dest);
  char *slash = strrchr(dir, '/');
  if (!slash)
    snprintf(dir, sizeof dir, ".");
  else if (slash == dir)
    dir[1] = '\0';
  else
    *slash = '\0';
  if (access(dir, W_OK) != 0)
    return SRT_ERROR(SRT_IO, "%s '%s': directory '%s' is missing or not writable", flag, path,
                     dir);
  return NULL;
}

// The kernels' threads and, on the cpu backend, the GEMM library.
static void print_threads(const train_threads *t, const srt_backend *backend) {
  printf("train: %d thread%s per rank (%d cores, %d rank%s on this node", t->threads,
         t->threads == 1 ? "" : "s", t->cores, t->local_ranks, t->local_ranks == 1 ? "" : "s");
  if (t->bound > 0 && t->bound < t->cores)
    printf(", bound to %d", t->bound);
  printf(t->from_env ? "; from OMP_NUM_THREADS)" : "; --threads N overrides)");
  if (!backend) {
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
static void print_profile(const srt_profile *p, bool warm_up_left_out) {
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

int main(int argc, char **argv) {
  const srt_program *p = &shard_program;
  MPI_Init(&argc, &argv);
  int world_rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &world_rank);
  train_options o;
  bool help = false;
  for (int i = 1; i < argc; ++i)
    help |= !strcmp(argv[i], "--help") || !strcmp(argv[i], "-h");
  srt_status s = help ? NULL : train_parse_options(argc, argv, &o);
  // Before anything else: every rank runs the same program with the same
  // options (an MPMD launch or per-rank flags may differ), so that errors
  // below are alike everywhere and no collective gets buffers of other sizes.
  if (train_agree(p, s || help ? NULL : &o,
                  help ? "--help" : s ? srt_status_message(s) : "parsed")) {
    srt_status_free(s);
    MPI_Finalize();
    return 1;
  }
  if (help) {
    if (world_rank == 0)
      printf("%s", train_usage());
    MPI_Finalize();
    return 0;
  }
  if (s) { // identical on every rank: print once
    if (world_rank == 0)
      fprintf(stderr, "train: %s\n%s", srt_status_message(s), train_usage());
    srt_status_free(s);
    MPI_Finalize();
    return 1;
  }
  if (p->abi != SRT_PROGRAM_ABI) {
    if (world_rank == 0)
      report(check_program(p, NULL), -1);
    MPI_Finalize();
    return 1;
  }
  srt_context_options co = srt_context_default_options();
  co.dp = (int)p->dp;
  co.tp = (int)p->tp;
  co.timeout_s = o.timeout_s;
  // On a device backend the host keeps only the persistent region (what it
  // initialises, loads, saves and dumps); the whole arena is on the device.
  const srt_backend *backend = p->backend;
  int64_t host_bytes = backend ? p->persistent_bytes : p->arena_bytes;
  co.arena_bytes = (size_t)host_bytes;
  srt_context *ctx = NULL;
  s = srt_context_create(&co, &ctx);
  if (s) { // the mesh check fails alike everywhere
    if (world_rank == 0)
      fprintf(stderr, "train: program '%s' is partitioned for dp=%lld x tp=%lld: %s\n",
              p->model ? p->model : "?", (long long)p->dp, (long long)p->tp,
              srt_status_message(s));
    srt_status_free(s);
    MPI_Finalize();
    return 1;
  }
  int rank = srt_context_rank(ctx);
  train_threads threads = train_choose_threads(o.threads);
  uint8_t *arena = srt_context_arena(ctx)->base;
  srt_tokens *tokens = NULL, *eval_tokens = NULL;
  train_state state = {0};
  char prev_optim[4096] = "";
  train_input input = {0};
  int failed = any_failed(ctx, check_program(p, srt_context_mesh(ctx)));
  if (!failed && !backend)
    failed = any_failed(ctx, train_check_omp_stack());
  if (!failed)
    failed = any_failed(ctx, train_input_open(p, &input));
  // The device first: a machine without one is told so before minutes of
  // initialising or loading weights on the host.
  void *device = NULL;
  uint8_t *device_arena = NULL;
  if (!failed && backend) // collective: every rank opens its device
    failed = any_failed(ctx, backend->open(ctx, p, &device, &device_arena));
  if (!failed)
    memset(arena, 0, (size_t)host_bytes);
  if (!failed && o.data) {
    s = srt_tokens_open(o.data, &tokens);
    if (!s)
      s = srt_tokens_check_vocab(tokens, p->vocab);
    failed = any_failed(ctx, s);
  }
  if (!failed && o.eval_data) {
    s = srt_tokens_open(o.eval_data, &eval_tokens);
    if (!s)
      s = srt_tokens_check_vocab(eval_tokens, p->vocab);
    if (!s)
      s = train_eval_check(p, eval_tokens, o.eval_data, o.eval_batches);
    failed = any_failed(ctx, s);
    int64_t need = o.eval_batches * p->batch * p->seq, have = failed ? 0 : srt_tokens_count(eval_tokens);
    if (!failed && rank == 0 && have < need)
      fprintf(stderr,
              "train: warning: --eval-batches %lld of %lld x %lld tokens read %lld tokens, "
              "'%s' has %lld: the evaluation windows overlap (fewer distinct tokens)\n",
              (long long)o.eval_batches, (long long)p->batch, (long long)p->seq,
              (long long)need, o.eval_data, (long long)have);
  }
  if (!failed && o.batch_file && p->grad_accum_steps == 1) // the same batch every step
    failed = any_failed(ctx, train_load_batch_file(ctx, p, arena, o.batch_file, 0));
  if (!failed) {
    s = o.load ? train_load(ctx, p, arena, o.load, &state, &input, prev_optim)
               : train_init_weights(ctx, p, arena, o.seed);
    failed = any_failed(ctx, s);
  }
  // Step k reads the k-th window of batch x seq tokens: a resume by a
  // program of another global batch or sequence length would read other
  // tokens than the saving run's next steps (another mesh of the same
  // batch and seq reads the same ones).
  if (!failed && o.load && o.data && state.step > 0 && state.batch > 0 &&
      (state.batch != p->batch || state.seq != p->seq))
    failed = any_failed(
        ctx, SRT_ERROR(SRT_FAILED_PRECONDITION,
                       "'%s' was saved by a program of global batch %lld x seq %lld, this one "
                       "is compiled for batch %lld x seq %lld: the data windows of steps %lld "
                       "on would shift; recompile with shard-compile --batch %lld --seq %lld "
                       "(any dp x tp mesh)",
                       o.load, (long long)state.batch, (long long)state.seq,
                       (long long)p->batch, (long long)p->seq, (long long)state.step + 1,
                       (long long)state.batch, (long long)state.seq));
  // Where --save and --dump will write must be writable before any step runs.
  for (int i = 0; !failed && i < 2; ++i) {
    const char *target = i ? o.dump : o.save;
    if (target)
      failed = any_failed(ctx, check_writable(target, i ? "--dump" : "--save"));
  }
  if (!failed && o.export_dir)
    failed = any_failed(ctx, train_export_check(ctx, o.export_dir));
  // A fresh start (or a checkpoint that recorded none) is a new run.
  if (!failed && !state.run_id[0])
    failed = any_failed(ctx, train_run_id_mint(ctx, state.run_id));
  if (!failed && o.dump && state.step >= o.steps) // identical on every rank
    failed = any_failed(ctx, SRT_ERROR(SRT_INVALID_ARGUMENT,
                                       "--dump '%s': no step to run (loaded at step %lld, "
                                       "--steps %lld)",
                                       o.dump, (long long)state.step, (long long)o.steps));
  if (!failed && backend) // the initialised or loaded host copy to the device
    failed = any_failed(ctx, backend->to_device(device, p, arena, 0, p->persistent_bytes));
  if (!failed && rank == 0) {
    printf("train: model %s, mesh dp=%lld x tp=%lld, batch %lld x seq %lld, %d parameter "
           "tensors, arena %.1f MiB per rank%s%s, %s\n",
           p->model ? p->model : "?", (long long)p->dp, (long long)p->tp, (long long)p->batch,
           (long long)p->seq, (int)p->num_params,
           (double)(p->arena_bytes - p->offload_bytes) / (1 << 20),
           backend ? " on " : "", backend ? backend->name : "",
           !o.load ? "initialised" : state.step > 0 ? "resumed" : "loaded (weights only)");
    if (p->offload_bytes)
      printf("train: cpu offload: %.1f MiB of fp32 weights and AdamW moments per rank in "
             "pinned host memory, stepped there\n",
             (double)p->offload_bytes / (1 << 20));
    print_threads(&threads, backend);
    if (o.load && state.step > 0)
      printf("train: loaded '%s' at step %lld\n", o.load, (long long)state.step);
    else if (o.load) // a Hugging Face checkpoint: weights, a fresh optimizer
      printf("train: loaded the weights of '%s'; training starts at step 1\n", o.load);
    // A bf16 or f16 export (--export-dtype) holds rounded master weights:
    // a resume from it is not the saving run's exact state.
    if (o.load && input.dtype != SRT_F32)
      printf("train: note: the fp32 master weights are rounded from the %s tensors of '%s'; "
             "%s\n", srt_dtype_name(input.dtype), o.load,
             state.step > 0 ? "its optimizer state was found (AdamW moments and step)"
                            : "no optimizer state was found (AdamW starts afresh)");
    fflush(stdout);
  }
  // A resumed run continues the schedule its checkpoint was trained with:
  // flags left out take the recorded values, a flag given with another
  // value is refused (Megatron-LM's check of the scheduler's values), unless
  // --override-lr-schedule (Megatron's --override-opt_param-scheduler).
  // Checkpoints without a record (older ones, Hugging Face weights) take
  // the flags as given.
  char taken[128] = "", schedule[sizeof state.lr_schedule];
  bool resumed = o.load && state.step > 0 && state.lr_schedule[0];
  if (!failed) {
    s = resumed && !o.override_lr_schedule
            ? train_lr_resume(&o.schedule, o.schedule_given, state.lr_schedule, o.load, taken,
                              sizeof taken)
            : NULL;
    // Every record holds an lr: only a run without one may lack --lr.
    if (!s && !(o.schedule_given & TRAIN_GIVEN_LR) && !(resumed && !o.override_lr_schedule))
      s = resumed ? SRT_ERROR(SRT_INVALID_ARGUMENT, "--lr F is required with "
                              "--override-lr-schedule (the flags as given rule)")
                  : SRT_ERROR(SRT_INVALID_ARGUMENT, "--lr F is required ('%s' records no lr "
                              "schedule to continue)", o.load);
    if (!s)
      s = train_lr_finish(&o.schedule, o.schedule_given, o.steps);
    o.lr = (float)o.schedule.lr;
    failed = any_failed(ctx, s);
  }
  train_lr_describe(&o.schedule, schedule, sizeof schedule);
  if (!failed && rank == 0 && taken[0])
    printf("train: lr schedule continued from '%s': %s (%s not given: the recorded "
           "values)\n", o.load, schedule, taken);
  else if (!failed && rank == 0 && resumed && o.override_lr_schedule &&
           strcmp(state.lr_schedule, schedule))
    printf("train: --override-lr-schedule: '%s' recorded '%s', this run follows '%s'\n",
           o.load, state.lr_schedule, schedule);
  memcpy(state.lr_schedule, schedule, sizeof schedule);
  if (!failed && rank == 0 && o.schedule.kind != TRAIN_LR_CONSTANT && !taken[0])
    printf("train: lr schedule %s\n", schedule);
  if (!failed && rank == 0 && o.schedule.warmup > o.steps)
    fprintf(stderr,
            "train: warning: --warmup-steps %lld ends after the last step (--steps %lld): the "
            "lr never reaches --lr %g\n",
            (long long)o.schedule.warmup, (long long)o.steps, (double)o.lr);
  // --steps is the last step: a checkpoint already there leaves nothing to run.
  if (!failed && o.load && state.step >= o.steps) {
    if (rank == 0)
      fprintf(stderr,
              "train: '%s' is at step %lld, not before --steps %lld: no step to run "
              "(--steps is the last step, not a count)\n",
              o.load, (long long)state.step, (long long)o.steps);
    failed = 1;
  }
  int64_t skipped = 0, skipped_in_a_row = 0;
  bool told_foreign = false; // --keep-last's note on another run's files
  // MFU: the model's FLOPs over every rank's peak.
  double flops_per_token = train_flops_per_token(p), peak = 0, run_seconds = 0;
  int64_t state_at_start = state.step;
  char peak_source[256] = "";
  if (!failed)
    peak = train_peak_flops(backend, device, peak_source, sizeof peak_source);
  if (!failed && rank == 0)
    printf("train: %.4g model FLOPs per token (6 N + attention + Mamba2 scans); peak %s%.4g TFLOP/s%s%s%s\n",
           flops_per_token, peak > 0 ? "" : "unknown (", peak / 1e12, peak > 0 ? " (" : "",
           peak > 0 ? peak_source : "", peak > 0 ? ")" : ": MFU not shown)");
  // The checkpoint path (with its step-numbered saves and their optimizer
  // files) and the export folder are this job's until it ends: a second
  // job writing them would interleave its files with ours. Taken after
  // the other pre-flight checks (a run refused by them makes no lock file),
  // before anything is written.
  int save_lock = -1, export_lock = -1;
  if (!failed && o.save)
    failed = any_failed(ctx, train_lock(ctx, "--save", o.save, false, &save_lock));
  if (!failed && o.export_dir) // after train_export_check: the lock goes in its parent
    failed = any_failed(ctx, train_lock(ctx, "--export", o.export_dir, true, &export_lock));
  FILE *metrics = NULL; // rank 0's; appended to, so a resumed run continues it
  if (!failed) {
    srt_status ms = rank == 0 && o.metrics ? train_metrics_open(o.metrics, &metrics) : NULL;
    failed = any_failed(ctx, ms);
  }
  // --profile leaves out the first step when more follow: it pays one-time
  // costs (the GEMM library's kernel generation, first touch of the arena).
  srt_profile profile = {0};
  bool warm_up_left_out = o.steps > state.step + 1;
  int64_t first_profiled = state.step + 1 + (warm_up_left_out ? 1 : 0);
  srt_exec exec = {ctx, backend ? device_arena : arena, device, backend};
  // Gradient accumulation: one float per local gradient element.
  float *grad_accum = NULL;
  if (!failed && p->grad_accum_steps > 1) {
    int64_t n = 0;
    for (int32_t k = 0; k < p->num_params; ++k)
      n += srt_shape_numel(p->params[k].rank, p->params[k].local_shape);
    grad_accum = malloc((size_t)(n > 0 ? n : 1) * sizeof *grad_accum);
    failed = any_failed(ctx, grad_accum ? NULL
                                        : SRT_ERROR(SRT_RESOURCE_EXHAUSTED,
                                                    "train: no memory for the gradient "
                                                    "accumulation buffer (%lld floats)",
                                                    (long long)n));
    if (!failed && rank == 0)
      printf("train: %d micro-batches of %lld x %lld per rank per step, gradients "
             "accumulated\n",
             (int)p->grad_accum_steps, (long long)p->local_batch, (long long)p->seq);
  }
  for (int64_t step = state.step + 1; !failed && step <= o.steps; ++step) {
    srt_context_set_step(ctx, step);
    if (o.profile && step == first_profiled)
      srt_context_set_profile(ctx, &profile);
    double lr_exact = train_lr_at(&o.schedule, state.adam_step + 1);
    float lr = (float)lr_exact;
    srt_step_options so = {.step = state.adam_step + 1,
                           .lr = lr,
                           .beta1 = o.beta1,
                           .beta2 = o.beta2,
                           .eps = o.eps,
                           .weight_decay = o.weight_decay,
                           .max_grad_norm = o.max_grad_norm,
                           .norm_type = o.norm_type};
    srt_step_result r = {0};
    double t0 = now_seconds();
    train_eval run = {&exec, p, arena, backend};
    s = train_run_step(&run, tokens, o.batch_file, step, so, grad_accum, &r);
    double dt = now_seconds() - t0;
    if (srt_context_profile(ctx)) {
      profile.step_seconds += dt;
      profile.steps++;
    }
    if (s) {
      report(s, rank);
      failed = 1;
      // On the cpu the step's MPI collectives make every rank fail alike. A
      // device step can fail on one rank only (device memory, a library)
      // while the others wait in NCCL, which no MPI call can interrupt.
      if (backend && srt_context_mesh(ctx)->shape[0] * srt_context_mesh(ctx)->shape[1] > 1) {
        fprintf(stderr, "train: rank %d: aborting every rank (a device step failed)\n", rank);
        MPI_Abort(MPI_COMM_WORLD, 1);
      }
      break;
    }
    state.step = step;
    if (r.skipped)
      ++skipped;
    else
      ++state.adam_step;
    run_seconds += dt;
    double tps = (double)(p->batch * p->seq) / (dt > 0 ? dt : 1e-9);
    train_step_metrics m = {
        .step = step, .steps = o.steps, .loss = r.loss, .grad_norm = r.grad_norm, .lr = lr_exact,
        .step_s = dt, .tokens_per_s = tps, .mfu = peak > 0 ? tps * flops_per_token / peak : -1,
        .eta_s = run_seconds / (double)(step - state_at_start) * (double)(o.steps - step),
        .skipped = r.skipped != 0};
    if (rank == 0 && (step % o.log_every == 0 || step == o.steps || r.skipped))
      train_print_step(&m);
    // Steps that change nothing, one after another: the run diverged. Stop
    // before any save, so the last good checkpoint stays what it is.
    skipped_in_a_row = r.skipped ? skipped_in_a_row + 1 : 0;
    if (o.max_skipped > 0 && skipped_in_a_row >= o.max_skipped) {
      if (rank == 0)
        fprintf(stderr,
                "train: %lld steps in a row skipped (non-finite gradient norm), the last at "
                "step %lld: stopping without saving (--max-skipped %lld; lower --lr, or "
                "clip with --max-grad-norm)\n",
                (long long)skipped_in_a_row, (long long)step, (long long)o.max_skipped);
      failed = 1;
      break;
    }
    // The host copy of the persistent region is read by dumps and saves.
    bool save_point = (o.save_every > 0 && step % o.save_every == 0) || step == o.steps;
    int to_host = (o.dump && step == o.steps) || ((o.save || o.export_dir) && save_point);
    if (backend && to_host &&
        (failed = any_failed(ctx, backend->to_host(device, p, arena, 0, p->persistent_bytes))))
      break;
    char done[PATH_MAX + 64];
    if (o.dump && step == o.steps) {
      snprintf(done, sizeof done, "dumped step %lld to '%s'", (long long)step, o.dump);
      failed |= collective_outcome(train_dump(ctx, p, arena, o.dump, &r, &o, step), rank, done);
    }
    // Each write is attempted even when another failed: a failed dump or
    // export must not cost the run its checkpoint.
    if (o.export_dir && save_point) {
      snprintf(done, sizeof done, "exported '%s' at step %lld", o.export_dir, (long long)step);
      failed |= collective_outcome(train_export(ctx, p, arena, &o, &state, &input), rank, done);
    }
    double eval_loss = 0;
    bool evaluated = false;
    if (eval_tokens && ((o.eval_every > 0 && step % o.eval_every == 0) || step == o.steps)) {
      train_eval ev = {&exec, p, arena, backend};
      evaluated = true;
      s = train_evaluate(&ev, eval_tokens, o.eval_batches, so, &eval_loss);
      if ((failed = any_failed(ctx, s)))
        break;
      if (rank == 0) {
        printf("eval step %lld: loss %.9g  ppl %.6g  (%lld batch%s of %lld x %lld tokens)\n",
               (long long)step, eval_loss, exp(eval_loss), (long long)o.eval_batches,
               o.eval_batches == 1 ? "" : "es",
               (long long)p->batch, (long long)p->seq);
        fflush(stdout);
      }
    }
    if (metrics && train_metrics_write(metrics, &m, evaluated ? &eval_loss : NULL)) {
      fprintf(stderr, "train: --metrics '%s': write failed at step %lld\n", o.metrics,
              (long long)step);
      fclose(metrics);
      metrics = NULL; // training goes on; the metrics stop
    }
    if (o.save && save_point) {
      char stepped[PATH_MAX];
      const char *target = o.save;
      if (o.keep_last > 0 && !train_step_path(o.save, step, stepped, sizeof stepped))
        target = stepped;
      snprintf(done, sizeof done, "saved '%s' at step %lld", target, (long long)step);
      int bad = collective_outcome(
          train_save(ctx, p, arena, target, &state, &input, prev_optim), rank, done);
      failed |= bad;
      int foreign = 0;
      if (!bad && o.keep_last > 0 && rank == 0 &&
          train_rotate(o.save, o.keep_last, o.load, step, state.run_id, &foreign))
        printf("train: kept the %lld newest checkpoints of '%s'\n", (long long)o.keep_last,
               o.save);
      if (foreign && !told_foreign) { // once: the files stay as long as the run does
        printf("train: note: --keep-last leaves %d step file%s of '%s' that another run "
               "saved (not run %s)\n",
               foreign, foreign == 1 ? "" : "s", o.save, state.run_id);
        told_foreign = true;
      }
    }
  }
  if (!failed && rank == 0 && skipped)
    printf("train: %lld of the steps were skipped (non-finite gradient norm)\n",
           (long long)skipped);
  srt_context_set_profile(ctx, NULL);
  if (!failed && rank == 0 && o.profile)
    print_profile(&profile, warm_up_left_out);
  if (metrics)
    fclose(metrics);
  free(grad_accum);
  srt_tokens_close(tokens);
  srt_tokens_close(eval_tokens);
  train_input_close(&input);
  if (backend && device) {
    srt_status c = backend->close(device);
    if (c) {
      report(c, rank);
      failed = 1;
    }
  }
  srt_status d = srt_context_destroy(ctx);
  if (d)
    report(d, rank);
  train_unlock(save_lock);
  train_unlock(export_lock);
  MPI_Finalize();
  return failed || d ? 1 : 0;
}
