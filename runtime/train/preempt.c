// Preemption (issue 44): SIGTERM, SIGINT, SIGHUP and SIGUSR1 (Slurm's
// --signal warning) ask the run to stop. They are blocked in every thread
// from before MPI_Init and taken by one watcher thread (sigwait), so no
// system call of MPI, the kernels or the writers is ever interrupted by
// them; the watcher only records the request. At each step boundary the
// ranks agree (an all-reduce) whether any of them got one, since a kill of
// one process reaches that rank alone, so every rank stops after the same
// step. The step finished last is then saved as at a save point (--save,
// --export) and every rank exits with TRAIN_EXIT_PREEMPTED. A second
// signal ends the process at once with 128 + its number, as a shell
// reports a process a signal killed; what was saved before stays complete
// (checkpoints are replaced by a rename).
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <time.h>
#include <unistd.h>

#include "shardrt/collectives.h"
#include "run.h"

static atomic_int g_signal;  // the first stop request (0: none)
static atomic_bool g_stopped; // the stop is saved: the run is exiting
static sigset_t g_waited;     // the stop signals not ignored at the start

static const int kSignals[] = {SIGTERM, SIGINT, SIGHUP, SIGUSR1};

static double monotonic_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

// The watcher: records the first request; a later one ends the process. A
// repeat within a second is the same request: Ctrl-C reaches mpirun and
// every rank of its process group, and mpirun forwards it as SIGTERM. Once
// the stop is saved, further requests change nothing: mpirun sends SIGTERM
// to the ranks still finalising when one has exited non-zero.
static void *watch(void *unused) {
  double first = 0;
  for (;;) {
    int signo = 0;
    if (sigwait(&g_waited, &signo) != 0 || atomic_load(&g_stopped))
      continue;
    if (!atomic_load(&g_signal)) {
      first = monotonic_s();
      atomic_store(&g_signal, signo);
    } else if (monotonic_s() - first >= 1.0) {
      _exit(128 + signo);
    }
  }
  return NULL;
}

void train_block_signals(void) {
  sigset_t set;
  sigemptyset(&set);
  for (size_t i = 0; i < sizeof kSignals / sizeof *kSignals; ++i)
    sigaddset(&set, kSignals[i]);
  pthread_sigmask(SIG_BLOCK, &set, NULL);
}

void train_catch_signals(void) {
  sigemptyset(&g_waited);
  for (size_t i = 0; i < sizeof kSignals / sizeof *kSignals; ++i) {
    struct sigaction old;
    // One ignored at the start stays ignored (nohup's SIGHUP).
    if (sigaction(kSignals[i], NULL, &old) == 0 && old.sa_handler != SIG_IGN)
      sigaddset(&g_waited, kSignals[i]);
  }
  pthread_t t;
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
  if (pthread_create(&t, &attr, watch, NULL) != 0) // then the default actions
    pthread_sigmask(SIG_UNBLOCK, &g_waited, NULL);
  pthread_attr_destroy(&attr);
}

static const char *signal_name(int signo) {
  return signo == SIGTERM ? "SIGTERM"
         : signo == SIGINT ? "SIGINT"
         : signo == SIGHUP ? "SIGHUP"
         : signo == SIGUSR1 ? "SIGUSR1"
                            : "a signal";
}

// Rank 0's line on the stop: the signal, the step, what holds it.
static void print_stop(const train_run *r, int signo, int64_t done, bool ran, int failed) {
  const train_options *o = &r->o;
  char where[PATH_MAX + 96] = "";
  char stepped[PATH_MAX];
  const char *target = o->save;
  if (o->save && o->keep_last > 0 && !train_step_path(o->save, done, stepped, sizeof stepped))
    target = stepped;
  if (failed)
    snprintf(where, sizeof where, "the save failed (above): the last complete checkpoint is "
                                  "the one saved before");
  else if (o->save && ran)
    snprintf(where, sizeof where, "checkpoint saved to '%s' (step %lld)", target,
             (long long)done);
  else if (o->export_dir && ran)
    snprintf(where, sizeof where, "exported to '%s' (step %lld)", o->export_dir,
             (long long)done);
  else if (o->save || o->export_dir)
    snprintf(where, sizeof where, "no step ran since the start: nothing new to save");
  else
    snprintf(where, sizeof where, "nothing saved (no --save)");
  printf("train: %s received: %s %lld, %s; exiting with status %d\n", signal_name(signo),
         ran ? "finished step" : "stopped before step", (long long)(ran ? done : done + 1), where,
         failed ? 1 : TRAIN_EXIT_PREEMPTED);
  fflush(stdout);
}

int train_preempted(train_run *r, int64_t done) {
  int32_t signo = (int32_t)atomic_load(&g_signal);
  srt_status s = srt_all_reduce(srt_context_group(r->ctx, SRT_GROUP_WORLD), &signo, 1, SRT_I32,
                                SRT_REDUCE_MAX);
  if (s) {
    train_report(s, r->rank);
    return 1;
  }
  if (!signo)
    return 0;
  r->stop_signal = signo;
  bool ran = done > r->state_at_start;
  // A step that was a save point is saved already.
  int failed = ran && !train_is_save_point(&r->o, done) ? train_save_outputs(r, done) : 0;
  atomic_store(&g_stopped, !failed);
  if (r->rank == 0)
    print_stop(r, signo, done, ran, failed);
  return failed;
}
