// The checks between the training driver's flags, once all are read
// (train_check_options): what is required, what needs what, file names
// that fit, outputs that replace no input. Errors name the flags and paths.
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "shardrt/output.h"
#include "train_internal.h"

// Whether two paths name one file (the same text, or one file by links).
static bool same(const char *a, const char *b) {
  return a && b && (!strcmp(a, b) || srt_same_file(a, b));
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

// Flags that need another.
static srt_status check_companions(train_options *o) {
  if (o->save_every > 0 && !o->save && !o->export_dir)
    return SRT_ERROR(SRT_INVALID_ARGUMENT, "--save-every needs --save CKPT or --export DIR");
  if (o->keep_last > 0 && !o->save)
    return SRT_ERROR(SRT_INVALID_ARGUMENT, "--keep-last needs --save CKPT (the name the "
                     "step-numbered checkpoints are made from)");
  if (!o->eval_data && (o->eval_every > 0 || train_option_given(o, "--eval-batches")))
    return SRT_ERROR(SRT_INVALID_ARGUMENT, "--eval-every and --eval-batches need --eval-data");
  if (o->eval_data && o->batch_file)
    return SRT_ERROR(SRT_INVALID_ARGUMENT,
                     "--eval-data with --batch-file: a batch file is the one batch of every "
                     "step; evaluate with --data runs");
  o->eval_every = o->eval_every > 0 ? o->eval_every : 0;
  return NULL;
}

// File names: none empty or beyond the system's limit; a save writes
// "<save>.optim-<step>-<n>.tmp.XXXXXX" beside it, a dump "<dump>.tmp.XXXXXX":
// names that must fit before any step runs.
static srt_status check_names(const train_options *o) {
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
  if (o->save)
    SRT_RETURN_IF_ERROR(srt_output_check_name("--save", o->save, save_suffix_bytes(o)));
  if (o->dump)
    SRT_RETURN_IF_ERROR(
        srt_output_check_name("--dump", o->dump, strlen(SRT_OUTPUT_TEMP_SUFFIX)));
  return NULL;
}

// --export DIR and its flags: a folder of its own, whose files' names fit.
static srt_status check_export(const train_options *o) {
  if (!o->export_dir && (train_option_given(o, "--export-dtype") ||
                         train_option_given(o, "--max-shard-size")))
    return SRT_ERROR(SRT_INVALID_ARGUMENT, "--export-dtype and --max-shard-size need --export DIR");
  if (!o->export_dir)
    return NULL;
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
  // The export folder is no other file of the run (it may be the --load
  // folder: the export replaces it whole, the usual way to resume in place).
  const char *files[][2] = {{"--save", o->save}, {"--dump", o->dump}, {"--data", o->data},
                            {"--batch-file", o->batch_file}};
  for (size_t k = 0; k < sizeof files / sizeof *files; ++k)
    if (same(files[k][1], o->export_dir))
      return SRT_ERROR(SRT_INVALID_ARGUMENT, "--export '%s' is also the %s path: choose another "
                       "folder", o->export_dir, files[k][0]);
  return NULL;
}

// The flags every run needs, and AdamW's ranges (nn-optimizer refuses the
// same: eps 0 divides 0 by 0 for gradients that are exactly zero).
static srt_status check_required(train_options *o) {
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
  return NULL;
}

// No output replaces an input or a checkpoint of this run (--save may
// replace the checkpoint it loaded: the save is atomic, the usual way to
// resume in place).
static srt_status check_distinct(const train_options *o) {
  const char *others[2] = {o->load, o->save};
  for (int i = 0; o->dump && i < 2; ++i)
    if (same(o->dump, others[i]))
      return SRT_ERROR(SRT_INVALID_ARGUMENT, "--dump '%s' would overwrite the checkpoint given "
                       "to %s: choose another file", o->dump, i ? "--save" : "--load");
  const char *inputs[3] = {o->data, o->batch_file, o->eval_data};
  const char *input_flags[3] = {"--data", "--batch-file", "--eval-data"};
  const char *outputs[3] = {o->save, o->dump, o->metrics};
  const char *output_flags[3] = {"--save", "--dump", "--metrics"};
  for (int i = 0; i < 3; ++i)
    for (int k = 0; k < 3; ++k)
      if (outputs[i] && same(outputs[i], inputs[k]))
        return SRT_ERROR(SRT_INVALID_ARGUMENT, "%s '%s' is the %s: choose another file",
                         output_flags[i], outputs[i], input_flags[k]);
  if (o->metrics && (same(o->metrics, o->save) || same(o->metrics, o->load)))
    return SRT_ERROR(SRT_INVALID_ARGUMENT, "--metrics '%s' is a checkpoint of this run: choose "
                     "another file", o->metrics);
  if (o->metrics && same(o->metrics, o->dump))
    return SRT_ERROR(SRT_INVALID_ARGUMENT, "--metrics '%s' is the --dump file: choose another "
                     "file", o->metrics);
  // "-" is no file name here: standard output carries the step log.
  for (int i = 0; i < 3; ++i)
    if (outputs[i] && !strcmp(outputs[i], "-"))
      return SRT_ERROR(SRT_INVALID_ARGUMENT, "%s '-': give a file (standard output carries the "
                       "step log)", output_flags[i]);
  return NULL;
}

// A checkpoint is a file (with its optimizer file beside it), never a
// device; a dump may go to one (/dev/null). Both are seekable.
static srt_status check_output_kinds(const train_options *o) {
  srt_output_kind kind;
  SRT_RETURN_IF_ERROR(o->save ? srt_output_kind_of("--save", o->save, &kind) : NULL);
  if (o->save && kind == SRT_OUTPUT_DEVICE)
    return SRT_ERROR(SRT_INVALID_ARGUMENT,
                     "--save '%s' is a device: a checkpoint is a file, with its optimizer "
                     "file beside it",
                     o->save);
  SRT_RETURN_IF_ERROR(o->dump ? srt_output_kind_of("--dump", o->dump, &kind) : NULL);
  SRT_RETURN_IF_ERROR(o->save ? srt_output_check_seekable("--save", o->save) : NULL);
  return o->dump ? srt_output_check_seekable("--dump", o->dump) : NULL;
}

srt_status train_check_options(train_options *o) {
  SRT_RETURN_IF_ERROR(check_companions(o));
  SRT_RETURN_IF_ERROR(check_names(o));
  SRT_RETURN_IF_ERROR(check_export(o));
  SRT_RETURN_IF_ERROR(check_required(o));
  SRT_RETURN_IF_ERROR(check_distinct(o));
  SRT_RETURN_IF_ERROR(check_output_kinds(o));
  SRT_RETURN_IF_ERROR(train_check_places(o));
  // Links last, so that the messages above name the user's path.
  SRT_RETURN_IF_ERROR(resolve_checkpoint("--load", &o->load, o->load_file, 0));
  return resolve_checkpoint("--save", &o->save, o->save_file, save_suffix_bytes(o));
}
