// The training driver's main: `mpirun -np N ./train --data TOKENS --steps K
// --lr F --max-grad-norm F ...` around a compiled step (`shard_program`),
// in the phases of run.h: start, setup (setup.c), steps with their
// after-step work (after_step.c), teardown.
// Creates the context (world = dp x tp), allocates the arena once,
// initialises or loads the weights, feeds each step its deterministic batch
// (or the one of --batch-file), logs one line per step from rank 0, saves
// checkpoints atomically and, with --dump, writes what the last step
// computed.
// Errors are printed once, naming the rank when only some ranks failed, and
// every rank exits with status 1 (no rank is left waiting in a collective).
// SIGTERM, SIGINT, SIGHUP and SIGUSR1 stop the run at a step boundary that
// every rank agrees on, after saving it (preempt.c): exit status 75.
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "shardrt/tokens.h"
#include "run.h"

static double now_seconds(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

// Parses the options and makes every rank agree on them and on the
// program: -1, or the exit status after --help or an error.
static int start_options(train_run *r, int argc, char **argv, int world_rank) {
  bool help = false;
  for (int i = 1; i < argc; ++i)
    help |= !strcmp(argv[i], "--help") || !strcmp(argv[i], "-h");
  srt_status s = help ? NULL : train_parse_options(argc, argv, &r->o);
  // Before anything else: every rank runs the same program with the same
  // options (an MPMD launch or per-rank flags may differ), so that errors
  // below are alike everywhere and no collective gets buffers of other sizes.
  if (train_agree(r->p, s || help ? NULL : &r->o,
                  help ? "--help" : s ? srt_status_message(s) : "parsed")) {
    srt_status_free(s);
    return 1;
  }
  if (help) {
    if (world_rank == 0)
      printf("%s", train_usage());
    return 0;
  }
  if (s) { // identical on every rank: print once
    if (world_rank == 0)
      fprintf(stderr, "train: %s\n%s", srt_status_message(s), train_usage());
    srt_status_free(s);
    return 1;
  }
  return -1;
}

int train_start(train_run *r, int argc, char **argv) {
  const srt_program *p = r->p;
  int world_rank = train_plane_rank();
  int code = start_options(r, argc, argv, world_rank);
  if (code >= 0)
    return code;
  if (p->abi != SRT_PROGRAM_ABI || !p->backend) { // a malformed table, refused
    if (world_rank == 0)
      train_report(train_check_program(p, NULL), -1);
    return 1;
  }
  r->backend = p->backend;
  srt_context_options co = srt_context_default_options();
  co.dp = (int)p->dp;
  co.cp = (int)p->cp;
  co.tp = (int)p->tp;
  co.timeout_s = r->o.timeout_s;
  co.tcp_mesh = train_plane_mesh();
  // On a device backend the host keeps only the persistent region (what it
  // initialises, loads, saves and dumps); the whole arena is on the device.
  r->host_bytes = r->backend->host ? p->arena_bytes : p->persistent_bytes;
  co.arena_bytes = (size_t)r->host_bytes;
  srt_status s = srt_context_create(&co, &r->ctx);
  if (s) { // the mesh check fails alike everywhere
    if (world_rank == 0)
      fprintf(stderr, "train: program '%s' is partitioned for dp=%lld x cp=%lld x tp=%lld: %s\n",
              p->model ? p->model : "?", (long long)p->dp, (long long)p->cp, (long long)p->tp,
              srt_status_message(s));
    srt_status_free(s);
    return 1;
  }
  r->rank = srt_context_rank(r->ctx);
  r->threads = train_choose_threads(r->o.threads);
  r->arena = srt_context_arena(r->ctx)->base;
  return -1;
}

// Steps that change nothing, one after another: the run diverged. Stop
// before any save, so the last good checkpoint stays what it is.
static int count_skipped(train_run *r, int64_t step, bool skipped) {
  r->skipped += skipped;
  r->skipped_in_a_row = skipped ? r->skipped_in_a_row + 1 : 0;
  if (r->o.max_skipped <= 0 || r->skipped_in_a_row < r->o.max_skipped)
    return 0;
  if (r->rank == 0)
    fprintf(stderr,
            "train: %lld steps in a row skipped (non-finite gradient norm), the last at "
            "step %lld: stopping without saving (--max-skipped %lld; lower --lr, or "
            "clip with --max-grad-norm)\n",
            (long long)r->skipped_in_a_row, (long long)step, (long long)r->o.max_skipped);
  return 1;
}

// A failed step. On the cpu the step's MPI collectives make every rank
// fail alike. A device step can fail on one rank only (device memory, a
// library) while the others wait in NCCL, which no MPI call can interrupt.
static int step_failed(train_run *r, srt_status s) {
  train_report(s, r->rank);
  const srt_mesh *mesh = srt_context_placement_mesh(r->ctx);
  if (!r->backend->host && mesh->shape[0] * mesh->shape[1] > 1) {
    fprintf(stderr, "train: rank %d: aborting every rank (a device step failed)\n", r->rank);
    train_plane_abort();
  }
  return 1;
}

int train_step(train_run *r, int64_t step) {
  const train_options *o = &r->o;
  srt_context_set_step(r->ctx, step);
  if (o->profile && step == r->first_profiled)
    srt_context_set_profile(r->ctx, &r->profile);
  double lr_exact = train_lr_at(&o->schedule, r->state.adam_step + 1);
  srt_step_options so = {.step = r->state.adam_step + 1, .lr = (float)lr_exact,
                         .beta1 = o->beta1, .beta2 = o->beta2, .eps = o->eps,
                         .weight_decay = o->weight_decay, .max_grad_norm = o->max_grad_norm,
                         .norm_type = o->norm_type};
  srt_step_result res = {0};
  double scored = 0, t0 = now_seconds();
  train_eval run = {&r->exec, r->p, r->arena, r->backend, r->plan.rows ? &r->plan : NULL,
                    r->cp_stage.rows ? &r->cp_stage : NULL};
  srt_status s = train_run_step(&run, r->tokens, o->batch_file, step, so, r->grad_accum, &res,
                                &scored);
  double dt = now_seconds() - t0;
  if (srt_context_profile(r->ctx)) {
    r->profile.step_seconds += dt;
    r->profile.steps++;
  }
  if (s)
    return step_failed(r, s);
  r->state.step = step;
  r->state.adam_step += !res.skipped;
  r->run_seconds += dt;
  double tps = (double)(r->p->batch * r->p->seq) / (dt > 0 ? dt : 1e-9);
  train_step_metrics m = {
      .step = step, .steps = o->steps, .loss = res.loss, .grad_norm = res.grad_norm,
      .lr = lr_exact, .step_s = dt, .tokens_per_s = tps,
      .mfu = r->peak > 0 && r->flops_per_token > 0 ? tps * r->flops_per_token / r->peak : -1,
      .eta_s = r->run_seconds / (double)(step - r->state_at_start) * (double)(o->steps - step),
      .skipped = res.skipped != 0, .no_labels = scored == 0};
  if (r->rank == 0 && (step % o->log_every == 0 || step == o->steps || res.skipped))
    train_print_step(&m);
  if (count_skipped(r, step, res.skipped != 0))
    return 1;
  return train_after_step(r, step, &res, &m, so);
}

int train_teardown(train_run *r, int failed) {
  if (!failed && r->rank == 0 && r->skipped)
    printf("train: %lld of the steps were skipped (non-finite gradient norm)\n",
           (long long)r->skipped);
  srt_context_set_profile(r->ctx, NULL);
  if (!failed && r->rank == 0 && r->o.profile)
    train_print_profile(&r->profile, r->warm_up_left_out);
  if (r->metrics)
    fclose(r->metrics);
  free(r->grad_accum);
  train_cp_stage_free(&r->cp_stage);
  srt_tokens_close(r->tokens);
  srt_tokens_close(r->eval_tokens);
  train_pack_plan_free(&r->plan);
  train_pack_plan_free(&r->eval_plan);
  train_input_close(&r->input);
  srt_status c = r->backend->close(r->device);
  if (c) {
    train_report(c, r->rank);
    failed = 1;
  }
  srt_status d = srt_context_destroy(r->ctx);
  if (d)
    train_report(d, r->rank);
  train_unlock(r->save_lock);
  train_unlock(r->export_lock);
  train_plane_end();
  return failed || d ? 1 : r->stop_signal ? TRAIN_EXIT_PREEMPTED : 0;
}

// What must be refused before MPI_Init: a stack so small that MPI's
// start-up crashes too, and a malformed launch; then the host plane starts
// (MPI, or an env launch's TCP mesh). 1 after printing why, else 0.
static int start_plane(int *argc, char ***argv) {
  srt_launch_env launch;
  srt_status s = train_check_stacks();
  if (!s)
    s = srt_launch_env_from_environ(&launch);
  bool tcp = !s && train_launch_uses_tcp(&launch);
  if (!tcp)
    train_block_signals(); // MPI's threads must not take a stop signal
  if (!s)
    s = train_plane_start(&launch, argc, argv);
  if (tcp) // no threads: a signal during the rendezvous just ends the process
    train_block_signals();
  if (!s)
    return 0;
  fprintf(stderr, "train: %s\n", srt_status_message(s));
  srt_status_free(s);
  return 1;
}

int main(int argc, char **argv) {
  // A reader of --metrics (a pipe, a FIFO) that goes away must not kill the
  // run: the write fails with EPIPE and the metrics stop with a message, as
  // on a full disk; checkpoints and the console go on.
  signal(SIGPIPE, SIG_IGN);
  if (start_plane(&argc, &argv))
    return 1;
  train_catch_signals(); // after MPI_Init: a stop request is agreed on collectively
  train_run r = {.p = &shard_program, .save_lock = -1, .export_lock = -1};
  int code = train_start(&r, argc, argv);
  if (code >= 0) {
    train_plane_end();
    return code;
  }
  int failed = train_setup(&r);
  for (int64_t step = r.state.step + 1; !failed && step <= r.o.steps; ++step) {
    failed = train_preempted(&r, step - 1);
    if (failed || r.stop_signal)
      break;
    failed = train_step(&r, step);
  }
  return train_teardown(&r, failed);
}
