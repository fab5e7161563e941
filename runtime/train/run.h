// One training run, in phases (main.c): start (options, agreement, the
// context), setup (setup.c: program checks, device, data, weights, outputs,
// schedule, locks), then per step the step and the after-step work
// (after_step.c: dump, export, eval, metrics, save), and teardown. Each
// phase returns 1 when the run failed (every rank alike: errors that may
// hit some ranks only go through train_any_failed), 0 to go on.
#ifndef SHARDRT_TRAIN_RUN_H
#define SHARDRT_TRAIN_RUN_H

#include <stdio.h>

#include "shardrt/profile.h"
#include "train_internal.h"

/// What a run holds from setup to teardown.
typedef struct train_run {
  const srt_program *p;       ///< the compiled step (shard_program)
  train_options o;            ///< the command line
  srt_context *ctx;           ///< world = dp x tp
  int rank;                   ///< this rank in the world
  const srt_backend *backend; ///< what the program runs on (its table's backend)
  int64_t host_bytes;         ///< the host arena: the whole arena on the cpu, else persistent
  uint8_t *arena;             ///< the host arena (initialised, loaded, saved, dumped)
  void *device;               ///< the backend's device state (the cpu's: NULL)
  uint8_t *device_arena;      ///< the backend's arena (the cpu's: the host arena)
  srt_exec exec;              ///< what the step runs on
  train_threads threads;      ///< the cpu kernels' threads
  srt_tokens *tokens;         ///< --data, or NULL
  srt_tokens *eval_tokens;    ///< --eval-data, or NULL
  train_pack_plan plan;       ///< --data's packing (version 2; rows 0: windows)
  train_pack_plan eval_plan;  ///< --eval-data's, likewise
  train_state state;          ///< steps done, the schedule's record, the run id
  char prev_optim[4096];      ///< the optimizer file of the last save or load ("")
  train_input input;          ///< the --load checkpoint, kept open
  int save_lock, export_lock; ///< train_lock descriptors (-1: none)
  FILE *metrics;              ///< rank 0's --metrics, or NULL
  float *grad_accum;          ///< gradient accumulation (grad_accum_steps > 1), or NULL
  train_cp_stage cp_stage;    ///< the whole rows of a cp > 1 step's batch (rows NULL: none)
  double flops_per_token;     ///< the model's, for MFU
  double peak;                ///< FLOP/s of every rank together (0: unknown)
  double run_seconds;         ///< seconds of the steps run so far
  int64_t state_at_start;     ///< the step the run started after
  int64_t skipped;            ///< steps skipped (non-finite gradient norm)
  int64_t skipped_in_a_row;   ///< the current streak of them
  bool told_foreign;          ///< --keep-last's note on another run's files was printed
  srt_profile profile;        ///< --profile's figures
  bool warm_up_left_out;      ///< --profile leaves out the first step
  int64_t first_profiled;     ///< the step --profile starts with
  int stop_signal;            ///< the signal the ranks agreed to stop at (0: none)
} train_run;

/// The exit status of a run stopped by SIGTERM, SIGINT, SIGHUP or SIGUSR1
/// after saving (train_preempted): sysexits.h's EX_TEMPFAIL ("try again
/// later": resume from the checkpoint), apart from 0 (done), 1 (an error)
/// and 128 + N (killed by signal N, or a second signal: no save).
#define TRAIN_EXIT_PREEMPTED 75

/// Parses the options, makes the ranks agree on them and creates the
/// context and the threads. Returns -1 to go on, else the exit status
/// (after --help, or an error printed once).
int train_start(train_run *r, int argc, char **argv);

/// Checks that the program fits this runtime, its backend and `mesh`: the
/// ABI and a backend named (only those when `mesh` is NULL), the header's
/// sizes, the input and parameter offsets. Errors: SRT_FAILED_PRECONDITION
/// for another ABI; SRT_INVALID_ARGUMENT naming what does not fit.
srt_status train_check_program(const srt_program *p, const srt_mesh *mesh);

/// Everything before step 1: each setup step in order until one fails.
int train_setup(train_run *r);

/// Removes what a killed run left of this run's --save (temporaries,
/// optimizer files no weights file names) and --export ("<DIR>.partial"),
/// on rank 0 only and only under the path's lock (leftovers.c); rank 0
/// says what it removed. A file it cannot remove stays. Returns 0.
int train_setup_leftovers(train_run *r);

/// Runs step `step` and its after-step work; logs its line (rank 0).
int train_step(train_run *r, int64_t step);

/// After step `step` (result `res`, figures `m`, run with `so`): the dump
/// (last step), the export and the save (save points), the evaluation
/// (--eval-every, last step) and the --metrics line. Each write is
/// attempted even when another failed: a failed dump or export must not
/// cost the run its checkpoint.
int train_after_step(train_run *r, int64_t step, const srt_step_result *res,
                     const train_step_metrics *m, srt_step_options so);

/// Whether `step` is a save point: a multiple of --save-every, or the last.
bool train_is_save_point(const train_options *o, int64_t step);

/// Writes step `step`'s --export and --save as at a save point (the host
/// copy fetched first); nothing without either. Returns 1 when a write
/// failed (rank 0 said why). Collective.
int train_save_outputs(train_run *r, int64_t step);

/// Blocks SIGTERM, SIGINT, SIGHUP and SIGUSR1 in the calling thread, before
/// MPI_Init: every thread started later inherits the mask, so no system
/// call of any thread is interrupted by them (train_catch_signals takes
/// them in a thread of its own).
void train_block_signals(void);

/// Starts the thread that takes the stop signals blocked by
/// train_block_signals (preempt.c; one ignored at the start, as nohup's
/// SIGHUP, stays ignored): it records the first; another a second or more
/// later, before the stop is saved, ends the process at once with status
/// 128 + its number. Without the thread the signals take their default
/// action.
void train_catch_signals(void);

/// The step boundary after step `done` (the loaded step before the first):
/// the ranks agree (an all-reduce, under --timeout) whether any got a stop
/// request. If so, sets r->stop_signal, saves step `done` unless it was a
/// save point or no step ran (train_save_outputs), and rank 0 says which
/// signal, step and checkpoint. Returns 1 when the agreement or the save
/// failed, else 0. Collective.
int train_preempted(train_run *r, int64_t done);

/// Prints the run's summary and profile (when not `failed`), releases
/// everything and finalises MPI. Returns the exit status.
int train_teardown(train_run *r, int failed);

/// Prints `s` as "train: ..." (with the rank when >= 0; -1: the message is
/// the job's, printed by rank 0 alone) and frees it; a collective past its
/// deadline names the last complete checkpoint and ends the whole job
/// (MPI_Abort, status 1).
void train_report(srt_status s, int rank);

/// Records `path` (saved, or loaded to resume, at `step`) as the run's last
/// complete checkpoint, which train_report names when a collective times
/// out. Every rank calls it alike.
void train_note_checkpoint(const char *path, int64_t step);

/// Makes the ranks agree on a step that may fail on some of them only:
/// returns 1 when any rank failed, after each failing rank printed its
/// error (only rank 0's when rank 0 failed too). Collective.
int train_any_failed(srt_context *ctx, srt_status s);

/// The outcome of a collective write (every rank holds rank 0's): rank 0
/// reports the error, or prints `done`; a collective past its deadline is
/// reported by every rank that saw it (ending the job). Returns 1 on error.
int train_collective_outcome(srt_status s, int rank, const char *done);

/// Rank 0's line on the kernels' threads (and the cpu's GEMM library).
void train_print_threads(const train_threads *t, const srt_backend *backend);

/// --profile: rank 0's milliseconds per step by op kind.
void train_print_profile(const srt_profile *p, bool warm_up_left_out);

#endif // SHARDRT_TRAIN_RUN_H
