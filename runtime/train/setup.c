// The setup phase of a run (train_setup): every check and load before
// step 1, in order, each a step that returns 1 when the run failed. The
// device is opened before the weights are initialised or loaded, so that a
// machine without one is told so before minutes of work on the host.
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "shardrt/output.h"
#include "run.h"

// The step's int64 [local_batch, seq] inputs (ids, labels, and position
// and segment ids where it takes them: offset -1 when not).
static srt_status check_inputs(const srt_program *p, const srt_backend *b) {
  // The driver writes input ids and labels each step into its host arena:
  // anywhere in the cpu backend's (the arena itself); on a device backend in
  // the persistent region the host copies over, after a host-only prefix.
  const int64_t inputs[4] = {p->input_ids_offset, p->labels_offset, p->position_ids_offset,
                             p->segment_ids_offset};
  static const char *const names[4] = {"input ids", "labels", "position ids", "segment ids"};
  int64_t in_lo = p->offload_bytes, in_hi = b->host ? p->arena_bytes : p->persistent_bytes;
  int64_t bytes = p->local_batch * train_local_seq(p) * 8;
  for (int i = 0; i < 4; ++i)
    if ((i < 2 || inputs[i] != -1) &&
        (inputs[i] < in_lo || inputs[i] + bytes > in_hi))
      return SRT_ERROR(SRT_INVALID_ARGUMENT,
                       "program: %s [%lld, %lld) lies outside [%lld, %lld), where the driver "
                       "can write them",
                       names[i], (long long)inputs[i],
                       (long long)(inputs[i] + bytes), (long long)in_lo,
                       (long long)in_hi);
  // Each is written whole every step: two that overlap would clobber each
  // other (a hand-written table that left an offset 0 instead of -1).
  for (int i = 0; i < 4; ++i)
    for (int j = i + 1; j < 4; ++j)
      if (inputs[i] >= 0 && inputs[j] >= 0 &&
          llabs(inputs[i] - inputs[j]) < bytes)
        return SRT_ERROR(SRT_INVALID_ARGUMENT,
                         "program: %s at %lld and %s at %lld overlap (each is %lld bytes)",
                         names[i], (long long)inputs[i], names[j], (long long)inputs[j],
                         (long long)bytes);
  return NULL;
}

srt_status train_check_program(const srt_program *p, const srt_mesh *mesh) {
  if (p->abi != SRT_PROGRAM_ABI)
    return SRT_ERROR(SRT_FAILED_PRECONDITION,
                     "program was compiled for runtime ABI %d, this driver is ABI %d: "
                     "recompile with this shard-compile",
                     (int)p->abi, SRT_PROGRAM_ABI);
  if (!p->backend)
    return SRT_ERROR(SRT_INVALID_ARGUMENT,
                     "program: its table names no backend (shard-compile names "
                     "srt_cpu_backend or srt_cuda_backend): recompile with this shard-compile");
  if (!mesh)
    return NULL;
  const srt_backend *b = p->backend;
  if (p->batch <= 0 || p->seq <= 0 || p->grad_accum_steps < 1 || p->cp < 0 ||
      (p->cp > 1 && p->seq % (2 * p->cp)) ||
      p->local_batch * p->dp * p->grad_accum_steps != p->batch || p->vocab <= 0 ||
      p->arena_bytes <= 0 || p->persistent_bytes > p->arena_bytes || !p->step)
    return SRT_ERROR(SRT_INVALID_ARGUMENT,
                     "program: inconsistent header (batch %lld, local batch %lld, dp %lld, "
                     "cp %lld, micro-batches %d, seq %lld, vocab %lld, arena %lld bytes, "
                     "persistent %lld bytes)",
                     (long long)p->batch, (long long)p->local_batch, (long long)p->dp,
                     (long long)p->cp,
                     (int)p->grad_accum_steps,
                     (long long)p->seq, (long long)p->vocab, (long long)p->arena_bytes,
                     (long long)p->persistent_bytes);
  if (p->offload_bytes < 0 || p->offload_bytes > p->persistent_bytes ||
      (p->offload_bytes > 0 && b->host))
    return SRT_ERROR(SRT_INVALID_ARGUMENT,
                     "program: host-only prefix of %lld bytes (--cpu-offload) does not fit a "
                     "persistent region of %lld bytes on the %s backend",
                     (long long)p->offload_bytes, (long long)p->persistent_bytes,
                     b->name);
  SRT_RETURN_IF_ERROR(check_inputs(p, b));
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
    for (int i = 0; i < (b->host ? 4 : 5); ++i) { // the bf16 copy: half the bytes
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

// The program against the mesh; the program's input region; the staging
// of a context-parallel batch.
static int setup_program(train_run *r) {
  int failed = train_any_failed(
      r->ctx, train_check_program(r->p, srt_context_placement_mesh(r->ctx)));
  if (!failed)
    failed = train_any_failed(r->ctx, train_input_open(r->p, &r->input));
  if (!failed)
    failed = train_any_failed(r->ctx, train_cp_stage_init(r->p, &r->cp_stage));
  return failed;
}

// Collective: every rank opens its device (the cpu's is the host arena).
// The ops take the program table's own backend (NULL: the cpu's), as the
// runtime's dispatch expects.
static int setup_device(train_run *r) {
  if (train_any_failed(r->ctx,
                       r->backend->open(r->ctx, r->p, &r->device, &r->device_arena)))
    return 1;
  memset(r->arena, 0, (size_t)r->host_bytes);
  r->exec = (srt_exec){.ctx = r->ctx, .arena = r->device_arena, .device = r->device,
                       .backend = r->p->backend};
  return 0;
}

// A token file's documents (version 2): the tokenizer warning (rank 0),
// the row plan, and whether the program takes packed rows.
static srt_status setup_documents(train_run *r, const srt_tokens *t, const char *path,
                                  train_pack_plan *plan) {
  char warning[12288];
  if (r->rank == 0 && train_tokenizer_mismatch(r->p, t, warning, sizeof warning))
    fprintf(stderr, "train: warning: %s\n", warning);
  SRT_RETURN_IF_ERROR(train_pack_setup(t, r->p->seq, plan));
  if (!plan->rows)
    return NULL;
  SRT_RETURN_IF_ERROR(train_packed_supported(r->p, path));
  // One epoch's figures (every step reads rows of this plan in turn).
  train_pack_stats st;
  SRT_RETURN_IF_ERROR(train_pack_stats_of(plan, 1, plan->rows, 0, plan->rows, &st));
  if (r->rank == 0)
    printf("train: '%s': %lld documents packed into %lld rows of %lld tokens per epoch "
           "(%.2f pieces per row, %.1f%% padding)\n",
           path, (long long)plan->documents, (long long)st.rows, (long long)plan->seq,
           (double)st.documents / (double)st.rows,
           100.0 * (double)st.padding / (double)(st.rows * plan->seq));
  if (r->rank == 0 && plan->rows < r->p->batch)
    fprintf(stderr,
            "train: warning: '%s' packs into %lld rows, fewer than the batch of %lld: every "
            "step repeats rows\n",
            path, (long long)plan->rows, (long long)r->p->batch);
  return NULL;
}

static int setup_data(train_run *r) {
  if (!r->o.data)
    return 0;
  srt_status s = srt_tokens_open(r->o.data, &r->tokens);
  if (!s)
    s = srt_tokens_check_vocab(r->tokens, r->p->vocab);
  if (!s)
    s = setup_documents(r, r->tokens, r->o.data, &r->plan);
  return train_any_failed(r->ctx, s);
}

static int setup_eval_data(train_run *r) {
  const train_options *o = &r->o;
  const srt_program *p = r->p;
  if (!o->eval_data)
    return 0;
  srt_status s = srt_tokens_open(o->eval_data, &r->eval_tokens);
  if (!s)
    s = srt_tokens_check_vocab(r->eval_tokens, p->vocab);
  if (!s)
    s = setup_documents(r, r->eval_tokens, o->eval_data, &r->eval_plan);
  if (!s)
    s = train_eval_check(p, r->eval_tokens, o->eval_data, r->eval_plan.rows, o->eval_batches);
  if (train_any_failed(r->ctx, s))
    return 1;
  // Packed rows (version 2): K batches read K x batch rows of the epoch's;
  // windows (version 1): K x batch x seq tokens of the file's.
  int64_t need = o->eval_batches * p->batch, have = r->eval_plan.rows;
  if (!r->eval_plan.rows) {
    need *= p->seq;
    have = srt_tokens_count(r->eval_tokens);
  }
  if (r->rank == 0 && have < need)
    fprintf(stderr,
            "train: warning: --eval-batches %lld of %lld x %lld tokens read %lld %s, '%s' has "
            "%lld: the evaluation %s (fewer distinct tokens)\n",
            (long long)o->eval_batches, (long long)p->batch, (long long)p->seq,
            (long long)need, r->eval_plan.rows ? "packed rows" : "tokens", o->eval_data,
            (long long)have, r->eval_plan.rows ? "repeats rows" : "windows overlap");
  return 0;
}

// The batch file's one batch (without accumulation: the same every step),
// then the weights: loaded or initialised.
static int setup_weights(train_run *r) {
  const train_options *o = &r->o;
  if (o->batch_file && r->p->grad_accum_steps == 1) {
    const train_cp_stage *st = &r->cp_stage;
    srt_status s = train_load_batch_file(r->ctx, st->rows ? &st->view : r->p,
                                         st->rows ? st->rows : r->arena, o->batch_file, 0);
    if (!s && st->rows)
      s = train_cp_stage_split(st, r->ctx, r->p, r->arena);
    if (train_any_failed(r->ctx, s))
      return 1;
  }
  srt_status s = o->load ? train_load(r->ctx, r->p, r->arena, o->load, &r->state, &r->input,
                                      r->prev_optim)
                         : train_init_weights(r->ctx, r->p, r->arena, o->seed);
  if (train_any_failed(r->ctx, s))
    return 1;
  if (o->load && r->state.step > 0) // a resume: until the first save, the checkpoint to go back to
    train_note_checkpoint(o->load, r->state.step);
  return 0;
}

// Step k reads the k-th window of batch x seq tokens: a resume by a
// program of another global batch or sequence length would read other
// tokens than the saving run's next steps (another mesh of the same batch
// and seq reads the same ones).
static int setup_data_windows(train_run *r) {
  const train_state *st = &r->state;
  const srt_program *p = r->p;
  if (!r->o.load || !r->o.data || st->step <= 0 || st->batch <= 0 ||
      (st->batch == p->batch && st->seq == p->seq))
    return 0;
  return train_any_failed(
      r->ctx, SRT_ERROR(SRT_FAILED_PRECONDITION,
                        "'%s' was saved by a program of global batch %lld x seq %lld, this one "
                        "is compiled for batch %lld x seq %lld: the data windows of steps %lld "
                        "on would shift; recompile with shard-compile --batch %lld --seq %lld "
                        "(any dp x tp mesh)",
                        r->o.load, (long long)st->batch, (long long)st->seq,
                        (long long)p->batch, (long long)p->seq, (long long)st->step + 1,
                        (long long)st->batch, (long long)st->seq));
}

// Where --save, --dump and --export write must be writable before any
// step runs; a fresh start (or a checkpoint that recorded none) is a new
// run, with a new id.
static int setup_outputs(train_run *r) {
  const train_options *o = &r->o;
  for (int i = 0; i < 2; ++i) {
    const char *target = i ? o->dump : o->save;
    if (target && train_any_failed(r->ctx, check_writable(target, i ? "--dump" : "--save")))
      return 1;
  }
  if (o->export_dir && train_any_failed(r->ctx, train_export_check(r->ctx, o->export_dir)))
    return 1;
  if (!r->state.run_id[0] && train_any_failed(r->ctx, train_run_id_mint(r->ctx, r->state.run_id)))
    return 1;
  if (o->dump && r->state.step >= o->steps) // identical on every rank
    return train_any_failed(r->ctx, SRT_ERROR(SRT_INVALID_ARGUMENT,
                                              "--dump '%s': no step to run (loaded at step "
                                              "%lld, --steps %lld)",
                                              o->dump, (long long)r->state.step,
                                              (long long)o->steps));
  return 0;
}

// The initialised or loaded host copy to the device.
static int setup_to_device(train_run *r) {
  return train_any_failed(
      r->ctx, r->backend->to_device(r->device, r->p, r->arena, 0, r->p->persistent_bytes));
}

// Rank 0's lines on the model, the mesh, the threads and what was loaded.
static int setup_banner(train_run *r) {
  const train_options *o = &r->o;
  const srt_program *p = r->p;
  if (r->rank != 0)
    return 0;
  char cp[48] = ""; // named only where there is context parallelism
  if (p->cp > 1)
    snprintf(cp, sizeof cp, "cp=%lld x ", (long long)p->cp);
  printf("train: model %s, mesh dp=%lld x %stp=%lld, batch %lld x seq %lld, %d parameter "
         "tensors, arena %.1f MiB per rank%s%s, %s\n",
         p->model ? p->model : "?", (long long)p->dp, cp, (long long)p->tp, (long long)p->batch,
         (long long)p->seq, (int)p->num_params,
         (double)(p->arena_bytes - p->offload_bytes) / (1 << 20),
         r->backend->host ? "" : " on ", r->backend->host ? "" : r->backend->name,
         !o->load ? "initialised" : r->state.step > 0 ? "resumed" : "loaded (weights only)");
  if (p->offload_bytes)
    printf("train: cpu offload: %.1f MiB of fp32 weights and AdamW moments per rank in "
           "pinned host memory, stepped there\n",
           (double)p->offload_bytes / (1 << 20));
  train_print_threads(&r->threads, r->backend);
  if (o->load && r->state.step > 0)
    printf("train: loaded '%s' at step %lld\n", o->load, (long long)r->state.step);
  else if (o->load) // a Hugging Face checkpoint: weights, a fresh optimizer
    printf("train: loaded the weights of '%s'; training starts at step 1\n", o->load);
  // A bf16 or f16 export (--export-dtype) holds rounded master weights:
  // a resume from it is not the saving run's exact state.
  if (o->load && r->input.dtype != SRT_F32)
    printf("train: note: the fp32 master weights are rounded from the %s tensors of '%s'; "
           "%s\n", srt_dtype_name(r->input.dtype), o->load,
           r->state.step > 0 ? "its optimizer state was found (AdamW moments and step)"
                             : "no optimizer state was found (AdamW starts afresh)");
  fflush(stdout);
  return 0;
}

// A resumed run continues the schedule its checkpoint was trained with:
// flags left out take the recorded values, a flag given with another
// value is refused (Megatron-LM's check of the scheduler's values), unless
// --override-lr-schedule (Megatron's --override-opt_param-scheduler).
// Checkpoints without a record (older ones, Hugging Face weights) take the
// flags as given. `taken` (128 bytes) receives the flags taken.
static srt_status resume_schedule(train_run *r, char *taken) {
  train_options *o = &r->o;
  bool resumed = o->load && r->state.step > 0 && r->state.lr_schedule[0];
  bool follow = resumed && !o->override_lr_schedule;
  srt_status s = follow ? train_lr_resume(&o->schedule, o->schedule_given, r->state.lr_schedule,
                                          o->load, taken, 128)
                        : NULL;
  // Every record holds an lr: only a run without one may lack --lr.
  if (!s && !(o->schedule_given & TRAIN_GIVEN_LR) && !follow)
    s = resumed ? SRT_ERROR(SRT_INVALID_ARGUMENT, "--lr F is required with "
                            "--override-lr-schedule (the flags as given rule)")
                : SRT_ERROR(SRT_INVALID_ARGUMENT, "--lr F is required ('%s' records no lr "
                            "schedule to continue)", o->load);
  if (!s)
    s = train_lr_finish(&o->schedule, o->schedule_given, o->steps);
  o->lr = (float)o->schedule.lr;
  return s;
}

// The schedule (resumed or given), said by rank 0; --steps is the last
// step: a checkpoint already there leaves nothing to run.
static int setup_schedule(train_run *r) {
  const train_options *o = &r->o;
  char taken[128] = "", schedule[sizeof r->state.lr_schedule];
  // Every rank steps with one schedule, however each rank's flags and the
  // resume rule arrived at it.
  if (train_any_failed(r->ctx, resume_schedule(r, taken)) || train_agree_schedule(&o->schedule))
    return 1;
  bool resumed = o->load && r->state.step > 0 && r->state.lr_schedule[0];
  train_lr_describe(&o->schedule, schedule, sizeof schedule);
  if (r->rank == 0 && taken[0])
    printf("train: lr schedule continued from '%s': %s (%s not given: the recorded "
           "values)\n", o->load, schedule, taken);
  else if (r->rank == 0 && resumed && o->override_lr_schedule &&
           strcmp(r->state.lr_schedule, schedule))
    printf("train: --override-lr-schedule: '%s' recorded '%s', this run follows '%s'\n",
           o->load, r->state.lr_schedule, schedule);
  memcpy(r->state.lr_schedule, schedule, sizeof schedule);
  if (r->rank == 0 && o->schedule.kind != TRAIN_LR_CONSTANT && !taken[0])
    printf("train: lr schedule %s\n", schedule);
  if (r->rank == 0 && o->schedule.warmup > o->steps)
    fprintf(stderr,
            "train: warning: --warmup-steps %lld ends after the last step (--steps %lld): the "
            "lr never reaches --lr %g\n",
            (long long)o->schedule.warmup, (long long)o->steps, (double)o->lr);
  if (o->load && r->state.step >= o->steps) {
    if (r->rank == 0)
      fprintf(stderr,
              "train: '%s' is at step %lld, not before --steps %lld: no step to run "
              "(--steps is the last step, not a count)\n",
              o->load, (long long)r->state.step, (long long)o->steps);
    return 1;
  }
  return 0;
}

// MFU: the model's FLOPs over every rank's peak.
static int setup_mfu(train_run *r) {
  char source[256] = "";
  r->flops_per_token = train_flops_per_token(r->p);
  r->peak = train_peak_flops(r->backend, r->device, source, sizeof source);
  double peak = r->peak;
  if (r->rank == 0 && r->flops_per_token <= 0) // IR that shard-import did not count
    printf("train: model FLOPs per token unknown (the program table has none): MFU not "
           "shown\n");
  else if (r->rank == 0)
    printf("train: %.4g model FLOPs per token (6 N + attention + Mamba2 scans); peak "
           "%s%.4g TFLOP/s%s%s%s\n",
           r->flops_per_token, peak > 0 ? "" : "unknown (", peak / 1e12, peak > 0 ? " (" : "",
           peak > 0 ? source : "", peak > 0 ? ")" : ": MFU not shown)");
  return 0;
}

// The checkpoint path (with its step-numbered saves and their optimizer
// files) and the export folder are this job's until it ends: a second job
// writing them would interleave its files with ours. Taken after the other
// pre-flight checks (a run refused by them makes no lock file), before
// anything is written. Then rank 0's --metrics, appended to (a resumed run
// continues it).
static int setup_locks(train_run *r) {
  const train_options *o = &r->o;
  if (o->save &&
      train_any_failed(r->ctx, train_lock(r->ctx, "--save", o->save, false, &r->save_lock)))
    return 1;
  if (o->export_dir && // after train_export_check: the lock goes in its parent
      train_any_failed(r->ctx,
                       train_lock(r->ctx, "--export", o->export_dir, true, &r->export_lock)))
    return 1;
  return train_any_failed(
      r->ctx, r->rank == 0 && o->metrics ? train_metrics_open(o->metrics, &r->metrics) : NULL);
}

// Gradient accumulation: one float per local gradient element. --profile
// leaves out the first step when more follow: it pays one-time costs (the
// GEMM library's kernel generation, first touch of the arena).
static int setup_steps(train_run *r) {
  const srt_program *p = r->p;
  r->state_at_start = r->state.step;
  r->warm_up_left_out = r->o.steps > r->state.step + 1;
  r->first_profiled = r->state.step + 1 + (r->warm_up_left_out ? 1 : 0);
  if (p->grad_accum_steps <= 1)
    return 0;
  int64_t n = 0;
  for (int32_t k = 0; k < p->num_params; ++k)
    n += srt_shape_numel(p->params[k].rank, p->params[k].local_shape);
  r->grad_accum = malloc((size_t)(n > 0 ? n : 1) * sizeof *r->grad_accum);
  if (train_any_failed(r->ctx, r->grad_accum ? NULL
                                             : SRT_ERROR(SRT_RESOURCE_EXHAUSTED,
                                                         "train: no memory for the gradient "
                                                         "accumulation buffer (%lld floats)",
                                                         (long long)n)))
    return 1;
  if (r->rank == 0)
    printf("train: %d micro-batches of %lld x %lld per rank per step, gradients "
           "accumulated\n",
           (int)p->grad_accum_steps, (long long)p->local_batch, (long long)p->seq);
  return 0;
}

int train_setup(train_run *r) {
  static int (*const kSteps[])(train_run *) = {
      setup_program, setup_device,  setup_data,     setup_eval_data, setup_weights,
      setup_data_windows, setup_outputs, setup_to_device, setup_banner, setup_schedule,
      setup_mfu,     setup_locks,   train_setup_leftovers, setup_steps};
  for (size_t i = 0; i < sizeof kSteps / sizeof *kSteps; ++i)
    if (kSteps[i](r))
      return 1;
  return 0;
}
