// The after-step phase of a run (train_after_step): what follows a step
// at its points: the dump (last step), the export and the save (save
// points), the evaluation and the --metrics line.
#include <limits.h>
#include <math.h>
#include <stdio.h>

#include "run.h"

// --dump and --export: each attempted, their failures summed.
static int write_outputs(train_run *r, int64_t step, const srt_step_result *res,
                         bool save_point) {
  const train_options *o = &r->o;
  char done[PATH_MAX + 64];
  int failed = 0;
  if (o->dump && res && step == o->steps) {
    snprintf(done, sizeof done, "dumped step %lld to '%s'", (long long)step, o->dump);
    failed |= train_collective_outcome(train_dump(r->ctx, r->p, r->arena, o->dump, res, o, step),
                                       r->rank, done);
  }
  if (o->export_dir && save_point) {
    snprintf(done, sizeof done, "exported '%s' at step %lld", o->export_dir, (long long)step);
    failed |= train_collective_outcome(
        train_export(r->ctx, r->p, r->arena, o, &r->state, &r->input), r->rank, done);
  }
  return failed;
}

// --eval-data at --eval-every steps and the last: the mean loss, printed
// by rank 0 into *loss.
static int evaluate(train_run *r, int64_t step, srt_step_options so, double *loss) {
  const train_options *o = &r->o;
  train_eval ev = {&r->exec, r->p, r->arena, r->backend,
                   r->eval_plan.rows ? &r->eval_plan : NULL,
                   r->cp_stage.rows ? &r->cp_stage : NULL};
  if (train_any_failed(r->ctx, train_evaluate(&ev, r->eval_tokens, o->eval_batches, so, loss)))
    return 1;
  if (r->rank == 0 && isnan(*loss))
    printf("eval step %lld: NO LABELS (every label of the %lld batch%s is -100: nothing "
           "scored)\n",
           (long long)step, (long long)o->eval_batches, o->eval_batches == 1 ? "" : "es");
  else if (r->rank == 0)
    printf("eval step %lld: loss %.9g  ppl %.6g  (%lld batch%s of %lld x %lld tokens)\n",
           (long long)step, *loss, exp(*loss), (long long)o->eval_batches,
           o->eval_batches == 1 ? "" : "es", (long long)r->p->batch, (long long)r->p->seq);
  fflush(stdout);
  return 0;
}

// --save at a save point (a step-numbered file with --keep-last, the older
// ones rotated out).
static int save(train_run *r, int64_t step) {
  const train_options *o = &r->o;
  char stepped[PATH_MAX], done[PATH_MAX + 64];
  const char *target = o->save;
  if (o->keep_last > 0 && !train_step_path(o->save, step, stepped, sizeof stepped))
    target = stepped;
  snprintf(done, sizeof done, "saved '%s' at step %lld", target, (long long)step);
  int bad = train_collective_outcome(
      train_save(r->ctx, r->p, r->arena, target, &r->state, &r->input, r->prev_optim), r->rank,
      done);
  if (!bad)
    train_note_checkpoint(target, step);
  int foreign = 0;
  if (!bad && o->keep_last > 0 && r->rank == 0 &&
      train_rotate(o->save, o->keep_last, o->load, step, r->state.run_id, &foreign))
    printf("train: kept the %lld newest checkpoints of '%s'\n", (long long)o->keep_last,
           o->save);
  if (foreign && !r->told_foreign) { // once: the files stay as long as the run does
    printf("train: note: --keep-last leaves %d step file%s of '%s' that another run "
           "saved (not run %s)\n",
           foreign, foreign == 1 ? "" : "s", o->save, r->state.run_id);
    r->told_foreign = true;
  }
  return bad;
}

bool train_is_save_point(const train_options *o, int64_t step) {
  return (o->save_every > 0 && step % o->save_every == 0) || step == o->steps;
}

int train_save_outputs(train_run *r, int64_t step) {
  const train_options *o = &r->o;
  if (!o->save && !o->export_dir)
    return 0;
  if (train_any_failed(r->ctx, r->backend->to_host(r->device, r->p, r->arena, 0,
                                                   r->p->persistent_bytes)))
    return 1;
  int failed = write_outputs(r, step, NULL, true);
  if (o->save)
    failed |= save(r, step);
  return failed;
}

int train_after_step(train_run *r, int64_t step, const srt_step_result *res,
                     const train_step_metrics *m, srt_step_options so) {
  const train_options *o = &r->o;
  bool save_point = train_is_save_point(o, step);
  // The host copy of the persistent region is read by dumps and saves.
  bool to_host = (o->dump && step == o->steps) || ((o->save || o->export_dir) && save_point);
  if (to_host &&
      train_any_failed(r->ctx, r->backend->to_host(r->device, r->p, r->arena, 0,
                                                   r->p->persistent_bytes)))
    return 1;
  int failed = write_outputs(r, step, res, save_point);
  double eval_loss = 0;
  bool evaluated = r->eval_tokens &&
                   ((o->eval_every > 0 && step % o->eval_every == 0) || step == o->steps);
  if (evaluated && evaluate(r, step, so, &eval_loss)) // keeps a failed write failed
    return 1;
  if (r->metrics && train_metrics_write(r->metrics, m, evaluated ? &eval_loss : NULL)) {
    fprintf(stderr, "train: --metrics '%s': write failed at step %lld\n", o->metrics,
            (long long)step);
    fclose(r->metrics);
    r->metrics = NULL; // training goes on; the metrics stop
  }
  if (o->save && save_point)
    failed |= save(r, step);
  return failed;
}
