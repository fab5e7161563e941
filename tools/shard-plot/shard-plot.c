// shard-plot: a training curve from the driver's --metrics JSONL as an SVG
// picture: loss and eval loss against the step (left axis), the learning
// rate on a second axis (right), with ticks, labels, a legend and a title.
//   shard-plot metrics.jsonl [-o curve.svg] [--title TEXT]
#include <jansson.h>
#include <float.h>
#include <math.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "shardrt/output.h"

typedef struct {
  double step, loss, eval, lr; // NAN when absent
} point;

typedef struct {
  point *p;
  size_t n, cap;
} series;

static double field(json_t *o, const char *key) {
  json_t *v = json_object_get(o, key);
  return json_is_number(v) ? json_number_value(v) : NAN;
}

// Reads every line of `path`; a later line of the same step (a resumed run
// that repeated it) replaces the earlier one. A line that is no record (a
// fragment cut off by a full disk or a kill, with the next run's record
// after it) is left out with a warning naming the file and the line: the
// rest of the run still draws. Returns -1 with a message when no line is a
// record.
static int read_metrics(const char *path, series *s) {
  FILE *f = fopen(path, "r");
  if (!f) {
    fprintf(stderr, "shard-plot: cannot read '%s'\n", path);
    return -1;
  }
  char *line = NULL;
  size_t cap = 0, no = 0;
  ssize_t len;
  int rc = 0;
  size_t bad = 0;
  while (!rc && (len = getline(&line, &cap, f)) >= 0) {
    ++no;
    if (strspn(line, " \t\r\n") == (size_t)len)
      continue;
    json_error_t je;
    json_t *o = json_loadb(line, (size_t)len, 0, &je);
    point q = {field(o, "step"), field(o, "loss"), field(o, "eval_loss"), field(o, "lr")};
    if (!o && line[len - 1] != '\n') { // a last line cut off (a crash mid-append)
      fprintf(stderr, "shard-plot: warning: '%s' line %zu is incomplete: left out\n", path, no);
    } else if (!json_is_object(o) || !isfinite(q.step)) {
      fprintf(stderr, "shard-plot: warning: '%s' line %zu: %s: left out\n", path, no,
              o ? "an object with a numeric \"step\" is needed" : je.text);
      ++bad;
    } else {
      size_t k = s->n;
      while (k > 0 && s->p[k - 1].step >= q.step) // keep the steps in order
        --k;
      if (k < s->n && s->p[k].step == q.step) {
        s->p[k] = q; // a resumed run repeated the step: its later line wins
      } else {
        if (s->n == s->cap) {
          size_t more = s->cap ? 2 * s->cap : 256;
          point *grown = realloc(s->p, more * sizeof *grown);
          if (!grown) {
            fprintf(stderr, "shard-plot: out of memory\n");
            rc = -1;
            json_decref(o);
            break;
          }
          s->p = grown;
          s->cap = more;
        }
        s->n = k; // a resumed run from an earlier step drops the later ones
        s->p[s->n++] = q;
      }
    }
    json_decref(o);
  }
  free(line);
  fclose(f);
  if (!rc && !s->n) {
    if (bad)
      fprintf(stderr, "shard-plot: '%s' has no steps: none of its %zu non-empty line%s is a "
              "record\n", path, bad, bad == 1 ? "" : "s");
    else
      fprintf(stderr, "shard-plot: '%s' has no steps\n", path);
    rc = -1;
  }
  size_t finite = 0;
  for (size_t i = 0; !rc && i < s->n; ++i)
    finite += isfinite(s->p[i].loss) != 0;
  if (!rc && !finite) { // an empty frame would look like a drawing bug
    fprintf(stderr,
            "shard-plot: '%s': none of its %zu steps has a finite loss (every \"loss\" is null "
            "or missing): nothing to draw\n",
            path, s->n);
    rc = -1;
  }
  return rc;
}

// Spans are taken as hi/2 - lo/2, which cannot overflow where hi - lo can
// (losses of 1e308 from a diverged run still draw).

// A "nice" tick spacing (1, 2 or 5 x 10^k) for about `count` ticks over a
// span of twice `half_span`.
static double tick_step(double half_span, int count) {
  double raw = half_span / (count / 2.0), mag = pow(10, floor(log10(raw))), r = raw / mag;
  return (r < 1.5 ? 1 : r < 3.5 ? 2 : r < 7.5 ? 5 : 10) * mag;
}

typedef struct {
  double lo, hi;
} range;

static range range_of(const series *s, size_t offset) {
  range r = {INFINITY, -INFINITY};
  for (size_t i = 0; i < s->n; ++i) {
    double v = *(const double *)((const char *)&s->p[i] + offset);
    if (isfinite(v)) {
      r.lo = v < r.lo ? v : r.lo;
      r.hi = v > r.hi ? v : r.hi;
    }
  }
  if (r.lo > r.hi)
    return (range){0, 1};
  double half = r.hi / 2 - r.lo / 2, pad = half * 0.1;
  if (half < 0.5e-12 * (fabs(r.hi) + 1e-30) || r.hi == r.lo) // a flat line
    pad = r.hi ? fabs(r.hi) * 0.1 : 1;
  return (range){fmax(r.lo - pad, -DBL_MAX), fmin(r.hi + pad, DBL_MAX)};
}

enum { W = 900, H = 520, L = 80, R = 90, T = 50, B = 60 }; // picture and margins, px

// Where v falls in r, 0 to 1.
static double at(range r, double v) { return (v / 2 - r.lo / 2) / (r.hi / 2 - r.lo / 2); }
static double sx(range r, double v) { return L + at(r, v) * (W - L - R); }
static double sy(range r, double v) { return H - B - at(r, v) * (H - T - B); }

// XML-escapes `s` into f.
static void text(FILE *f, const char *s) {
  for (; *s; ++s)
    switch (*s) {
    case '<': fputs("&lt;", f); break;
    case '>': fputs("&gt;", f); break;
    case '&': fputs("&amp;", f); break;
    case '"': fputs("&quot;", f); break;
    default: fputc(*s, f);
    }
}

// Ticks and their labels along the bottom (x), left or right (y) axis.
static void ticks(FILE *f, range r, char side, const char *color) {
  double step = tick_step(r.hi / 2 - r.lo / 2, side == 'x' ? 8 : 6);
  int n = 0; // at most a few dozen, even where v + step rounds near DBL_MAX
  for (double v = ceil(r.lo / step) * step; n++ < 40 && isfinite(v) && at(r, v) <= 1 + 1e-9;
       v += step) {
    double a = fabs(v) < 1e-12 * step ? 0 : v;
    if (side == 'x')
      fprintf(f, "<line x1='%.1f' y1='%d' x2='%.1f' y2='%d' stroke='#ddd'/>"
                 "<text x='%.1f' y='%d' text-anchor='middle'>%g</text>\n",
              sx(r, a), T, sx(r, a), H - B, sx(r, a), H - B + 18, a);
    else if (side == 'l')
      fprintf(f, "<line x1='%d' y1='%.1f' x2='%d' y2='%.1f' stroke='#ddd'/>"
                 "<text x='%d' y='%.1f' text-anchor='end' fill='%s'>%.4g</text>\n",
              L, sy(r, a), W - R, sy(r, a), L - 6, sy(r, a) + 4, color, a);
    else
      fprintf(f, "<text x='%d' y='%.1f' fill='%s'>%.3g</text>\n", W - R + 6, sy(r, a) + 4,
              color, a);
  }
}

// A polyline of the finite values at `offset` in each point.
static void line(FILE *f, const series *s, range xr, range yr, size_t offset, const char *color,
                 bool dots) {
  fprintf(f, "<polyline fill='none' stroke='%s' stroke-width='2' points='", color);
  for (size_t i = 0; i < s->n; ++i) {
    double v = *(const double *)(const void *)((const char *)&s->p[i] + offset);
    if (isfinite(v))
      fprintf(f, "%.1f,%.1f ", sx(xr, s->p[i].step), sy(yr, v));
  }
  fprintf(f, "'/>\n");
  for (size_t i = 0; dots && i < s->n; ++i) {
    double v = *(const double *)(const void *)((const char *)&s->p[i] + offset);
    if (isfinite(v))
      fprintf(f, "<circle cx='%.1f' cy='%.1f' r='3.5' fill='%s'/>\n", sx(xr, s->p[i].step),
              sy(yr, v), color);
  }
}

static void svg(FILE *f, const series *s, const char *title) {
  range xr = range_of(s, offsetof(point, step));
  range lr = range_of(s, offsetof(point, lr));
  // Loss and eval loss share the left axis.
  range a = range_of(s, offsetof(point, loss)), e = range_of(s, offsetof(point, eval));
  bool has_eval = false;
  for (size_t i = 0; i < s->n; ++i)
    has_eval |= isfinite(s->p[i].eval) != 0;
  range yr = has_eval ? (range){a.lo < e.lo ? a.lo : e.lo, a.hi > e.hi ? a.hi : e.hi} : a;
  fprintf(f, "<?xml version='1.0' encoding='UTF-8'?>\n"
             "<svg xmlns='http://www.w3.org/2000/svg' width='%d' height='%d' viewBox='0 0 %d %d' "
             "font-family='sans-serif' font-size='12'>\n"
             "<rect width='100%%' height='100%%' fill='white'/>\n", W, H, W, H);
  fprintf(f, "<text x='%d' y='28' text-anchor='middle' font-size='16'>", W / 2);
  text(f, title);
  fprintf(f, "</text>\n");
  ticks(f, xr, 'x', "black");
  ticks(f, yr, 'l', "#1f77b4");
  ticks(f, lr, 'r', "#7f7f7f");
  fprintf(f, "<rect x='%d' y='%d' width='%d' height='%d' fill='none' stroke='black'/>\n", L, T,
          W - L - R, H - T - B);
  line(f, s, xr, lr, offsetof(point, lr), "#7f7f7f", false);
  line(f, s, xr, yr, offsetof(point, loss), "#1f77b4", false);
  if (has_eval)
    line(f, s, xr, yr, offsetof(point, eval), "#d62728", true);
  fprintf(f, "<text x='%d' y='%d' text-anchor='middle'>step</text>\n"
             "<text x='18' y='%d' text-anchor='middle' fill='#1f77b4' "
             "transform='rotate(-90 18 %d)'>loss</text>\n"
             "<text x='%d' y='%d' text-anchor='middle' fill='#7f7f7f' "
             "transform='rotate(90 %d %d)'>learning rate</text>\n",
          (L + W - R) / 2, H - 18, (T + H - B) / 2, (T + H - B) / 2, W - 20, (T + H - B) / 2,
          W - 20, (T + H - B) / 2);
  // The legend, top right inside the frame.
  int lx = W - R - 150, ly = T + 16;
  fprintf(f, "<line x1='%d' y1='%d' x2='%d' y2='%d' stroke='#1f77b4' stroke-width='2'/>"
             "<text x='%d' y='%d'>training loss</text>\n", lx, ly, lx + 24, ly, lx + 30, ly + 4);
  if (has_eval)
    fprintf(f, "<line x1='%d' y1='%d' x2='%d' y2='%d' stroke='#d62728' stroke-width='2'/>"
               "<text x='%d' y='%d'>eval loss</text>\n", lx, ly + 18, lx + 24, ly + 18, lx + 30,
            ly + 22);
  fprintf(f, "<line x1='%d' y1='%d' x2='%d' y2='%d' stroke='#7f7f7f' stroke-width='2'/>"
             "<text x='%d' y='%d'>learning rate</text>\n</svg>\n", lx, ly + 36, lx + 24, ly + 36,
          lx + 30, ly + 40);
}

static const char USAGE[] =
    "usage: shard-plot METRICS.jsonl [-o CURVE.svg|-] [--title TEXT]\n"
    "  draws loss, eval loss and the lr of train --metrics (default output: METRICS.svg;\n"
    "  -o -: standard output, the report then on standard error)\n";

static int usage(const char *problem, const char *word) {
  if (problem)
    fprintf(stderr, "shard-plot: %s '%s'\n", problem, word);
  fputs(USAGE, stderr);
  return 1;
}

int main(int argc, char **argv) {
  const char *in = NULL, *outp = NULL, *title = NULL;
  for (int i = 1; i < argc; ++i) {
    if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
      fputs(USAGE, stdout);
      return 0;
    }
    const char **v = !strcmp(argv[i], "-o") ? &outp : !strcmp(argv[i], "--title") ? &title : NULL;
    if (v && i + 1 >= argc)
      return usage("a value is needed after", argv[i]);
    if (v && *v)
      return usage("given twice:", argv[i]);
    if (v)
      *v = argv[++i];
    else if (argv[i][0] == '-' && argv[i][1])
      return usage("unknown flag", argv[i]);
    else if (in)
      return usage("a second input", argv[i]);
    else
      in = argv[i];
  }
  if (!in || !*in)
    return usage("no input given: expected", "METRICS.jsonl");
  char *defaulted = NULL;
  if (!outp) { // METRICS.jsonl -> METRICS.svg
    size_t n = strlen(in);
    size_t stem = n > 6 && !strcmp(in + n - 6, ".jsonl") ? n - 6 : n;
    defaulted = malloc(stem + 5);
    if (!defaulted)
      return 1;
    memcpy(defaulted, in, stem);
    strcpy(defaulted + stem, ".svg");
    outp = defaulted;
  }
  int rc = 1;
  series s = {0};
  bool to_stdout = srt_output_is_stdout(outp); // the report then goes to stderr
  if (!*outp || srt_same_file(in, outp)) {
    usage(!*outp ? "empty path for" : "the output is the input:", !*outp ? "-o" : outp);
    goto done;
  }
  if (read_metrics(in, &s))
    goto done;
  char *buf = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&buf, &len);
  if (!f)
    goto done;
  svg(f, &s, title ? title : in);
  fclose(f);
  srt_status st = srt_write_file("picture", outp, buf, len);
  free(buf);
  if (st) {
    fprintf(stderr, "shard-plot: %s\n", srt_status_message(st));
    srt_status_free(st);
    goto done;
  }
  fprintf(to_stdout ? stderr : stdout, "shard-plot: %zu steps from '%s' drawn to '%s'\n", s.n,
          in, outp);
  rc = 0;
done:
  free(s.p);
  free(defaulted);
  return rc;
}
