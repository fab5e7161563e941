// Training metrics: the model FLOPs of a step (torchtitan's count, which
// the compiler puts in the program table), the peak (the CPU's GEMM rate
// measured at start, a GPU's datasheet), MFU, the console line of each step
// and the --metrics JSONL record.
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "shardrt/kernels.h"
#include "train_internal.h"

double train_flops_per_token(const srt_program *p) { return p->flops_per_token; }

double train_peak_flops(const srt_backend *backend, void *device, char *source, size_t size) {
  double mine = 0;
  snprintf(source, size, "%s", "unknown");
  if (backend->peak_flops) {
    srt_status s = backend->peak_flops(device, &mine, source, size);
    if (s) {
      char buf[1024];
      fprintf(stderr, "train: warning: no peak for MFU: %s\n", srt_status_format(s, buf, sizeof buf));
      srt_status_free(s);
      mine = 0;
    }
  }
  double sum = mine, any_unknown = mine > 0 ? 0 : 1;
  train_plane_allreduce(&sum, SRT_F64, SRT_REDUCE_SUM);
  train_plane_allreduce(&any_unknown, SRT_F64, SRT_REDUCE_MAX);
  return any_unknown > 0 ? 0 : sum;
}

// 12345 -> "12.3k", as the loggers of torchtitan and Megatron shorten.
static void human(double v, char *buf, size_t size) {
  const char *unit[] = {"", "k", "M", "G"};
  int u = 0;
  while (v >= 1000 && u < 3) {
    v /= 1000;
    ++u;
  }
  snprintf(buf, size, u ? "%.3g%s" : "%.0f%s", v, unit[u]);
}

static void duration(double s, char *buf, size_t size) {
  if (!(s >= 0) || !isfinite(s))
    snprintf(buf, size, "?");
  else if (s < 60)
    snprintf(buf, size, "%.0fs", s);
  else if (s < 3600)
    snprintf(buf, size, "%.0fm", s / 60);
  else
    snprintf(buf, size, "%.1fh", s / 3600);
}

void train_print_step(const train_step_metrics *m) {
  char tps[32], eta[32], mfu[32];
  human(m->tokens_per_s, tps, sizeof tps);
  duration(m->eta_s, eta, sizeof eta);
  if (m->mfu >= 0)
    snprintf(mfu, sizeof mfu, "%.1f%%", 100 * m->mfu);
  else
    snprintf(mfu, sizeof mfu, "-");
  char loss[64];
  if (m->no_labels) // the loss's mean over no label: 0 would read as a perfect fit
    snprintf(loss, sizeof loss, "-");
  else
    snprintf(loss, sizeof loss, "%.9g", (double)m->loss);
  printf("step %lld/%lld | loss %s | norm %.9g | lr %.6g | %.1f ms | MFU %s | %s tok/s | "
         "eta %s%s%s\n",
         (long long)m->step, (long long)m->steps, loss, m->grad_norm, m->lr,
         1e3 * m->step_s, mfu, tps, eta, m->skipped ? " | SKIPPED (non-finite grad norm)" : "",
         m->no_labels ? " | NO LABELS (every label is -100: nothing scored)" : "");
  fflush(stdout);
}

// A JSON number, or null for what JSON cannot hold (NaN, infinities).
static void number(FILE *f, const char *key, double v) {
  if (isfinite(v))
    fprintf(f, ", \"%s\": %.9g", key, v);
  else
    fprintf(f, ", \"%s\": null", key);
}

// Whether the regular file `f` was opened on is non-empty and ends without
// a newline, read through a descriptor of its own. Anything else (a device,
// a pipe, a file it cannot read) does not. Not "a+": a stream open for
// reading on a FIFO or pipe made the driver a reader of its own metrics, so
// a reader that went away no longer ended the writes (EPIPE) and a full pipe
// blocked the run for good.
static bool ends_mid_line(FILE *f, const char *path) {
  struct stat st, rs;
  if (fstat(fileno(f), &st) != 0 || !S_ISREG(st.st_mode) || st.st_size == 0)
    return false;
  int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0)
    return false;
  char last = '\n';
  if (fstat(fd, &rs) == 0 && rs.st_dev == st.st_dev && rs.st_ino == st.st_ino &&
      pread(fd, &last, 1, st.st_size - 1) != 1)
    last = '\n';
  close(fd);
  return last != '\n';
}

srt_status train_metrics_open(const char *path, FILE **out) {
  struct stat st;
  if (stat(path, &st) == 0 && S_ISFIFO(st.st_mode)) { // the open waits for a reader
    fprintf(stderr, "train: --metrics '%s' is a FIFO: waiting for its reader\n", path);
    fflush(stderr);
  }
  FILE *f = fopen(path, "a");
  if (!f)
    return SRT_ERROR(SRT_IO, "--metrics '%s': cannot open for appending: %s", path,
                     strerror(errno));
  if (ends_mid_line(f, path) && (fputc('\n', f) == EOF || fflush(f) != 0)) {
    int err = errno;
    fclose(f);
    return SRT_ERROR(SRT_IO, "--metrics '%s': cannot end its cut-off last line: %s", path,
                     strerror(err));
  }
  *out = f;
  return NULL;
}

int train_metrics_write(FILE *f, const train_step_metrics *m, const double *eval_loss) {
  fprintf(f, "{\"step\": %lld", (long long)m->step);
  number(f, "loss", m->no_labels ? NAN : m->loss);
  number(f, "grad_norm", m->grad_norm);
  number(f, "lr", m->lr);
  number(f, "tokens_per_s", m->tokens_per_s);
  number(f, "mfu", m->mfu >= 0 ? m->mfu : NAN);
  number(f, "step_ms", 1e3 * m->step_s);
  fprintf(f, ", \"skipped\": %s", m->skipped ? "true" : "false");
  if (m->no_labels)
    fprintf(f, ", \"no_labels\": true");
  if (eval_loss)
    number(f, "eval_loss", *eval_loss);
  fprintf(f, "}\n");
  return fflush(f) == 0 && !ferror(f) ? 0 : -1;
}
