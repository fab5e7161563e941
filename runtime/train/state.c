// Training checkpoints: the weights as one consolidated Hugging Face
// safetensors file plus the optimizer state (AdamW moments, step counters)
// in a second file that the weights file names in its metadata, written in
// an order that keeps the previous checkpoint loadable through any crash.
#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <unistd.h>

#include "shardrt/checkpoint.h"
#include "shardrt/collectives.h"
#include "shardrt/output.h"
#include "shardrt/safetensors.h"
#include "train_internal.h"

enum { PATH_MAX_LEN = 4096 };

// "<name><suffix>" on the heap (NULL when out of memory).
static char *concat(const char *a, const char *b) {
  size_t la = strlen(a), lb = strlen(b);
  char *s = malloc(la + lb + 1);
  if (s) {
    memcpy(s, a, la);
    memcpy(s + la, b, lb + 1);
  }
  return s;
}

static const char *base_of(const char *path) {
  const char *slash = strrchr(path, '/');
  return slash ? slash + 1 : path;
}

// Whether `optim` is an optimizer file of checkpoint `path`:
// "<name>.optim-..." in the same folder, however either path is spelled
// (a --load through a link is absolute, a --save may be relative).
static bool is_own_optim(const char *path, const char *optim) {
  const char *pb = base_of(path), *ob = base_of(optim);
  size_t n = strlen(pb);
  if (strncmp(ob, pb, n) != 0 || strncmp(ob + n, ".optim-", 7) != 0)
    return false;
  char pd[PATH_MAX_LEN], od[PATH_MAX_LEN]; // the folders: "." for a bare name
  snprintf(pd, sizeof pd, "%.*s", pb > path ? (int)(pb - path) : 1, pb > path ? path : ".");
  snprintf(od, sizeof od, "%.*s", ob > optim ? (int)(ob - optim) : 1, ob > optim ? optim : ".");
  return srt_same_file(pd, od);
}

// The optimizer tensors: for each parameter, "<name>.exp_avg" and
// "<name>.exp_avg_sq" views; names go to names[2 * n] (freed by the caller).
static srt_status moment_views(const srt_program *p, uint8_t *arena, srt_tensor *views,
                               char **names) {
  for (int32_t k = 0; k < p->num_params; ++k) {
    const srt_param_info *pi = &p->params[k];
    names[2 * k] = concat(pi->name, ".exp_avg");
    names[2 * k + 1] = concat(pi->name, ".exp_avg_sq");
    if (!names[2 * k] || !names[2 * k + 1])
      return SRT_ERROR(SRT_RESOURCE_EXHAUSTED, "checkpoint: out of memory");
    views[2 * k] = train_param_view(pi, names[2 * k], arena, pi->m_offset);
    views[2 * k + 1] = train_param_view(pi, names[2 * k + 1], arena, pi->v_offset);
  }
  return NULL;
}

static void free_names(char **names, int64_t n) {
  if (!names)
    return;
  for (int64_t i = 0; i < n; ++i)
    free(names[i]);
  free(names);
}

// The first parameter with a non-finite element on any rank (-1: none).
srt_status train_first_non_finite(srt_context *ctx, const srt_program *p,
                                   const uint8_t *arena, int32_t *which) {
  int32_t bad = INT32_MAX;
  for (int32_t k = 0; k < p->num_params && bad == INT32_MAX; ++k) {
    const srt_param_info *q = &p->params[k];
    int64_t numel = 1;
    for (int d = 0; d < q->rank; ++d)
      numel *= q->local_shape[d];
    const float *w = (const float *)(arena + q->offset);
    for (int64_t i = 0; i < numel; ++i)
      if (!isfinite(w[i])) {
        bad = k;
        break;
      }
  }
  // The smallest index over ranks: MAX of the negated indices.
  int32_t neg = -bad;
  SRT_RETURN_IF_ERROR(
      srt_all_reduce(srt_context_group(ctx, SRT_GROUP_WORLD), &neg, 1, SRT_I32, SRT_REDUCE_MAX));
  *which = -neg == INT32_MAX ? -1 : -neg;
  return NULL;
}

void train_weights_free(train_weights *w) {
  free_names(w->names, (int64_t)w->num_params);
  free(w->views);
  free(w->items);
  *w = (train_weights){0};
}

srt_status train_weights_collect(const srt_program *p, uint8_t *arena, const train_input *in,
                                 srt_dtype dtype, train_weights *w) {
  size_t n = (size_t)p->num_params, carried = 0;
  for (size_t i = 0; in->src && i < srt_checkpoint_source_count(in->src); ++i)
    carried += in->carried[i];
  *w = (train_weights){.items = calloc(n + carried + 1, sizeof *w->items),
                       .views = calloc(n + 1, sizeof *w->views),
                       .names = calloc(n + 1, sizeof *w->names),
                       .num_params = n};
  if (!w->items || !w->views || !w->names) {
    train_weights_free(w);
    return SRT_ERROR(SRT_RESOURCE_EXHAUSTED, "checkpoint: out of memory");
  }
  char stored[1024];
  for (size_t k = 0; k < n; ++k) {
    w->views[k] =
        train_param_view(&p->params[k], p->params[k].name, arena, p->params[k].offset);
    if (!srt_checkpoint_name_stored(&in->names, in->layout, p->params[k].name, stored,
                                    sizeof stored) ||
        !(w->names[k] = strdup(stored))) {
      train_weights_free(w);
      return SRT_ERROR(SRT_RESOURCE_EXHAUSTED, "checkpoint: cannot name '%s'",
                       p->params[k].name);
    }
    w->items[w->n++] = (srt_checkpoint_item){w->names[k], dtype, &w->views[k], NULL};
  }
  for (size_t i = 0; in->src && i < srt_checkpoint_source_count(in->src); ++i)
    if (in->carried[i]) {
      const srt_tensor_info *t = srt_checkpoint_source_get(in->src, i, NULL);
      w->items[w->n++] = (srt_checkpoint_item){t->name, t->dtype, NULL, t};
    }
  return NULL;
}

srt_status train_save_weights(srt_context *ctx, const srt_program *p, uint8_t *arena,
                              const train_input *in, srt_dtype dtype, const char *path,
                              const char *const *meta, size_t n_meta) {
  train_weights w;
  SRT_RETURN_IF_ERROR(train_weights_collect(p, arena, in, dtype, &w));
  srt_status s = srt_checkpoint_save_items(ctx, path, w.items, w.n, meta, n_meta);
  train_weights_free(&w);
  return s;
}

srt_status train_save_moments(srt_context *ctx, const srt_program *p, uint8_t *arena,
                              const char *path, const char *const *meta, size_t n_meta) {
  int32_t n = p->num_params;
  srt_tensor *views = calloc((size_t)(2 * n + 1), sizeof *views);
  char **names = calloc((size_t)(2 * n + 1), sizeof *names);
  srt_status s = views && names ? moment_views(p, arena, views, names)
                                : SRT_ERROR(SRT_RESOURCE_EXHAUSTED, "checkpoint: out of memory");
  if (!s)
    s = srt_checkpoint_save_consolidated_meta(ctx, path, views, (size_t)(2 * n), meta, n_meta);
  free_names(names, 2 * n);
  free(views);
  return s;
}

// Claims the optimizer file name of a save of `path` at `step` into
// `optim` (PATH_MAX_LEN bytes): one no earlier save used. Rank 0 creates
// the first free `<path>.optim-<step>-<n>` exclusively (O_EXCL: another
// writer cannot pick the same name between the look and the create) as an
// empty placeholder that the write renames over; everyone follows. A save
// that fails before its commit point then never overwrites the optimizer
// file the current checkpoint names. Collective.
static srt_status claim_optim_name(srt_context *ctx, const char *path, int64_t step,
                                   char *optim) {
  bool root = srt_context_rank(ctx) == 0;
  int32_t attempt = 0, err = 0;
  for (; root && attempt <= 1000; ++attempt) {
    if (snprintf(optim, PATH_MAX_LEN, "%s.optim-%08" PRId64 "-%d", path, step,
                 attempt) >= PATH_MAX_LEN) {
      err = ENAMETOOLONG;
      break;
    }
    int fd = open(optim, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    if (fd >= 0) {
      close(fd);
      break;
    }
    if (errno != EEXIST) {
      err = errno;
      break;
    }
  }
  int32_t pick[2] = {attempt, err};
  SRT_RETURN_IF_ERROR(
      srt_broadcast(srt_context_group(ctx, SRT_GROUP_WORLD), pick, 2, SRT_I32, 0));
  if (pick[1] || pick[0] > 1000)
    return pick[1] == ENAMETOOLONG
               ? SRT_ERROR(SRT_OUT_OF_RANGE, "checkpoint: path '%s' is too long", path)
           : pick[1] ? SRT_ERROR(SRT_IO, "checkpoint: cannot create '%s.optim-%08" PRId64 "-%d': %s",
                                 path, step, pick[0], strerror(pick[1]))
                     : SRT_ERROR(SRT_IO, "checkpoint: 1000 optimizer files '%s.optim-%08" PRId64
                                 "-*' exist already: remove old ones", path, step);
  snprintf(optim, PATH_MAX_LEN, "%s.optim-%08" PRId64 "-%d", path, step, pick[0]);
  return NULL;
}

srt_status train_save(srt_context *ctx, const srt_program *p, uint8_t *arena,
                      const char *path, const train_state *state, const train_input *in,
                      char *prev_optim) {
  // Never replace a checkpoint with weights that are no longer numbers.
  int32_t bad;
  SRT_RETURN_IF_ERROR(train_first_non_finite(ctx, p, arena, &bad));
  if (bad >= 0)
    return SRT_ERROR(SRT_FAILED_PRECONDITION,
                     "checkpoint: parameter '%s' has non-finite values at step %lld: not "
                     "saving, '%s' is left as it was (lower --lr?)",
                     p->params[bad].name, (long long)state->step, path);
  char optim[PATH_MAX_LEN], step_s[32], adam_s[32], batch_s[32], seq_s[32];
  char save_id[TRAIN_RUN_ID_LEN + 1];
  bool root = srt_context_rank(ctx) == 0;
  // This save's own id, in both files: forks of one run (one run id) save
  // at the same step too, and their files must not pair across forks.
  SRT_RETURN_IF_ERROR(train_run_id_mint(ctx, save_id));
  SRT_RETURN_IF_ERROR(claim_optim_name(ctx, path, state->step, optim));
  snprintf(step_s, sizeof step_s, "%" PRId64, state->step);
  snprintf(adam_s, sizeof adam_s, "%" PRId64, state->adam_step);
  snprintf(batch_s, sizeof batch_s, "%" PRId64, p->batch);
  snprintf(seq_s, sizeof seq_s, "%" PRId64, p->seq);
  // 1. The optimizer state, under a name of its own (the previous one stays).
  const char *meta[] = {"shardrt.step",        step_s,           "shardrt.adam_step",
                        adam_s,                "shardrt.weights", base_of(path),
                        "shardrt.model",       p->model ? p->model : "",
                        "shardrt.lr_schedule", state->lr_schedule,
                        "shardrt.run",         state->run_id,
                        "shardrt.save",        save_id};
  srt_status s = train_save_moments(ctx, p, arena, optim, meta, 7);
  if (s && root)
    unlink(optim); // the placeholder, or an optimizer file no weights name
  // 2. The weights, whose metadata names the optimizer file: the commit point.
  if (!s) {
    const char *wmeta[] = {"shardrt.step",        step_s, "shardrt.adam_step",
                           adam_s,                "shardrt.optimizer", base_of(optim),
                           "shardrt.model",       p->model ? p->model : "",
                           "shardrt.lr_schedule", state->lr_schedule,
                           "shardrt.run",         state->run_id,
                           "shardrt.save",        save_id,
                           "shardrt.batch",       batch_s, // the data windows: a resume checks
                           "shardrt.seq",         seq_s};
    s = train_save_weights(ctx, p, arena, in, SRT_F32, path, wmeta,
                           (int)(sizeof wmeta / sizeof *wmeta / 2));
  }
  // 3. The previous optimizer file of THIS checkpoint path is no longer
  // referenced. One that belongs to another checkpoint (the one a run was
  // --load'ed from) stays: that checkpoint must remain resumable.
  if (!s) {
    if (srt_context_rank(ctx) == 0 && prev_optim[0] && strcmp(prev_optim, optim) != 0 &&
        is_own_optim(path, prev_optim))
      remove(prev_optim);
    snprintf(prev_optim, PATH_MAX_LEN, "%s", optim);
  }
  return s;
}

// The optimizer file's tensors that the program does not have: an error
// naming the first.
static srt_status check_no_extra_moments(const srt_safetensors *f, const srt_program *p) {
  size_t count = srt_safetensors_count(f);
  for (size_t i = 0; i < count; ++i) {
    const char *name = srt_safetensors_get(f, i)->name;
    int known = 0;
    for (int32_t k = 0; k < p->num_params && !known; ++k) {
      size_t len = strlen(p->params[k].name);
      known = strncmp(name, p->params[k].name, len) == 0 &&
              (!strcmp(name + len, ".exp_avg") || !strcmp(name + len, ".exp_avg_sq"));
    }
    if (!known)
      return SRT_ERROR(SRT_INVALID_ARGUMENT,
                       "checkpoint '%s' holds tensor '%s', which model '%s' does not have: "
                       "a checkpoint of another model?",
                       srt_safetensors_path(f), name, p->model ? p->model : "?");
  }
  return NULL;
}

// How many parameters `src` holds under `layout`.
static int32_t found_under(const srt_program *p, const train_input *in, int layout) {
  int32_t found = 0;
  char stored[1024];
  for (int32_t k = 0; k < p->num_params; ++k)
    found += srt_checkpoint_name_stored(&in->names, layout, p->params[k].name, stored,
                                        sizeof stored) &&
             srt_checkpoint_source_lookup(in->src, stored, NULL) != NULL;
  return found;
}

// The weights: the layout holding the most parameters, each parameter's
// shard from it, and every other tensor either a carried module's (kept for
// the saves) or an error.
static srt_status load_weights(srt_context *ctx, const srt_program *p, uint8_t *arena,
                               train_input *in) {
  const srt_mesh *mesh = srt_context_placement_mesh(ctx);
  int coord[SRT_MESH_NDIMS];
  srt_context_coord(ctx, coord);
  int32_t most = -1;
  for (int l = 0; l <= in->names.num_layouts; ++l) {
    int32_t found = found_under(p, in, l);
    if (found > most) {
      most = found;
      in->layout = l;
    }
  }
  char stored[1024];
  for (int32_t k = 0; k < p->num_params; ++k) {
    srt_tensor t = train_param_view(&p->params[k], p->params[k].name, arena, p->params[k].offset);
    const srt_safetensors *f = NULL;
    if (!srt_checkpoint_name_stored(&in->names, in->layout, t.name, stored, sizeof stored) ||
        !srt_checkpoint_source_lookup(in->src, stored, &f))
      return SRT_ERROR(SRT_NOT_FOUND, "checkpoint '%s': no tensor named '%s' (parameter '%s' "
                       "of model '%s')", srt_checkpoint_source_path(in->src), stored, t.name,
                       p->model ? p->model : "?");
    SRT_RETURN_IF_ERROR(srt_checkpoint_load_shard_as(f, stored, mesh, coord, &t));
    if (k == 0)
      in->dtype = srt_checkpoint_source_lookup(in->src, stored, NULL)->dtype;
  }
  size_t count = srt_checkpoint_source_count(in->src);
  in->carried = calloc(count ? count : 1, sizeof *in->carried);
  if (!in->carried)
    return SRT_ERROR(SRT_RESOURCE_EXHAUSTED, "checkpoint: out of memory");
  char mem[1024];
  for (size_t i = 0; i < count; ++i) {
    const srt_tensor_info *t = srt_checkpoint_source_get(in->src, i, NULL);
    bool known = false;
    if (srt_checkpoint_name_in_memory(&in->names, in->layout, t->name, mem, sizeof mem)) {
      for (int32_t k = 0; k < p->num_params && !known; ++k)
        known = !strcmp(mem, p->params[k].name);
      in->carried[i] = !known && srt_checkpoint_name_carried(&in->names, mem);
      known = known || in->carried[i];
    }
    if (!known)
      return SRT_ERROR(SRT_INVALID_ARGUMENT,
                       "checkpoint '%s' holds tensor '%s', which model '%s' does not have: "
                       "a checkpoint of another model?",
                       srt_checkpoint_source_path(in->src), t->name, p->model ? p->model : "?");
  }
  return NULL;
}

srt_status train_input_open(const srt_program *p, train_input *in) {
  memset(in, 0, sizeof *in);
  in->dtype = SRT_F32;
  return srt_checkpoint_names_parse(p->checkpoint_names, &in->names);
}

void train_input_close(train_input *in) {
  srt_checkpoint_source_close(in->src);
  free(in->carried);
  in->src = NULL;
  in->carried = NULL;
}

int64_t train_meta_int(const srt_safetensors *f, const char *key) {
  const char *v = srt_safetensors_metadata(f, key);
  char *end = NULL;
  long long x = v && isdigit((unsigned char)*v) ? strtoll(v, &end, 10) : -1;
  return end && !*end && x > 0 ? (int64_t)x : -1;
}

// Checks that optimizer file `o` (at path `optim`) belongs to the weights
// `first` of checkpoint `path`, trained `step` steps and `adam` AdamW
// updates. Errors: SRT_DATA_LOSS naming both files and the values.
static srt_status check_optim_file(const char *path, const char *optim,
                                   const srt_safetensors *first, const srt_safetensors *o,
                                   int64_t step, int64_t adam) {
  srt_checkpoint_meta optim_meta;
  srt_status ms = srt_checkpoint_read_meta(o, &optim_meta);
  if (ms || optim_meta.step != step || optim_meta.adam_step != adam) {
    bool steps = optim_meta.step != step;
    int64_t theirs = steps ? optim_meta.step : optim_meta.adam_step;
    return ms ? ms
              : theirs < 0
                  ? SRT_ERROR(SRT_DATA_LOSS,
                              "checkpoint '%s': its optimizer file '%s' has no shardrt.%s",
                              path, optim, steps ? "step" : "adam_step")
                  : SRT_ERROR(SRT_DATA_LOSS,
                              "checkpoint '%s' has shardrt.%s %lld but its optimizer file "
                              "'%s' has %lld",
                              path, steps ? "step" : "adam_step",
                              (long long)(steps ? step : adam), optim, (long long)theirs);
  }
  // One checkpoint is one run's: weights and optimizer state of two runs at
  // the same step (a file copied beside another run's) are not a resume.
  const char *run = srt_safetensors_metadata(first, "shardrt.run");
  const char *orun = srt_safetensors_metadata(o, "shardrt.run");
  if ((run || orun) && (!run || !orun || strcmp(run, orun)))
    return SRT_ERROR(SRT_DATA_LOSS,
                     "checkpoint '%s' is of run '%.64s' but its optimizer file '%s' is of run "
                     "'%.64s': the two files are not one checkpoint (another run's optimizer "
                     "file at the same step?)",
                     path, run ? run : "(none recorded)", optim,
                     orun ? orun : "(none recorded)");
  // One save's: forks of one run share its run id, and save at the same
  // steps. Files from before save ids (neither has one) pair as before.
  const char *save = srt_safetensors_metadata(first, "shardrt.save");
  const char *osave = srt_safetensors_metadata(o, "shardrt.save");
  if ((save || osave) && (!save || !osave || strcmp(save, osave)))
    return SRT_ERROR(SRT_DATA_LOSS,
                     "checkpoint '%s' is save '%.64s' but its optimizer file '%s' is of save "
                     "'%.64s': the two files were not written together (the optimizer file "
                     "of another fork of run '%.64s', or of another save at step %lld?)",
                     path, save ? save : "(none recorded)", optim,
                     osave ? osave : "(none recorded)", run ? run : "(none recorded)",
                     (long long)step);
  return NULL;
}

srt_status train_load(srt_context *ctx, const srt_program *p, uint8_t *arena,
                      const char *path, train_state *state, train_input *in,
                      char *prev_optim) {
  const srt_mesh *mesh = srt_context_placement_mesh(ctx);
  int coord[SRT_MESH_NDIMS];
  srt_context_coord(ctx, coord);
  *state = (train_state){0};
  prev_optim[0] = 0;
  SRT_RETURN_IF_ERROR(srt_checkpoint_source_open(path, &in->src));
  srt_status s = load_weights(ctx, p, arena, in);
  srt_checkpoint_meta meta = {NULL, -1, -1};
  if (!s)
    s = srt_checkpoint_read_meta(srt_checkpoint_source_first(in->src), &meta);
  if (s || !meta.optimizer)
    return s; // weights only: a fresh optimizer at step 0
  int64_t step = meta.step, adam = meta.adam_step;
  char optim[PATH_MAX_LEN];
  int len = snprintf(optim, sizeof optim, "%s%s", srt_checkpoint_source_dir(in->src),
                     meta.optimizer);
  if (len < 0 || (size_t)len >= sizeof optim)
    return SRT_ERROR(SRT_INVALID_ARGUMENT, "checkpoint '%s': its optimizer file's path is "
                     "longer than %zu bytes", path, sizeof optim - 1);

  srt_safetensors *o = NULL;
  SRT_RETURN_IF_ERROR(srt_safetensors_open(optim, &o));
  s = check_optim_file(path, optim, srt_checkpoint_source_first(in->src), o, step, adam);
  if (s) {
    srt_safetensors_close(o);
    return s;
  }
  const char *run = srt_safetensors_metadata(srt_checkpoint_source_first(in->src), "shardrt.run");
  int32_t n = p->num_params;
  srt_tensor *views = calloc((size_t)(2 * n + 1), sizeof *views);
  char **names = calloc((size_t)(2 * n + 1), sizeof *names);
  if (!views || !names)
    s = SRT_ERROR(SRT_RESOURCE_EXHAUSTED, "checkpoint: out of memory");
  if (!s)
    s = moment_views(p, arena, views, names);
  for (int32_t i = 0; i < 2 * n && !s; ++i)
    s = srt_checkpoint_load_shard(o, mesh, coord, &views[i]);
  if (!s)
    s = check_no_extra_moments(o, p);
  free_names(names, 2 * n);
  free(views);
  srt_safetensors_close(o);
  if (!s) {
    state->step = step;
    state->adam_step = adam;
    const char *schedule =
        srt_safetensors_metadata(srt_checkpoint_source_first(in->src), "shardrt.lr_schedule");
    snprintf(state->lr_schedule, sizeof state->lr_schedule, "%s", schedule ? schedule : "");
    if (run && train_run_id_valid(run)) // kept: the resumed run is the same run
      snprintf(state->run_id, sizeof state->run_id, "%s", run);
    state->batch = train_meta_int(srt_checkpoint_source_first(in->src), "shardrt.batch");
    state->seq = train_meta_int(srt_checkpoint_source_first(in->src), "shardrt.seq");
    snprintf(prev_optim, PATH_MAX_LEN, "%s", optim);
  }
  return s;
}
