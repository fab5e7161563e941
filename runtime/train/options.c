// Command-line options of the training driver: every flag described once,
// in kFlags (name, value, reader, field, default, help); the usage text,
// the defaults and the parser are made from that table. Values are read
// strictly (shardrt/args.h, as the tools read theirs), given as the next
// argument or after '=' ("--steps=5"); errors name the flag and the value.
// The checks between flags are options_check.c's.
#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "shardrt/args.h"
#include "shardrt/checkpoint.h"
#include "train_internal.h"

typedef struct train_flag train_flag;

/// A flag's reader: stores value `v` into *o, or the flag's unset state
/// when `v` is NULL (a flag without a default). Errors:
/// SRT_INVALID_ARGUMENT naming the flag and the value.
typedef srt_status (*train_flag_reader)(const train_flag *f, const char *v, train_options *o);

/// One flag: what the usage shows, how it is read, where it goes.
struct train_flag {
  const char *name;         ///< "--steps"
  const char *value;        ///< the value's name in the usage ("K"); NULL: a switch
  train_flag_reader read;   ///< the reader (read_int, read_path, ...)
  size_t field;             ///< offsetof the train_options field of the generic readers
  int64_t min;              ///< read_int: the least value taken
  const char *def;          ///< the default, spelt as on the command line; NULL: unset
  unsigned given;           ///< TRAIN_GIVEN_* bit set when it is on the command line
  const char *help;         ///< what it does; "\n" starts an indented line
};

#define F(field) offsetof(train_options, field)

static srt_status read_path(const train_flag *f, const char *v, train_options *o);
static srt_status read_int(const train_flag *f, const char *v, train_options *o);
static srt_status read_float(const train_flag *f, const char *v, train_options *o);
static srt_status read_double(const train_flag *f, const char *v, train_options *o);
static srt_status read_switch(const train_flag *f, const char *v, train_options *o);
static srt_status read_steps(const train_flag *f, const char *v, train_options *o);
static srt_status read_lr(const train_flag *f, const char *v, train_options *o);
static srt_status read_schedule(const train_flag *f, const char *v, train_options *o);
static srt_status read_betas(const train_flag *f, const char *v, train_options *o);
static srt_status read_norm_type(const train_flag *f, const char *v, train_options *o);
static srt_status read_timeout(const train_flag *f, const char *v, train_options *o);
static srt_status read_threads(const train_flag *f, const char *v, train_options *o);
static srt_status read_export(const train_flag *f, const char *v, train_options *o);
static srt_status read_export_dtype(const train_flag *f, const char *v, train_options *o);
static srt_status read_size(const train_flag *f, const char *v, train_options *o);

// The flags, in the usage's order.
static const train_flag kFlags[] = {
    {"--data", "TOKENS", read_path, F(data), 0, NULL, 0,
     "a token file (shard-tokens): step k trains on its k-th window of batch x seq\n"
     "tokens, or on its k-th batch of packed documents (a version 2 file);\n"
     "required unless --batch-file"},
    {"--batch-file", "FILE", read_path, F(batch_file), 0, NULL, 0,
     "safetensors with input_ids and labels, I64 [batch, seq] (labels may hold\n"
     "-100, ignored by the loss), and optionally position_ids (I64) and either\n"
     "attention_mask (0/1, read as transformers does) or segment_ids (I64, each\n"
     "token's document, -1 padding); used for every step instead of token-file\n"
     "batches; any other tensor is refused"},
    {"--steps", "K", read_steps, F(steps), 1, NULL, 0,
     "the last step to run, required (a resumed run continues to K)"},
    {"--lr", "F", read_lr, 0, 0, NULL, TRAIN_GIVEN_LR,
     "the peak learning rate, required (a resume may take the recorded one:\n"
     "see --lr-schedule)"},
    {"--max-grad-norm", "F", read_float, F(max_grad_norm), 0, NULL, 0,
     "the total gradient norm clipped to, required; <= 0 disables clipping"},
    {"--norm-type", "2|inf|p", read_norm_type, F(norm_type), 0, "2", 0,
     "the norm of the clipping"},
    {"--betas", "B1,B2", read_betas, 0, 0, "0.9,0.999", 0, "AdamW's betas, each in [0, 1)"},
    {"--eps", "E", read_float, F(eps), 0, "1e-8", 0, "AdamW's epsilon, > 0"},
    {"--weight-decay", "W", read_float, F(weight_decay), 0, "0.01", 0,
     "AdamW's decoupled weight decay, >= 0 (torch's default value)"},
    {"--lr-schedule", "constant|linear|cosine|wsd", read_schedule, 0, 0, "constant",
     TRAIN_GIVEN_KIND,
     "the lr of AdamW step s (skipped steps do not count): a linear warmup to\n"
     "--lr over --warmup-steps, then constant, or linear / cosine to --min-lr at\n"
     "step --lr-decay-steps, or wsd: stable, then linear to --min-lr over the last\n"
     "--decay-fraction of the steps after the warmup. A checkpoint records the\n"
     "schedule: a resumed run takes the recorded value of every schedule flag not\n"
     "given (--lr too), and one given with another value is refused unless\n"
     "--override-lr-schedule (then the flags given, and the defaults, rule)"},
    {"--warmup-steps", "N", read_int, F(schedule.warmup), 0, "0", TRAIN_GIVEN_WARMUP,
     "the steps of the linear warmup to --lr"},
    {"--min-lr", "F", read_double, F(schedule.min_lr), 0, "0", TRAIN_GIVEN_MIN_LR,
     "the lr linear, cosine and wsd decay to"},
    {"--lr-decay-steps", "N", read_int, F(schedule.decay_steps), 1, NULL,
     TRAIN_GIVEN_DECAY_STEPS, "the step the decay reaches --min-lr (default --steps)"},
    {"--decay-fraction", "F", read_double, F(schedule.decay_fraction), 0, "0.1",
     TRAIN_GIVEN_DECAY_FRACTION, "wsd's share of the steps after the warmup spent decaying"},
    {"--override-lr-schedule", NULL, read_switch, F(override_lr_schedule), 0, NULL, 0,
     "a resumed run follows the schedule flags given, not its checkpoint's record"},
    {"--load", "CKPT", read_path, F(load), 0, NULL, 0,
     "the checkpoint to start from: a --save file, an --export DIR (resumes), or\n"
     "a Hugging Face model file or folder (weights; a fresh optimizer)"},
    {"--save", "CKPT", read_path, F(save), 0, NULL, 0,
     "where the checkpoint goes (atomically) after the last step and every\n"
     "--save-every steps, with its optimizer file beside it; SIGTERM, SIGINT,\n"
     "SIGHUP or SIGUSR1 save the step finished last and exit 75 (see\n"
     "docs/multi-node.md)"},
    {"--save-every", "N", read_int, F(save_every), 0, "0", 0,
     "save (and export) every N steps; 0: only after the last"},
    {"--keep-last", "K", read_int, F(keep_last), 1, NULL, 0,
     "every save goes to its own file, CKPT with -stepNNNNNNNN before\n"
     ".safetensors; after each, only the K newest stay (never the --load\n"
     "checkpoint)"},
    {"--seed", "S", read_int, F(seed), 0, "0", 0, "the seed of the initial weights"},
    {"--log-every", "N", read_int, F(log_every), 1, "1", 0,
     "print every N-th step's line (the last step and skipped ones always)"},
    {"--dump", "FILE", read_path, F(dump), 0, NULL, 0,
     "after the last step, a safetensors file with loss, grad_norm (total, before\n"
     "clipping), grad_norm.<param> (each, before clipping), the updated parameters\n"
     "(whole, HF names) and, for programs compiled with shard-compile\n"
     "--keep-logits, logits [batch, seq, vocab]"},
    {"--max-skipped", "N", read_int, F(max_skipped), 0, "5", 0,
     "a step whose gradient norm is not finite changes nothing; after N such\n"
     "steps in a row the run stops with an error and saves nothing (0: never\n"
     "stop)"},
    {"--timeout", "SECONDS", read_timeout, F(timeout_s), 0, "600", 0,
     "a collective that has not completed after SECONDS (a rank stalled or died)\n"
     "ends the whole job with exit 1, naming the collective, the step, the\n"
     "ranks that never arrived and the last complete checkpoint (0: wait\n"
     "forever)"},
    {"--threads", "N", read_threads, F(threads), 1, NULL, 0,
     "threads of the cpu kernels per rank (default: OMP_NUM_THREADS if set, else\n"
     "the node's cores / the ranks on the node, at most the cores the rank is\n"
     "bound to)"},
    {"--profile", NULL, read_switch, F(profile), 0, NULL, 0,
     "after the run, milliseconds per step by op kind (GEMM, attention,\n"
     "elementwise, loss, collectives, optimizer) and the step total"},
    {"--eval-data", "TOKENS", read_path, F(eval_data), 0, NULL, 0,
     "held-out tokens: every --eval-every steps the loss (the mean over the scored\n"
     "labels) and perplexity of the program over their first --eval-batches\n"
     "batches, forward only"},
    {"--eval-every", "N", read_int, F(eval_every), 1, NULL, 0,
     "evaluate every N steps (default: only after the last)"},
    {"--eval-batches", "K", read_int, F(eval_batches), 1, "4", 0,
     "the batches of --eval-data an evaluation reads"},
    {"--metrics", "FILE.jsonl", read_path, F(metrics), 0, NULL, 0,
     "one JSON object per step appended (step, loss, grad_norm, lr,\n"
     "tokens_per_s, mfu, step_ms, skipped; eval_loss when evaluated); shard-plot\n"
     "draws it"},
    {"--export", "DIR", read_export, F(export_dir), 0, NULL, 0,
     "a Hugging Face model directory, written (replaced whole) when a --save is\n"
     "and after the last step: config.json, model.safetensors or shards of at\n"
     "most --max-shard-size with model.safetensors.index.json, the tokenizer\n"
     "files beside the compiled config, and optimizer.safetensors (--load DIR\n"
     "resumes from it)"},
    {"--export-dtype", "f32|bf16|f16", read_export_dtype, F(export_dtype), 0, NULL, 0,
     "the dtype of the exported weights (default: the loaded checkpoint's, else\n"
     "the config's, else f32)"},
    {"--max-shard-size", "SIZE", read_size, F(max_shard_bytes), 0, "5GB", 0,
     "the largest export shard: B, KB, MB, GB are powers of 10, KiB, MiB, GiB\n"
     "of 2"},
};

enum { kNumFlags = sizeof kFlags / sizeof *kFlags };
_Static_assert(kNumFlags <= 64, "train_options.given holds one bit per flag");

#define FIELD(o, f, type) ((type *)((char *)(o) + (f)->field))

static srt_status read_path(const train_flag *f, const char *v, train_options *o) {
  *FIELD(o, f, const char *) = v;
  return NULL;
}

static srt_status read_switch(const train_flag *f, const char *v, train_options *o) {
  *FIELD(o, f, bool) = v != NULL;
  return NULL;
}

// An integer of at least f->min into an int64_t field (-1 when unset).
static srt_status parse_int(const char *flag, const char *v, int64_t min, int64_t *out) {
  int64_t x = 0;
  if (srt_args_int(v, &x) != SRT_ARGS_OK)
    return SRT_ERROR(SRT_INVALID_ARGUMENT, "%s: '%s' is not an integer", flag, v);
  if (x < min)
    return SRT_ERROR(SRT_INVALID_ARGUMENT, "%s: %lld is below the minimum %lld", flag,
                     (long long)x, (long long)min);
  *out = x;
  return NULL;
}

static srt_status read_int(const train_flag *f, const char *v, train_options *o) {
  int64_t *out = FIELD(o, f, int64_t); // also --seed's uint64_t: the same object size
  if (!v) {
    *out = -1;
    return NULL;
  }
  return parse_int(f->name, v, f->min, out);
}

static srt_status parse_double(const char *flag, const char *v, double *out) {
  srt_args_error e = srt_args_double(v, out);
  if (e == SRT_ARGS_MALFORMED)
    return SRT_ERROR(SRT_INVALID_ARGUMENT, "%s: '%s' is not a number", flag, v);
  if (e == SRT_ARGS_RANGE)
    return SRT_ERROR(SRT_INVALID_ARGUMENT, "%s: '%s' is out of the range of a double", flag,
                     v);
  return NULL;
}

static srt_status parse_float(const char *flag, const char *v, float *out) {
  double d = 0;
  SRT_RETURN_IF_ERROR(parse_double(flag, v, &d));
  // Finite as a float too: 1e39 is a finite double but an infinite float;
  // and not so small that it rounds to 0 (1e-46).
  if (!isfinite(d) || !isfinite((float)d))
    return SRT_ERROR(SRT_INVALID_ARGUMENT, "%s: '%s' is not a finite float", flag, v);
  if (d != 0 && (float)d == 0)
    return SRT_ERROR(SRT_INVALID_ARGUMENT, "%s: '%s' rounds to 0 as a float", flag, v);
  *out = (float)d;
  return NULL;
}

static srt_status read_float(const train_flag *f, const char *v, train_options *o) {
  float *out = FIELD(o, f, float);
  if (!v) {
    *out = NAN;
    return NULL;
  }
  return parse_float(f->name, v, out);
}

static srt_status read_double(const train_flag *f, const char *v, train_options *o) {
  double *out = FIELD(o, f, double);
  if (!v) {
    *out = NAN;
    return NULL;
  }
  return parse_double(f->name, v, out);
}

static srt_status read_steps(const train_flag *f, const char *v, train_options *o) {
  SRT_RETURN_IF_ERROR(read_int(f, v, o));
  if (o->steps > SRT_CHECKPOINT_MAX_STEP)
    return SRT_ERROR(SRT_INVALID_ARGUMENT, "--steps: %lld is above the largest step %lld",
                     (long long)o->steps, (long long)SRT_CHECKPOINT_MAX_STEP);
  return NULL;
}

static srt_status read_threads(const train_flag *f, const char *v, train_options *o) {
  SRT_RETURN_IF_ERROR(read_int(f, v, o));
  if (o->threads > 4096)
    return SRT_ERROR(SRT_INVALID_ARGUMENT, "--threads: %lld is above 4096",
                     (long long)o->threads);
  return NULL;
}

// --lr: a float for AdamW, the schedule's peak in float64.
static srt_status read_lr(const train_flag *f, const char *v, train_options *o) {
  if (!v) {
    o->lr = NAN;
    o->schedule.lr = 0;
    return NULL;
  }
  SRT_RETURN_IF_ERROR(parse_float(f->name, v, &o->lr));
  return parse_double(f->name, v, &o->schedule.lr);
}

static srt_status read_schedule(const train_flag *f, const char *v, train_options *o) {
  (void)f;
  return train_lr_schedule_parse(v, &o->schedule.kind);
}

static srt_status read_betas(const train_flag *f, const char *v, train_options *o) {
  const char *comma = strchr(v, ',');
  char first[64];
  size_t len = comma ? (size_t)(comma - v) : 0;
  if (!comma || len >= sizeof first)
    return SRT_ERROR(SRT_INVALID_ARGUMENT, "--betas: '%s' is not B1,B2", v);
  memcpy(first, v, len);
  first[len] = 0;
  SRT_RETURN_IF_ERROR(parse_float(f->name, first, &o->beta1));
  SRT_RETURN_IF_ERROR(parse_float(f->name, comma + 1, &o->beta2));
  if (o->beta1 < 0 || o->beta1 >= 1 || o->beta2 < 0 || o->beta2 >= 1)
    return SRT_ERROR(SRT_INVALID_ARGUMENT, "--betas: %g,%g must lie in [0, 1)", o->beta1,
                     o->beta2);
  return NULL;
}

static srt_status read_norm_type(const train_flag *f, const char *v, train_options *o) {
  if (!strcasecmp(v, "inf")) {
    o->norm_type = INFINITY;
    return NULL;
  }
  SRT_RETURN_IF_ERROR(parse_double(f->name, v, &o->norm_type));
  if (!(o->norm_type > 0) || !isfinite(o->norm_type))
    return SRT_ERROR(SRT_INVALID_ARGUMENT, "--norm-type: '%s' is not 'inf' or a p > 0", v);
  return NULL;
}

static srt_status read_timeout(const train_flag *f, const char *v, train_options *o) {
  SRT_RETURN_IF_ERROR(parse_double(f->name, v, &o->timeout_s));
  if (!(o->timeout_s >= 0) || !isfinite(o->timeout_s))
    return SRT_ERROR(SRT_INVALID_ARGUMENT, "--timeout must be >= 0 seconds, got '%s'", v);
  return NULL;
}

// One folder, named without trailing slashes ("e/" is "e"): the value is
// argv's own text, shortened in place.
static srt_status read_export(const train_flag *f, const char *v, train_options *o) {
  char *d = (char *)v;
  for (size_t n = d ? strlen(d) : 0; n > 1 && d[n - 1] == '/';)
    d[--n] = 0;
  return read_path(f, d, o);
}

static srt_status read_export_dtype(const train_flag *f, const char *v, train_options *o) {
  static const struct {
    const char *name;
    srt_dtype dtype;
  } kNames[] = {{"f32", SRT_F32}, {"float32", SRT_F32}, {"bf16", SRT_BF16},
                {"bfloat16", SRT_BF16}, {"f16", SRT_F16}, {"float16", SRT_F16}};
  (void)f;
  o->export_dtype = SRT_DTYPE_COUNT; // unset: the input's
  for (size_t i = 0; v && i < sizeof kNames / sizeof *kNames; ++i)
    if (!strcmp(v, kNames[i].name))
      o->export_dtype = kNames[i].dtype;
  if (v && o->export_dtype == SRT_DTYPE_COUNT)
    return SRT_ERROR(SRT_INVALID_ARGUMENT, "--export-dtype '%s': expected f32, bf16 or f16",
                     v);
  return NULL;
}

// A byte count as transformers' max_shard_size spells it: digits, then B,
// KB, MB, GB (powers of 10) or KiB, MiB, GiB (powers of 2), or nothing.
static srt_status read_size(const train_flag *f, const char *v, train_options *o) {
  static const struct {
    const char *unit;
    int64_t scale;
  } kUnits[] = {{"", 1},          {"B", 1},          {"KB", 1000},          {"MB", 1000000},
                {"GB", 1000000000}, {"KiB", 1 << 10}, {"MiB", 1 << 20},       {"GiB", 1 << 30}};
  char *end = NULL;
  errno = 0;
  long long n = isdigit((unsigned char)*v) ? strtoll(v, &end, 10) : -1;
  if (n > 0 && *end == ' ' && end[1]) // "5 GB", as transformers reads it
    ++end;
  for (size_t i = 0; n > 0 && errno == 0 && i < sizeof kUnits / sizeof *kUnits; ++i)
    if (!strcmp(end, kUnits[i].unit) && n <= INT64_MAX / kUnits[i].scale) {
      *FIELD(o, f, int64_t) = n * kUnits[i].scale;
      return NULL;
    }
  return SRT_ERROR(SRT_INVALID_ARGUMENT,
                   "%s '%s': expected a positive byte count, optionally with B, KB, MB, GB, "
                   "KiB, MiB or GiB (e.g. 5GB; upper case: transformers reads 'gb' as "
                   "gigabits)", f->name, v);
}

const char *train_usage(void) {
  static char text[8192];
  if (text[0])
    return text;
  size_t n = (size_t)snprintf(
      text, sizeof text,
      "usage: [mpirun -np N] ./train (--data TOKENS | --batch-file FILE) --steps K --lr F\n"
      "         --max-grad-norm F [FLAG VALUE | FLAG=VALUE | SWITCH]...\n"
      "  N must be the program's dp x cp x tp (a program of one rank runs without mpirun).\n");
  for (int k = 0; k < kNumFlags && n < sizeof text; ++k) {
    const train_flag *f = &kFlags[k];
    n += (size_t)snprintf(text + n, sizeof text - n, "  %s%s%s%s%s%s\n    ", f->name,
                          f->value ? " " : "", f->value ? f->value : "",
                          f->def ? "  [default " : "", f->def ? f->def : "", f->def ? "]" : "");
    for (const char *h = f->help; *h && n + 8 < sizeof text; ++h) {
      text[n++] = *h;
      if (*h == '\n')
        n += (size_t)snprintf(text + n, sizeof text - n, "    ");
    }
    n += (size_t)snprintf(text + n, sizeof text - n, ".\n");
  }
  return text;
}

bool train_option_given(const train_options *o, const char *flag) {
  for (int k = 0; k < kNumFlags; ++k)
    if (!strcmp(kFlags[k].name, flag))
      return (o->given >> k) & 1;
  return false;
}

// Reads the flag at argv[*i] (and its value, the next argument unless
// attached with '='), advancing *i past what it used. `values` holds what
// each flag was given so far, to refuse a second value.
static srt_status read_argument(int argc, char **argv, int *i, const char **values,
                                train_options *o) {
  static const char *names[kNumFlags + 1];
  for (int k = 0; k < kNumFlags; ++k)
    names[k] = kFlags[k].name;
  const char *a = argv[*i];
  if (a[0] != '-')
    return SRT_ERROR(SRT_INVALID_ARGUMENT,
                     "unexpected argument '%s'%s%s (flags take their value as the next "
                     "argument or after '='; --profile and --override-lr-schedule take none)",
                     a, *i > 1 ? " after " : "", *i > 1 ? argv[*i - 1] : "");
  int k = srt_args_find(names, kNumFlags, a);
  if (k < 0)
    return SRT_ERROR(SRT_INVALID_ARGUMENT, "unknown flag '%s'", a);
  const train_flag *f = &kFlags[k];
  const char *v = srt_args_attached(a);
  if (!f->value && v)
    return SRT_ERROR(SRT_INVALID_ARGUMENT, "'%s': %s takes no value", a, f->name);
  if (f->value && !v && *i + 1 >= argc)
    return SRT_ERROR(SRT_INVALID_ARGUMENT, "%s: missing value", a);
  if (f->value && !v)
    v = argv[++*i];
  if (!f->value)
    v = f->name;
  if (values[k])
    return SRT_ERROR(SRT_INVALID_ARGUMENT, "%s given twice ('%s' and '%s')", a, values[k], v);
  values[k] = v;
  o->given |= UINT64_C(1) << k;
  o->schedule_given |= f->given;
  return f->read(f, v, o);
}

srt_status train_parse_options(int argc, char **argv, train_options *o) {
  *o = (train_options){0};
  for (int k = 0; k < kNumFlags; ++k)
    if (kFlags[k].value || kFlags[k].def) // a switch's unset state is the zero
      SRT_RETURN_IF_ERROR(kFlags[k].read(&kFlags[k], kFlags[k].def, o));
  const char *values[kNumFlags] = {0};
  for (int i = 1; i < argc; ++i) {
    if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h"))
      return SRT_ERROR(SRT_INVALID_ARGUMENT, "help requested");
    SRT_RETURN_IF_ERROR(read_argument(argc, argv, &i, values, o));
  }
  return train_check_options(o);
}
