// Ranks agree (issue 39): an MPMD launch (`mpirun -np 1 ./a : -np 1 ./b`)
// or per-rank flags can give the ranks different programs or options, and
// then they train a hybrid, step each shard at its own lr, or exchange
// buffers of other sizes (MPI_ERR_TRUNCATE, a crash). Before the context or
// any collective whose size depends on the program, every rank builds a
// record of fixed size (a digest and a short text per item: the program's
// config, mesh, shapes, parameter table and memory plan, and the options
// that must be the same everywhere), rank 0's is broadcast, and the first
// item where any rank differs is named by that rank, with both values.
#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "train_internal.h"

enum { SLOTS = 64, NAME_BYTES = 32, TEXT_BYTES = 216 };

// One item of the record: what it is, the digest of its full value and the
// value's text (cut to TEXT_BYTES - 1 bytes: the digest decides).
typedef struct slot {
  uint64_t hash;
  char name[NAME_BYTES];
  char text[TEXT_BYTES];
} slot;

typedef struct record {
  slot s[SLOTS];
  int n;
} record;

static const uint64_t kFnvBasis = TRAIN_FNV1A_BASIS;

// Adds item `name` whose value is the formatted text (its digest: of the
// whole text), or, when `hash` is not 0, that digest with the text shown.
static void add(record *r, const char *name, uint64_t hash, const char *fmt, ...) {
  if (r->n >= SLOTS)
    return;
  char full[4096];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(full, sizeof full, fmt, ap);
  va_end(ap);
  slot *s = &r->s[r->n++];
  s->hash = hash ? hash : train_fnv1a(kFnvBasis, full, strlen(full));
  snprintf(s->name, sizeof s->name, "%s", name);
  snprintf(s->text, sizeof s->text, "%s", full);
}

// The config as compiled, canonical (keys sorted, no spaces), so that only
// values count; its raw text when it does not parse. Owned by the caller.
static char *canonical_config(const char *text) {
  json_error_t err;
  json_t *root = text ? json_loads(text, 0, &err) : NULL;
  char *out = root ? json_dumps(root, JSON_SORT_KEYS | JSON_COMPACT | JSON_ENCODE_ANY) : NULL;
  json_decref(root);
  return out ? out : strdup(text ? text : "");
}

// Digest of the parameter table: every field of every parameter.
static uint64_t params_hash(const srt_program *p) {
  uint64_t h = kFnvBasis;
  for (int32_t k = 0; k < p->num_params; ++k) {
    const srt_param_info *q = &p->params[k];
    h = train_fnv1a(h, q->name, strlen(q->name) + 1);
    int64_t v[] = {q->init,       q->rank,       q->offset,         q->grad_offset,
                   q->m_offset,   q->v_offset,   q->compute_offset, q->zero_row,
                   q->num_tp_blocks};
    h = train_fnv1a(h, v, sizeof v);
    h = train_fnv1a(h, q->global_shape, sizeof q->global_shape);
    h = train_fnv1a(h, q->local_shape, sizeof q->local_shape);
    h = train_fnv1a(h, q->tp_blocks, sizeof q->tp_blocks);
    for (int d = 0; d < 2; ++d) {
      int32_t pl[2] = {(int32_t)q->placement[d].kind, (int32_t)q->placement[d].dim};
      h = train_fnv1a(h, pl, sizeof pl);
    }
  }
  return h;
}

// The program's items. A program of another ABI has another layout: only
// its ABI is read.
static void add_program(record *r, const srt_program *p) {
  add(r, "program ABI", 0, "%d", (int)p->abi);
  if (p->abi != SRT_PROGRAM_ABI)
    return;
  char *config = canonical_config(p->config_json);
  add(r, "program config", train_fnv1a(kFnvBasis, config, strlen(config)), "'%s'",
      p->model ? p->model : "?");
  free(config);
  add(r, "program mesh", 0, "dp=%lld x tp=%lld", (long long)p->dp, (long long)p->tp);
  add(r, "program batch", 0, "batch %lld x seq %lld (%d micro-batches), vocab %lld",
      (long long)p->batch, (long long)p->seq, (int)p->grad_accum_steps, (long long)p->vocab);
  add(r, "program parameters", params_hash(p), "%d parameter tensors (table digest %016llx)",
      (int)p->num_params, (unsigned long long)params_hash(p));
  add(r, "program memory plan", 0,
      "arena %lld bytes, persistent %lld, offload %lld, ids at %lld, labels at %lld, "
      "positions at %lld, segments at %lld, logits %d at %lld",
      (long long)p->arena_bytes, (long long)p->persistent_bytes, (long long)p->offload_bytes,
      (long long)p->input_ids_offset, (long long)p->labels_offset,
      (long long)p->position_ids_offset, (long long)p->segment_ids_offset, (int)p->logits_kept,
      (long long)p->logits_offset);
  add(r, "program init", 0, "initializer_range %.17g", p->initializer_range);
  add(r, "program checkpoint names", 0, "%s", p->checkpoint_names ? p->checkpoint_names : "");
  add(r, "program backend", 0, "%s", p->backend->name);
}

// Input file `flag` (`path`, NULL when not given): what it is (its size
// and content, train_input_identity), not how this rank spells it.
static void add_input(record *r, const char *flag, const char *path) {
  char text[TEXT_BYTES];
  if (!path)
    add(r, flag, 0, "(none)");
  else
    add(r, flag, train_input_identity(path, text, sizeof text), "%s", text);
}

// Output `flag` (`path`, NULL when not given): only rank 0 writes it (the
// gathers of a save or dump, the export's files, the locks, the rotation),
// so only whether it is given must agree (every rank takes part in the
// writes); rank 0's spelling is the one used.
static void add_output(record *r, const char *flag, const char *path) {
  add(r, flag, train_fnv1a(kFnvBasis, path ? "given" : "none", path ? 5 : 4), "%s%s%s",
      path ? "'" : "(none)", path ? path : "", path ? "'" : "");
}

// The options every rank must share: what the step computes (the
// optimizer, the data), the files the ranks read (by what they hold) and
// whether they write (rank 0 writes). Per-rank ones (--threads) are left
// out; so are those only rank 0 acts on (--log-every, --metrics,
// --profile). The lr schedule is compared once resolved
// (train_agree_schedule): a flag left out on a resume takes the
// checkpoint's value, which may be the other rank's given one.
static void add_options(record *r, const train_options *o) {
  add_input(r, "--data", o->data);
  add_input(r, "--batch-file", o->batch_file);
  add(r, "--steps", 0, "%lld", (long long)o->steps);
  add(r, "--override-lr-schedule", 0, "%s", o->override_lr_schedule ? "given" : "not given");
  add(r, "--betas", 0, "%.9g,%.9g", (double)o->beta1, (double)o->beta2);
  add(r, "--eps", 0, "%.9g", (double)o->eps);
  add(r, "--weight-decay", 0, "%.9g", (double)o->weight_decay);
  add(r, "--max-grad-norm", 0, "%.9g", (double)o->max_grad_norm);
  add(r, "--norm-type", 0, "%.17g", o->norm_type);
  add(r, "--seed", 0, "%llu", (unsigned long long)o->seed);
  add_input(r, "--load", o->load);
  add_output(r, "--save", o->save);
  add(r, "--save-every", 0, "%lld", (long long)o->save_every);
  add(r, "--keep-last", 0, "%lld", (long long)o->keep_last);
  add_output(r, "--dump", o->dump);
  add(r, "--max-skipped", 0, "%lld", (long long)o->max_skipped);
  add(r, "--timeout", 0, "%.17g", o->timeout_s);
  add_input(r, "--eval-data", o->eval_data);
  add(r, "--eval-every", 0, "%lld", (long long)o->eval_every);
  add(r, "--eval-batches", 0, "%lld", (long long)o->eval_batches);
  add_output(r, "--export", o->export_dir);
  add(r, "--export-dtype", 0, "%s",
      o->export_dtype == SRT_DTYPE_COUNT ? "(the input's)" : srt_dtype_name(o->export_dtype));
  add(r, "--max-shard-size", 0, "%lld", (long long)o->max_shard_bytes);
}

// The first top-level config key whose value differs between the canonical
// texts `a` (rank 0's) and `b`, into `key`, with both values; 0 if none.
static int config_difference(const char *a, const char *b, char *key, size_t key_size,
                             char **va, char **vb) {
  json_error_t err;
  json_t *ja = json_loads(a, 0, &err), *jb = json_loads(b, 0, &err);
  int found = 0;
  const char *k;
  json_t *v;
  for (int pass = 0; pass < 2 && !found && json_is_object(ja) && json_is_object(jb); ++pass)
    json_object_foreach(pass ? jb : ja, k, v) {
      json_t *x = json_object_get(ja, k), *y = json_object_get(jb, k);
      if (x && y && json_equal(x, y))
        continue;
      snprintf(key, key_size, "%s", k);
      size_t flags = JSON_COMPACT | JSON_ENCODE_ANY | JSON_REAL_PRECISION(9);
      *va = x ? json_dumps(x, flags) : strdup("(absent)");
      *vb = y ? json_dumps(y, flags) : strdup("(absent)");
      found = 1;
      break;
    }
  json_decref(ja);
  json_decref(jb);
  return found;
}

// A mismatch on the config: rank 0's canonical text goes to every rank
// (its length first, so every rank receives what is sent), and rank
// `differ` names the first key that differs.
static void explain_config(const srt_program *p, int rank, int differ) {
  char *mine = canonical_config(p->config_json);
  long long n = (long long)strlen(mine);
  train_plane_bcast(&n, sizeof n);
  char *root = rank == 0 ? mine : calloc((size_t)n + 1, 1);
  if (!root) { // no memory on this rank: the others still take part below
    static char none[1];
    root = none;
    n = 0;
  }
  train_plane_bcast(root, (size_t)n);
  if (rank == differ) {
    char key[256], *va = NULL, *vb = NULL;
    if (config_difference(root, mine, key, sizeof key, &va, &vb))
      fprintf(stderr,
              "train: rank %d runs another program than rank 0: its config differs at '%s': "
              "%s on rank 0, %s on rank %d (every rank must run one program, compiled from "
              "one config)\n",
              rank, key, va ? va : "?", vb ? vb : "?", rank);
    else
      fprintf(stderr, "train: rank %d runs another program than rank 0: the configs it was "
              "compiled from differ\n", rank);
    free(va);
    free(vb);
  }
  if (rank != 0 && n > 0)
    free(root);
  free(mine);
}

static int compare(const srt_program *p, const record *mine);

int train_agree(const srt_program *p, const train_options *o, const char *command_line) {
  if (train_plane_size() == 1)
    return 0;
  static record mine; // 14 KiB, not on the stack
  memset(&mine, 0, sizeof mine);
  add(&mine, "record", 0, "shardrt train v2, %d items of %zu bytes", SLOTS, sizeof(slot));
  add(&mine, "command line", 0, "%s", command_line);
  add_program(&mine, p);
  if (o)
    add_options(&mine, o);
  return compare(p, &mine);
}

// Compares record `mine` with rank 0's; the lowest rank that differs on
// the first differing item names it (for the config: `p`'s first key).
// Collective. Returns 0 when all agree, 1 on every rank otherwise.
static int compare(const srt_program *p, const record *mine) {
  int rank = train_plane_rank();
  static record root; // 14 KiB, not on the stack
  root = *mine;
  train_plane_bcast(root.s, sizeof root.s);
  int first = SLOTS;
  for (int k = 0; k < SLOTS && first == SLOTS; ++k)
    if (mine->s[k].hash != root.s[k].hash || strcmp(mine->s[k].name, root.s[k].name))
      first = k;
  // The smallest item, then the smallest rank: one maximum.
  int64_t max = first < SLOTS ? ((int64_t)(SLOTS - first) << 32) | (INT32_MAX - rank) : 0;
  train_plane_allreduce(&max, SRT_I64, SRT_REDUCE_MAX);
  if (max == 0)
    return 0;
  int item = SLOTS - (int)(max >> 32), differ = INT32_MAX - (int)(max & 0xffffffff);
  // Every rank takes the same branch: rank 0's item names it. (The config
  // item exists only where the program's ABI, compared before it, agrees.)
  if (p && !strcmp(root.s[item].name, "program config"))
    explain_config(p, rank, differ);
  else if (rank == differ)
    fprintf(stderr,
            "train: rank %d disagrees with rank 0 on %s: %s on rank 0, %s on rank %d (every "
            "rank must run one program with the same options; only --threads may differ)\n",
            rank, root.s[item].name[0] ? root.s[item].name : mine->s[item].name,
            root.s[item].text[0] ? root.s[item].text : "(nothing)",
            mine->s[item].text[0] ? mine->s[item].text : "(nothing)", rank);
  fflush(stderr);
  return 1;
}

int train_agree_schedule(const train_lr_schedule *s) {
  if (train_plane_size() == 1)
    return 0;
  static record mine;
  memset(&mine, 0, sizeof mine);
  static const char *const kKinds[] = {"constant", "linear", "cosine", "wsd"};
  add(&mine, "--lr-schedule", 0, "%s", kKinds[s->kind & 3]);
  add(&mine, "--lr", 0, "%.17g", s->lr);
  add(&mine, "--warmup-steps", 0, "%lld", (long long)s->warmup);
  add(&mine, "--min-lr", 0, "%.17g", s->min_lr);
  add(&mine, "--lr-decay-steps", 0, "%lld", (long long)s->decay_steps);
  add(&mine, "--decay-fraction", 0, "%.17g", s->decay_fraction);
  return compare(NULL, &mine);
}
