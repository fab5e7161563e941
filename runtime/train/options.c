// Command-line options of the training driver: flags, defaults, and errors
// that name the flag and the value.
#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

#include "shardrt/checkpoint.h"
#include "shardrt/output.h"
#include "train_internal.h"

const char *train_usage(void) {
  return "usage: [mpirun -np N] ./train (--data TOKENS | --batch-file FILE) --steps K --lr F\n"
         "         --max-grad-norm F [--betas B1,B2] [--eps E] [--weight-decay W]\n"
         "         [--norm-type 2|inf|p] [--load CKPT] [--save CKPT] [--save-every N]\n"
         "         [--seed S] [--log-every N] [--dump FILE] [--max-skipped N]\n"
         "         [--timeout SECONDS] [--threads N] [--profile]\n"
         "         [--lr-schedule constant|linear|cosine|wsd] [--warmup-steps N]\n"
         "         [--min-lr F] [--lr-decay-steps N] [--decay-fraction F]\n"
         "         [--override-lr-schedule]\n"
         "         [--eval-data TOKENS] [--eval-every N] [--eval-batches K]\n"
         "         [--metrics FILE.jsonl] [--keep-last K]\n"
         "         [--export DIR] [--export-dtype f32|bf16|f16] [--max-shard-size SIZE]\n"
         "  N must be the program's dp x tp (a program of one rank runs without mpirun);\n"
         "  TOKENS is a token file (shard-tokens);\n"
         "  K is the last step to run (a resumed run continues to K);\n"
         "  --max-grad-norm <= 0 disables clipping.\n"
         "  --lr-schedule: the lr of AdamW step s (skipped steps do not count): a linear\n"
         "    warmup to --lr over --warmup-steps (0), then constant (the default), or\n"
         "    linear / cosine to --min-lr (0) at step --lr-decay-steps (default --steps),\n"
         "    or wsd: stable, then linear to --min-lr over the last --decay-fraction\n"
         "    (0.1) of the steps after the warmup. A checkpoint records the schedule: a\n"
         "    resumed run takes the recorded value of every schedule flag not given\n"
         "    (--lr too), and one given with another value is refused unless\n"
         "    --override-lr-schedule (then the flags given, and the defaults, rule).\n"
         "  --eval-data TOKENS: held-out tokens; every --eval-every N steps (default:\n"
         "    only after the last) the mean loss and perplexity of the program over\n"
         "    their first --eval-batches K (4) batches, forward only.\n"
         "  --keep-last K: every save goes to its own file, CKPT with -stepNNNNNNNN\n"
         "    before .safetensors; after each, only the K newest stay (never the\n"
         "    --load checkpoint).\n"
         "  --metrics FILE.jsonl: one JSON object per step appended (step, loss,\n"
         "    grad_norm, lr, tokens_per_s, mfu, step_ms, skipped; eval_loss when\n"
         "    evaluated); shard-plot draws it.\n"
         "  --max-skipped N: a step whose gradient norm is not finite changes nothing;\n"
         "    after N such steps in a row the run stops with an error and saves\n"
         "    nothing (default 5; 0: never stop).\n"
         "  --timeout SECONDS: a collective that has not completed after SECONDS (a\n"
         "    rank stalled or died) ends the whole job with exit 1, naming the\n"
         "    collective, the step and the ranks that never arrived (default 600;\n"
         "    0: wait forever).\n"
         "  --threads N: threads of the cpu kernels per rank (default: OMP_NUM_THREADS\n"
         "    if set, else the node's cores / the ranks on the node, at most the cores\n"
         "    the rank is bound to).\n"
         "  --profile: after the run, milliseconds per step by op kind (GEMM,\n"
         "    attention, elementwise, loss, collectives, optimizer) and the step total.\n"
         "  --batch-file FILE: safetensors with input_ids and labels, I64 [batch, seq]\n"
         "    (labels may hold -100, ignored by the loss), used for every step instead\n"
         "    of token-file batches.\n"
         "  --dump FILE: after the last step, a safetensors file with loss, grad_norm\n"
         "    (total, before clipping), grad_norm.<param> (each, before clipping), the\n"
         "    updated parameters (whole, HF names) and, for programs compiled with\n"
         "    shard-compile --keep-logits, logits [batch, seq, vocab].\n"
         "  --export DIR: a Hugging Face model directory, written (replaced whole) when a\n"
         "    --save is and after the last step: config.json, model.safetensors or\n"
         "    shards of at most --max-shard-size (default 5GB; B, KB, MB, GB are powers\n"
         "    of 10, KiB, MiB, GiB of 2) with model.safetensors.index.json, the\n"
         "    tokenizer files beside the compiled config, and optimizer.safetensors\n"
         "    (--load DIR resumes from it). Weights are in --export-dtype, by default\n"
         "    the loaded checkpoint's dtype, else the config's, else f32.\n";
}

static srt_status parse_double(const char *flag, const char *v, double *out) {
  char *end;
  errno = 0;
  double d = strtod(v, &end);
  // strtod alone would skip leading spaces (" 0.1").
  if (!*v || isspace((unsigned char)*v) || *end)
    return SRT_ERROR(SRT_INVALID_ARGUMENT, "%s: '%s' is not a number", flag, v);
  if (errno == ERANGE)
    return SRT_ERROR(SRT_INVALID_ARGUMENT, "%s: '%s' is out of the range of a double", flag,
                     v);
  *out = d;
  return NULL;
}

static srt_status parse_int(const char *flag, const char *v, int64_t min, int64_t *out) {
  char *end;
  errno = 0;
  long long x = strtoll(v, &end, 10);
  // Digits with an optional '-' only: strtoll alone would take " 5" and "+5".
  bool digits = isdigit((unsigned char)v[0]) || (v[0] == '-' && isdigit((unsigned char)v[1]));
  if (!digits || *end || errno == ERANGE)
    return SRT_ERROR(SRT_INVALID_ARGUMENT, "%s: '%s' is not an integer", flag, v);
  if (x < min)
    return SRT_ERROR(SRT_INVALID_ARGUMENT, "%s: %lld is below the minimum %lld", flag, x,
                     (long long)min);
  *out = x;
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

static srt_status parse_export_dtype(const char *v, srt_dtype *out) {
  static const struct {
    const char *name;
    srt_dtype dtype;
  } kNames[] = {{"f32", SRT_F32}, {"float32", SRT_F32}, {"bf16", SRT_BF16},
                {"bfloat16", SRT_BF16}, {"f16", SRT_F16}, {"float16", SRT_F16}};
  for (size_t i = 0; i < sizeof kNames / sizeof *kNames; ++i)
    if (!strcmp(v, kNames[i].name)) {
      *out = kNames[i].dtype;
      return NULL;
    }
  return SRT_ERROR(SRT_INVALID_ARGUMENT, "--export-dtype '%s': expected f32, bf16 or f16", v);
}

// A byte count as transformers' max_shard_size spells it: digits, then B,
// KB, MB, GB (powers of 10) or KiB, MiB, GiB (powers of 2), or nothing.
static srt_status parse_size(const char *flag, const char *v, int64_t *out) {
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
      *out = n * kUnits[i].scale;
      return NULL;
    }
  return SRT_ERROR(SRT_INVALID_ARGUMENT,
                   "%s '%s': expected a positive byte count, optionally with B, KB, MB, GB, "
                   "KiB, MiB or GiB (e.g. 5GB; upper case: transformers reads 'gb' as "
                   "gigabits)", flag, v);
}

// What a save appends to the --save name: "<save>.optim-<step, up to 16
// digits>-<n>.tmp.XXXXXX" (its temporary), and "-step<n>" with --keep-last.
static size_t save_suffix_bytes(const train_options *o) {
  return strlen(".optim--999" SRT_OUTPUT_TEMP_SUFFIX) + 16 +
         (o->keep_last > 0 ? strlen("-step") + 18 : 0);
}

// A checkpoint path that is a symbolic link stands for the file it resolves
// to: the optimizer files and step-numbered saves go beside that file, so a
// checkpoint saved through a link loads through the link or the file alike.
// `*path` then points into `file` (4096 bytes), whose name must take
// `suffix_bytes` more (srt_output_check_name). A folder (--load of an
// export) is left as given: its files are read inside it.
static srt_status resolve_checkpoint(const char *flag, const char **path, char file[4096],
                                     size_t suffix_bytes) {
  struct stat st;
  if (!*path || (stat(*path, &st) == 0 && S_ISDIR(st.st_mode))) // a --load DIR reads inside
    return NULL;
  char *dest;
  SRT_RETURN_IF_ERROR(srt_output_destination(flag, *path, &dest));
  size_t n = strlen(dest);
  srt_status s = NULL;
  if (strcmp(dest, *path) && suffix_bytes)
    s = srt_output_check_name(flag, dest, suffix_bytes);
  if (!s && n < 4096)
    memcpy(file, dest, n + 1);
  free(dest);
  if (s)
    return s;
  if (n >= 4096)
    return SRT_ERROR(SRT_INVALID_ARGUMENT,
                     "%s '%s': the file it links to has a path of %zu bytes, past %d", flag,
                     *path, n, 4095);
  *path = file;
  return NULL;
}

srt_status train_parse_options(int argc, char **argv, train_options *o) {
  *o = (train_options){.steps = -1,
                       .lr = NAN,
                       .beta1 = 0.9f,
                       .beta2 = 0.999f,
                       .eps = 1e-8f,
                       .weight_decay = 0.01f,
                       .max_grad_norm = NAN,
                       .norm_type = 2.0,
                       .log_every = 1,
                       .max_skipped = 5,
                       .timeout_s = 600,
                       .export_dtype = SRT_DTYPE_COUNT,
                       .max_shard_bytes = INT64_C(5000000000),
                       .eval_every = -1,
                       .eval_batches = -1,
                       .schedule = {.kind = TRAIN_LR_CONSTANT,
                                    .decay_steps = -1,
                                    .decay_fraction = 0.1}};
  // Flags seen so far, each with its value (NULL for --profile), so that a
  // second value is refused instead of silently replacing the first.
  const char *seen[64][2];
  int nseen = 0;
  for (int i = 1; i < argc; ++i) {
    const char *f = argv[i];
    if (!strcmp(f, "--help") || !strcmp(f, "-h"))
      return SRT_ERROR(SRT_INVALID_ARGUMENT, "help requested");
    if (f[0] != '-')
      return SRT_ERROR(SRT_INVALID_ARGUMENT,
                       "unexpected argument '%s'%s%s (flags take their value as the next "
                       "argument; --profile and --override-lr-schedule take none)",
                       f, i > 1 ? " after " : "", i > 1 ? argv[i - 1] : "");
    if (!strncmp(f, "--", 2) && strchr(f, '='))
      return SRT_ERROR(SRT_INVALID_ARGUMENT,
                       "'%s': give the value as the next argument ('%.*s %s')", f,
                       (int)(strchr(f, '=') - f), f, strchr(f, '=') + 1);
    bool valueless = !strcmp(f, "--profile") || !strcmp(f, "--override-lr-schedule");
    if (!valueless && i + 1 >= argc)
      return SRT_ERROR(SRT_INVALID_ARGUMENT, "%s: missing value (or unknown flag)", f);
    const char *v = valueless ? NULL : argv[i + 1];
    for (int j = 0; j < nseen; j++)
      if (!strcmp(seen[j][0], f))
        return SRT_ERROR(SRT_INVALID_ARGUMENT, "%s given twice ('%s' and '%s')", f,
                         seen[j][1] ? seen[j][1] : f, v ? v : f);
    if (nseen == (int)(sizeof seen / sizeof *seen))
      return SRT_ERROR(SRT_INVALID_ARGUMENT, "%s: more than %d flags", f, nseen);
    seen[nseen][0] = f;
    seen[nseen++][1] = v;
    if (valueless) {
      *(!strcmp(f, "--profile") ? &o->profile : &o->override_lr_schedule) = true;
      continue;
    }
    ++i;
    if (!strcmp(f, "--data")) {
      o->data = v;
    } else if (!strcmp(f, "--steps")) {
      SRT_RETURN_IF_ERROR(parse_int(f, v, 1, &o->steps));
      if (o->steps > SRT_CHECKPOINT_MAX_STEP)
        return SRT_ERROR(SRT_INVALID_ARGUMENT, "--steps: %lld is above the largest step %lld",
                         (long long)o->steps, (long long)SRT_CHECKPOINT_MAX_STEP);
    } else if (!strcmp(f, "--lr")) {
      SRT_RETURN_IF_ERROR(parse_float(f, v, &o->lr));
      SRT_RETURN_IF_ERROR(parse_double(f, v, &o->schedule.lr)); // the schedule in float64
      o->schedule_given |= TRAIN_GIVEN_LR;
    } else if (!strcmp(f, "--metrics")) {
      o->metrics = v;
    } else if (!strcmp(f, "--eval-data")) {
      o->eval_data = v;
    } else if (!strcmp(f, "--eval-every")) {
      SRT_RETURN_IF_ERROR(parse_int(f, v, 1, &o->eval_every));
    } else if (!strcmp(f, "--eval-batches")) {
      SRT_RETURN_IF_ERROR(parse_int(f, v, 1, &o->eval_batches));
    } else if (!strcmp(f, "--lr-schedule")) {
      SRT_RETURN_IF_ERROR(train_lr_schedule_parse(v, &o->schedule.kind));
      o->schedule_given |= TRAIN_GIVEN_KIND;
    } else if (!strcmp(f, "--warmup-steps")) {
      SRT_RETURN_IF_ERROR(parse_int(f, v, 0, &o->schedule.warmup));
      o->schedule_given |= TRAIN_GIVEN_WARMUP;
    } else if (!strcmp(f, "--lr-decay-steps")) {
      SRT_RETURN_IF_ERROR(parse_int(f, v, 1, &o->schedule.decay_steps));
      o->schedule_given |= TRAIN_GIVEN_DECAY_STEPS;
    } else if (!strcmp(f, "--min-lr")) {
      SRT_RETURN_IF_ERROR(parse_double(f, v, &o->schedule.min_lr));
      o->schedule_given |= TRAIN_GIVEN_MIN_LR;
    } else if (!strcmp(f, "--decay-fraction")) {
      SRT_RETURN_IF_ERROR(parse_double(f, v, &o->schedule.decay_fraction));
      o->schedule_given |= TRAIN_GIVEN_DECAY_FRACTION;
    } else if (!strcmp(f, "--betas")) {
      const char *comma = strchr(v, ',');
      if (!comma)
        return SRT_ERROR(SRT_INVALID_ARGUMENT, "--betas: '%s' is not B1,B2", v);
      char first[64];
      size_t len = (size_t)(comma - v);
      if (len >= sizeof first)
        return SRT_ERROR(SRT_INVALID_ARGUMENT, "--betas: '%s' is not B1,B2", v);
      memcpy(first, v, len);
      first[len] = 0;
      SRT_RETURN_IF_ERROR(parse_float(f, first, &o->beta1));
      SRT_RETURN_IF_ERROR(parse_float(f, comma + 1, &o->beta2));
      if (o->beta1 < 0 || o->beta1 >= 1 || o->beta2 < 0 || o->beta2 >= 1)
        return SRT_ERROR(SRT_INVALID_ARGUMENT, "--betas: %g,%g must lie in [0, 1)",
                         o->beta1, o->beta2);
    } else if (!strcmp(f, "--eps")) {
      SRT_RETURN_IF_ERROR(parse_float(f, v, &o->eps));
    } else if (!strcmp(f, "--weight-decay")) {
      SRT_RETURN_IF_ERROR(parse_float(f, v, &o->weight_decay));
    } else if (!strcmp(f, "--max-grad-norm")) {
      SRT_RETURN_IF_ERROR(parse_float(f, v, &o->max_grad_norm));
    } else if (!strcmp(f, "--norm-type")) {
      if (!strcasecmp(v, "inf")) {
        o->norm_type = INFINITY;
      } else {
        SRT_RETURN_IF_ERROR(parse_double(f, v, &o->norm_type));
        if (!(o->norm_type > 0) || !isfinite(o->norm_type))
          return SRT_ERROR(SRT_INVALID_ARGUMENT, "--norm-type: '%s' is not 'inf' or a p > 0",
                           v);
      }
    } else if (!strcmp(f, "--load")) {
      o->load = v;
    } else if (!strcmp(f, "--save")) {
      o->save = v;
    } else if (!strcmp(f, "--keep-last")) {
      SRT_RETURN_IF_ERROR(parse_int(f, v, 1, &o->keep_last));
    } else if (!strcmp(f, "--save-every")) {
      SRT_RETURN_IF_ERROR(parse_int(f, v, 0, &o->save_every));
    } else if (!strcmp(f, "--seed")) {
      int64_t s;
      SRT_RETURN_IF_ERROR(parse_int(f, v, 0, &s));
      o->seed = (uint64_t)s;
    } else if (!strcmp(f, "--timeout")) {
      SRT_RETURN_IF_ERROR(parse_double(f, v, &o->timeout_s));
      if (!(o->timeout_s >= 0) || !isfinite(o->timeout_s))
        return SRT_ERROR(SRT_INVALID_ARGUMENT, "--timeout must be >= 0 seconds, got '%s'", v);
    } else if (!strcmp(f, "--max-skipped")) {
      SRT_RETURN_IF_ERROR(parse_int(f, v, 0, &o->max_skipped));
    } else if (!strcmp(f, "--threads")) {
      SRT_RETURN_IF_ERROR(parse_int(f, v, 1, &o->threads));
      if (o->threads > 4096)
        return SRT_ERROR(SRT_INVALID_ARGUMENT, "--threads: %lld is above 4096",
                         (long long)o->threads);
    } else if (!strcmp(f, "--log-every")) {
      SRT_RETURN_IF_ERROR(parse_int(f, v, 1, &o->log_every));
    } else if (!strcmp(f, "--batch-file")) {
      o->batch_file = v;
    } else if (!strcmp(f, "--dump")) {
      o->dump = v;
    } else if (!strcmp(f, "--export")) {
      // One folder, named without trailing slashes ("e/" is "e").
      char *d = (char *)v;
      for (size_t n = strlen(d); n > 1 && d[n - 1] == '/';)
        d[--n] = 0;
      o->export_dir = d;
    } else if (!strcmp(f, "--export-dtype")) {
      SRT_RETURN_IF_ERROR(parse_export_dtype(v, &o->export_dtype));
    } else if (!strcmp(f, "--max-shard-size")) {
      SRT_RETURN_IF_ERROR(parse_size(f, v, &o->max_shard_bytes));
    } else {
      return SRT_ERROR(SRT_INVALID_ARGUMENT, "unknown flag '%s'", f);
    }
  }
  // File names: none empty or beyond the system's limit.
  if (o->save_every > 0 && !o->save && !o->export_dir)
    return SRT_ERROR(SRT_INVALID_ARGUMENT, "--save-every needs --save CKPT or --export DIR");
  if (o->keep_last > 0 && !o->save)
    return SRT_ERROR(SRT_INVALID_ARGUMENT, "--keep-last needs --save CKPT (the name the "
                     "step-numbered checkpoints are made from)");
  if (!o->eval_data && (o->eval_every > 0 || o->eval_batches > 0))
    return SRT_ERROR(SRT_INVALID_ARGUMENT, "--eval-every and --eval-batches need --eval-data");
  if (o->eval_data && o->batch_file)
    return SRT_ERROR(SRT_INVALID_ARGUMENT,
                     "--eval-data with --batch-file: a batch file is the one batch of every "
                     "step; evaluate with --data runs");
  o->eval_every = o->eval_every > 0 ? o->eval_every : 0;
  o->eval_batches = o->eval_batches > 0 ? o->eval_batches : 4;
  const char *paths[][2] = {{"--data", o->data},       {"--eval-data", o->eval_data},
                            {"--metrics", o->metrics},
                            {"--batch-file", o->batch_file},
                            {"--load", o->load},       {"--save", o->save},
                            {"--dump", o->dump},       {"--export", o->export_dir}};
  for (size_t k = 0; k < sizeof paths / sizeof *paths; ++k) {
    const char *p = paths[k][1];
    if (p && !*p)
      return SRT_ERROR(SRT_INVALID_ARGUMENT, "%s: empty path", paths[k][0]);
    if (p && strlen(p) >= PATH_MAX)
      return SRT_ERROR(SRT_INVALID_ARGUMENT,
                       "%s: a path of %zu bytes is longer than the system allows (PATH_MAX %d)",
                       paths[k][0], strlen(p), PATH_MAX);
  }
  // A save writes "<save>.optim-<step, up to 16 digits>-<n>.tmp.XXXXXX"
  // beside it, a dump "<dump>.tmp.XXXXXX": names that must fit before any
  // step runs.
  if (o->save)
    SRT_RETURN_IF_ERROR(srt_output_check_name("--save", o->save, save_suffix_bytes(o)));
  if (o->dump)
    SRT_RETURN_IF_ERROR(
        srt_output_check_name("--dump", o->dump, strlen(SRT_OUTPUT_TEMP_SUFFIX)));
  if (!o->export_dir && (o->export_dtype != SRT_DTYPE_COUNT || o->max_shard_bytes != INT64_C(5000000000)))
    return SRT_ERROR(SRT_INVALID_ARGUMENT, "--export-dtype and --max-shard-size need --export DIR");
  if (o->export_dir) {
    const char *slash = strrchr(o->export_dir, '/');
    const char *base = slash ? slash + 1 : o->export_dir;
    if (!*base || !strcmp(base, ".") || !strcmp(base, ".."))
      return SRT_ERROR(SRT_INVALID_ARGUMENT, "--export '%s': name the folder itself (not '/', "
                       "'.' or '..')", o->export_dir);
    // "<DIR>.partial" beside it, holding the longest file an export writes.
    SRT_RETURN_IF_ERROR(srt_output_check_name("--export", o->export_dir, strlen(".partial")));
    size_t longest = strlen(".partial/model-00001-of-00001.safetensors" SRT_OUTPUT_TEMP_SUFFIX);
    if (strlen(o->export_dir) + longest >= PATH_MAX)
      return SRT_ERROR(SRT_INVALID_ARGUMENT, "--export: a path of %zu bytes leaves no room for "
                       "the %zu of the files written in it (PATH_MAX %d)",
                       strlen(o->export_dir), longest, PATH_MAX);
  }
  // The export folder is no other file of the run (it may be the --load
  // folder: the export replaces it whole, the usual way to resume in place).
  const char *files[][2] = {{"--save", o->save}, {"--dump", o->dump}, {"--data", o->data},
                            {"--batch-file", o->batch_file}};
  for (size_t k = 0; o->export_dir && k < sizeof files / sizeof *files; ++k)
    if (files[k][1] && (!strcmp(files[k][1], o->export_dir) ||
                        srt_same_file(files[k][1], o->export_dir)))
      return SRT_ERROR(SRT_INVALID_ARGUMENT, "--export '%s' is also the %s path: choose another "
                       "folder", o->export_dir, files[k][0]);
  if (o->data && o->batch_file)
    return SRT_ERROR(SRT_INVALID_ARGUMENT,
                     "--data '%s' and --batch-file '%s': give one source of batches", o->data,
                     o->batch_file);
  if (!o->data && !o->batch_file)
    return SRT_ERROR(SRT_INVALID_ARGUMENT, "--data TOKENS (or --batch-file FILE) is required");
  if (o->steps < 0)
    return SRT_ERROR(SRT_INVALID_ARGUMENT, "--steps K is required");
  // A resume may take --lr from its checkpoint (train_lr_resume): then it
  // is required only once the checkpoint turns out to record none.
  if (isnan(o->lr) && !o->load)
    return SRT_ERROR(SRT_INVALID_ARGUMENT, "--lr F is required");
  if (o->override_lr_schedule && !o->load)
    return SRT_ERROR(SRT_INVALID_ARGUMENT, "--override-lr-schedule needs --load CKPT (it "
                     "overrides the schedule a checkpoint recorded)");
  if (isnan(o->max_grad_norm))
    return SRT_ERROR(SRT_INVALID_ARGUMENT, "--max-grad-norm F is required (<= 0: no clipping)");
  // The ranges AdamW is defined on (nn-optimizer refuses the same): eps 0
  // divides 0 by 0 for gradients that are exactly zero.
  if (o->lr < 0)
    return SRT_ERROR(SRT_INVALID_ARGUMENT, "--lr must be >= 0, got %g", (double)o->lr);
  // With --load the schedule is completed and checked once the checkpoint's
  // record is merged in (main.c).
  if (!o->load)
    SRT_RETURN_IF_ERROR(train_lr_finish(&o->schedule, o->schedule_given, o->steps));
  if (!(o->eps > 0))
    return SRT_ERROR(SRT_INVALID_ARGUMENT, "--eps must be > 0, got %g", (double)o->eps);
  if (o->weight_decay < 0)
    return SRT_ERROR(SRT_INVALID_ARGUMENT, "--weight-decay must be >= 0, got %g",
                     (double)o->weight_decay);
  // A file written by --dump must not replace a checkpoint of this run.
  const char *others[2] = {o->load, o->save};
  for (int i = 0; o->dump && i < 2; ++i)
    if (others[i] && (!strcmp(o->dump, others[i]) || srt_same_file(o->dump, others[i])))
      return SRT_ERROR(SRT_INVALID_ARGUMENT, "--dump '%s' would overwrite the checkpoint given "
                       "to %s: choose another file", o->dump, i ? "--save" : "--load");
  // No output replaces an input (--save may replace the checkpoint it
  // loaded: the save is atomic, the usual way to resume in place).
  const char *inputs[3] = {o->data, o->batch_file, o->eval_data};
  const char *input_flags[3] = {"--data", "--batch-file", "--eval-data"};
  const char *outputs[3] = {o->save, o->dump, o->metrics};
  const char *output_flags[3] = {"--save", "--dump", "--metrics"};
  for (int i = 0; i < 3; ++i)
    for (int k = 0; k < 3; ++k)
      if (outputs[i] && inputs[k] &&
          (!strcmp(outputs[i], inputs[k]) || srt_same_file(outputs[i], inputs[k])))
        return SRT_ERROR(SRT_INVALID_ARGUMENT, "%s '%s' is the %s: choose another file",
                         output_flags[i], outputs[i], input_flags[k]);
  if (o->metrics && ((o->save && (!strcmp(o->metrics, o->save) || srt_same_file(o->metrics, o->save))) ||
                     (o->load && (!strcmp(o->metrics, o->load) || srt_same_file(o->metrics, o->load)))))
    return SRT_ERROR(SRT_INVALID_ARGUMENT, "--metrics '%s' is a checkpoint of this run: choose "
                     "another file", o->metrics);
  if (o->metrics && o->dump && (!strcmp(o->metrics, o->dump) || srt_same_file(o->metrics, o->dump)))
    return SRT_ERROR(SRT_INVALID_ARGUMENT, "--metrics '%s' is the --dump file: choose another "
                     "file", o->metrics);
  // "-" is no file name here: standard output carries the step log.
  for (int i = 0; i < 3; ++i)
    if (outputs[i] && !strcmp(outputs[i], "-"))
      return SRT_ERROR(SRT_INVALID_ARGUMENT, "%s '-': give a file (standard output carries the "
                       "step log)", output_flags[i]);
  // A checkpoint is a file (with its optimizer file beside it), never a
  // device; a dump may go to one (/dev/null).
  srt_output_kind kind;
  SRT_RETURN_IF_ERROR(o->save ? srt_output_kind_of("--save", o->save, &kind) : NULL);
  if (o->save && kind == SRT_OUTPUT_DEVICE)
    return SRT_ERROR(SRT_INVALID_ARGUMENT,
                     "--save '%s' is a device: a checkpoint is a file, with its optimizer "
                     "file beside it",
                     o->save);
  SRT_RETURN_IF_ERROR(o->dump ? srt_output_kind_of("--dump", o->dump, &kind) : NULL);
  SRT_RETURN_IF_ERROR(o->save ? srt_output_check_seekable("--save", o->save) : NULL);
  SRT_RETURN_IF_ERROR(o->dump ? srt_output_check_seekable("--dump", o->dump) : NULL);
  SRT_RETURN_IF_ERROR(train_check_places(o));
  // Links last, so that the messages above name the user's path.
  SRT_RETURN_IF_ERROR(resolve_checkpoint("--load", &o->load, o->load_file, 0));
  return resolve_checkpoint("--save", &o->save, o->save_file, save_suffix_bytes(o));
}
