// The training driver's parts (runtime/train/): command-line options,
// weight initialisation, training checkpoints (weights + optimizer state),
// batch files and step dumps (checks against a reference) and the step loop
// in main.c, linked against a compiled program that defines `shard_program`.
#ifndef SHARDRT_TRAIN_INTERNAL_H
#define SHARDRT_TRAIN_INTERNAL_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "shardrt/checkpoint.h"
#include "shardrt/checkpoint_names.h"
#include "shardrt/checkpoint_source.h"
#include "shardrt/cp.h"
#include "shardrt/context.h"
#include "shardrt/backend.h"
#include "shardrt/launch_env.h"
#include "shardrt/program.h"
#include "shardrt/tokens.h"
#include "shardrt/tensor.h"
#include "shardrt/status.h"
#include "shardrt/types.h"

/// The compiled step this driver trains (defined by generated code).
extern const srt_program shard_program;

/// --lr-schedule.
typedef enum train_lr_kind {
  TRAIN_LR_CONSTANT, ///< lr (after the warmup)
  TRAIN_LR_LINEAR,   ///< lr -> min_lr linearly from the warmup's end to decay_steps
  TRAIN_LR_COSINE,   ///< lr -> min_lr along half a cosine, same span
  TRAIN_LR_WSD,      ///< warmup, stable at lr, linear to min_lr over the last decay_fraction
} train_lr_kind;

/// A learning-rate schedule: lr at each AdamW step (1-based; skipped steps
/// do not advance it, as in Megatron-LM).
typedef struct train_lr_schedule {
  train_lr_kind kind;    ///< --lr-schedule (constant)
  double lr;             ///< --lr: the peak
  double min_lr;         ///< --min-lr (0): where the decay ends
  int64_t warmup;        ///< --warmup-steps (0): linear from lr/warmup at step 1 to lr
  int64_t decay_steps;   ///< --lr-decay-steps (--steps): the step the decay reaches min_lr
  double decay_fraction; ///< --decay-fraction (0.1): wsd's share of the post-warmup steps
} train_lr_schedule;

/// --lr-schedule's value to a kind. Errors: SRT_INVALID_ARGUMENT naming it.
srt_status train_lr_schedule_parse(const char *v, train_lr_kind *out);

/// The learning rate of AdamW step `step` (>= 1) under `s`: warmup
/// lr * step / warmup for step <= warmup; then constant lr, or
/// min_lr + c (lr - min_lr) with c = 1 - r (linear) or (1 + cos(pi r)) / 2
/// (cosine), r = (step - warmup) / (decay_steps - warmup), and min_lr from
/// decay_steps on; wsd: lr until decay_steps - D, then c = 1 - (step -
/// decay_steps + D) / D with D = train_lr_wsd_decay_steps. Sources:
/// Megatron-LM OptimizerParamScheduler.get_lr, torchtitan lr_scheduler.
double train_lr_at(const train_lr_schedule *s, int64_t step);

/// wsd's decay steps D: decay_fraction x (decay_steps - warmup), rounded, >= 1.
int64_t train_lr_wsd_decay_steps(const train_lr_schedule *s);

/// A canonical one-line description ("cosine lr=0.001 warmup=10 min_lr=0
/// decay_steps=100"), recorded in checkpoints so that a resumed run is
/// checked to continue the same schedule.
void train_lr_describe(const train_lr_schedule *s, char *buf, size_t size);

/// The flags of a schedule (train_options.schedule_given bits, in the
/// order a resume compares them).
enum {
  TRAIN_GIVEN_KIND = 1,           ///< --lr-schedule
  TRAIN_GIVEN_LR = 2,             ///< --lr
  TRAIN_GIVEN_WARMUP = 4,         ///< --warmup-steps
  TRAIN_GIVEN_MIN_LR = 8,         ///< --min-lr
  TRAIN_GIVEN_DECAY_STEPS = 16,   ///< --lr-decay-steps
  TRAIN_GIVEN_DECAY_FRACTION = 32 ///< --decay-fraction
};

/// Parses a train_lr_describe text (a checkpoint's shardrt.lr_schedule)
/// into *out (fields it does not hold keep out's values). Errors:
/// SRT_DATA_LOSS naming the text when it is not such a description.
srt_status train_lr_parse_description(const char *text, train_lr_schedule *out);

/// A resume continues the schedule its checkpoint recorded (`recorded`, a
/// train_lr_describe text of checkpoint `ckpt`): each schedule flag not in
/// `given` (TRAIN_GIVEN_* bits) takes the recorded value, appended to
/// `taken` (of `size` bytes, "--lr-schedule, --lr, ..."; "" if none); a
/// flag given with another value than the recorded one is an error.
/// Fields the recorded kind does not define (min_lr, decay_steps of a
/// constant schedule) are left as given. Errors: SRT_FAILED_PRECONDITION
/// naming the flag, the recorded value and the given one;
/// train_lr_parse_description's.
srt_status train_lr_resume(train_lr_schedule *s, unsigned given, const char *recorded,
                           const char *ckpt, char *taken, size_t size);

/// Completes a schedule once its flags and any recorded values are known:
/// decay_steps defaults to `steps`; then the checks of train_lr_check and
/// that min_lr, decay_steps (given) and decay_fraction belong to the kind.
/// Errors: SRT_INVALID_ARGUMENT naming the flag and value.
srt_status train_lr_finish(train_lr_schedule *s, unsigned given, int64_t steps);

/// Errors: SRT_INVALID_ARGUMENT for min_lr outside [0, lr], a negative
/// warmup, a decay that ends within the warmup, a decay fraction outside
/// (0, 1].
srt_status train_lr_check(const train_lr_schedule *s);

/// The first row of a step's global batch that this dp rank takes for
/// micro-batch `micro` (0..grad_accum_steps): micro-batches are consecutive
/// slices of dp x local_batch rows, each split over dp in rank order.
int64_t train_first_row(srt_context *ctx, const srt_program *p, int64_t micro);


/// One piece of a packed row: tokens [offset, offset + length) of document
/// `doc` of the token file (offset > 0: a continuation of a split document).
typedef struct train_pack_piece {
  int64_t doc, offset, length;
} train_pack_piece;

/// The rows of one epoch over a token file's documents (docs/data.md,
/// "Packed documents"): row r holds pieces [row_first[r], row_first[r + 1]).
typedef struct train_pack_plan {
  int64_t seq;                     ///< tokens per row
  int64_t rows;                    ///< rows of one epoch
  int64_t *row_first;              ///< rows + 1 piece indices
  train_pack_piece *pieces;        ///< num_pieces, in file order
  int64_t num_pieces;
  const int64_t *starts, *prompts; ///< the document index (borrowed: srt_tokens_document_starts)
  int64_t documents;
} train_pack_plan;

/// Plans one epoch of rows of `seq` tokens over `documents` documents
/// (document d = tokens [starts[d], starts[d + 1]), its first prompts[d]
/// without loss; the index as srt_tokens_open checks it) by next-fit in
/// file order: each document goes after the previous one in the current
/// row when it fits, else it starts the next row (the rest of the row is
/// padding); a document longer than `seq` starts a row of its own and is
/// cut into pieces of `seq` tokens, each a full row, and its tail, which
/// the next documents may share. Next-fit keeps the file's order (an epoch
/// reads the documents as the file lists them, which first-fit or
/// best-fit-decreasing would reorder) and needs one pass; a row's padding
/// is shorter than the next document. The plan borrows starts and prompts.
/// Errors: SRT_INVALID_ARGUMENT for seq or documents <= 0;
/// SRT_RESOURCE_EXHAUSTED (*out is then empty).
srt_status train_pack_plan_build(const int64_t *starts, const int64_t *prompts,
                                 int64_t documents, int64_t seq, train_pack_plan *out);

/// Frees what train_pack_plan_build allocated; an empty plan is fine.
void train_pack_plan_free(train_pack_plan *plan);

/// Reads tokens [at, at + n) of a token source into ids (srt_tokens_read on
/// a file; an array in the tests).
typedef srt_status (*train_token_reader)(const void *source, int64_t at, int64_t n,
                                         int64_t *ids);

/// Where train_pack_fill writes: int64 [rows, seq] each, row-major.
/// positions and segments may be NULL (not written).
typedef struct train_pack_rows {
  int64_t *ids;       ///< token ids; padding: the pad id
  int64_t *labels;    ///< ids, or -100 on prompt tokens, each document's first token, padding
  int64_t *positions; ///< the token's place in its document (a continuation goes on from
                      ///< its offset); padding: 0
  int64_t *segments;  ///< the piece's index within its row (0, 1, ...); padding: -1
} train_pack_rows;

/// Fills global rows [row0, row0 + rows) of step `step` (1-based) of a
/// global batch of `batch` rows from `plan`: step k's row r is epoch row
/// ((k - 1) * batch + r) mod plan->rows, so steps walk the epoch in order,
/// wrap around, and any step's rows follow from its number alone (a resumed
/// run reads the uninterrupted run's batches). Labels stay unshifted (the
/// loss shifts them: labels[t + 1] is scored from position t, and labels
/// [t = 0] never); a continuation piece starts its row, so its first label,
/// kept, is never scored either, and no scored label follows a token of
/// another document. Errors: SRT_INVALID_ARGUMENT for step < 1, rows
/// outside the batch or a row number past int64; the reader's errors.
srt_status train_pack_fill(const train_pack_plan *plan, int64_t step, int64_t batch,
                           int64_t row0, int64_t rows, int64_t pad_id, train_token_reader read,
                           const void *source, const train_pack_rows *out);

/// What the rows of a step hold, for the log: documents per row =
/// documents / rows (a split document's pieces each count), padding share
/// = padding / (rows x seq).
typedef struct train_pack_stats {
  int64_t rows, documents, tokens, padding;
} train_pack_stats;

/// The figures of global rows [row0, row0 + rows) of step `step` (as
/// train_pack_fill reads them; no token is read). Errors: those of
/// train_pack_fill's row numbers.
srt_status train_pack_stats_of(const train_pack_plan *plan, int64_t step, int64_t batch,
                               int64_t row0, int64_t rows, train_pack_stats *stats);

/// The id of padding in packed rows: any id the model has (its label is
/// -100, its segment -1: nothing attends to it and no loss sees it).
#define TRAIN_PAD_ID 0

/// Fills this dp rank's rows of micro-batch `micro` of step `step`'s global
/// batch of the version 2 `tokens` packed by `plan` (train_pack_fill with
/// rows from train_first_row, local_batch of them, pad TRAIN_PAD_ID) into
/// `out` (ids, labels; positions and segments where not NULL). Errors:
/// train_pack_fill's and the file's read errors.
srt_status train_load_packed(srt_context *ctx, const srt_program *p, const train_pack_plan *plan,
                             const srt_tokens *tokens, int64_t step, int64_t micro,
                             const train_pack_rows *out);

/// Fills this dp rank's rows of micro-batch `micro` (0 without gradient
/// accumulation) of step `step`'s global batch of `tokens` (docs/data.md)
/// into the program's input ids, labels, position ids and segment ids in
/// the host `arena`: packed by `plan` when it is not NULL (a version 2
/// file: train_load_packed), else the windows of srt_tokens_batch, each
/// row one document (train_one_document). Errors: those of
/// srt_tokens_batch or train_load_packed.
srt_status train_load_batch(srt_context *ctx, const srt_program *p, uint8_t *arena,
                            const srt_tokens *tokens, const train_pack_plan *plan, int64_t step,
                            int64_t micro);

/// The rows of a version 2 `tokens` (documents) for a program of `seq`
/// tokens per row into *plan (train_pack_plan_build over the file's index);
/// *plan is left empty (rows 0) for a version 1 file. Errors:
/// SRT_OUT_OF_RANGE naming the file when it holds no document;
/// train_pack_plan_build's.
srt_status train_pack_setup(const srt_tokens *tokens, int64_t seq, train_pack_plan *plan);

/// Whether program `p` can train on packed documents (a version 2 token
/// file `path`): its step must take the position_ids and segment_ids
/// inputs. Errors: SRT_FAILED_PRECONDITION naming the file when it does
/// not (offsets -1: a hand-written step).
srt_status train_packed_supported(const srt_program *p, const char *path);

/// When `tokens` (a version 2 file) names a tokenizer other than the one
/// compiled into `p` (srt_program.tokenizer_json, compared by
/// srt_tokenizer_digest), or holds byte-level tokens while `p` has a
/// tokenizer, writes a warning naming both into buf (of `size` bytes) and
/// returns true; false when they agree or either does not say (a version 1
/// file, a program compiled without tokenizer.json).
bool train_tokenizer_mismatch(const srt_program *p, const srt_tokens *tokens, char *buf,
                              size_t size);

/// Writes the document structure of rows that are one document each into
/// the host `arena`: position ids 0..seq-1 and segment ids 0 (int64
/// [local_batch, seq] each), where the program takes them (offset >= 0).
void train_one_document(const srt_program *p, uint8_t *arena);

/// 1 when the segment ids of the host `arena` are all 0 (each row one
/// document, as train_one_document writes them) or the program takes none;
/// else 0 (srt_exec.one_document).
int32_t train_one_document_rows(const srt_program *p, const uint8_t *arena);

/// Copies the input ids, labels, position ids and segment ids (those the
/// program takes) of the host `arena` to the device arena.
/// Errors: the backend's copy errors.
srt_status train_upload_batch(const srt_backend *backend, void *device, const srt_program *p,
                              const uint8_t *arena);

/// The token tensors of a batch to read: int64 [rows, seq] each, row-major
/// (labels unshifted, as train_pack_fill and batch files give them).
/// positions and segments may be NULL (not read).
typedef struct train_rows_view {
  const int64_t *ids, *labels, *positions, *segments;
} train_rows_view;

/// Writes cp rank `c`'s local batch [rows, seq/cp] (srt_cp_take's token
/// order) from the global batch [rows, seq]: ids, positions and segments
/// carried per token (rotary positions and document masks stay those of
/// the token's place in its row and document, across chunk boundaries).
/// At cp 1 every tensor is copied unchanged. At cp > 1 the labels are
/// shifted over the global row first: the local label of global token t
/// is the global label of token t + 1, and -100 at the row's last token
/// (nothing follows it). The compiled loss shifts within its local rows,
/// which cannot see the next chunk; so at cp > 1 the step's contract is
/// that its loss does NOT shift: the logits at local position j are scored
/// against local label j, -100 excluded, and the mean divides by the count
/// of scored labels summed over dp x cp, which equals the unsharded
/// count (docs/runtime.md, "Context parallelism"). A -100 at a document's
/// first token (train_pack_fill) becomes a -100 at the previous document's
/// last token, so no scored label crosses a document boundary, as
/// unsharded. local->positions (segments) is written where not NULL, from
/// global->positions (segments). Errors: srt_cp_take's;
/// SRT_INVALID_ARGUMENT for a local positions or segments without the
/// global one.
srt_status train_cp_split(const train_rows_view *global, int64_t rows, int64_t seq, int cp,
                          int c, const train_pack_rows *local);

/// The tokens per row of the step's inputs: seq / cp (its cp rank's two
/// chunks of each row), seq without context parallelism.
int64_t train_local_seq(const srt_program *p);

/// A context-parallel step's batch staged whole (runtime/train/cp_stage.c):
/// `view` is the program as the batch loaders see it (cp 1, its inputs at
/// offsets into `rows`, [local_batch, seq] each); `rows` is NULL without
/// context parallelism.
typedef struct train_cp_stage {
  srt_program view;
  uint8_t *rows;
} train_cp_stage;

/// Fills *st for `p`: at cp > 1 allocates `rows`. Errors:
/// SRT_RESOURCE_EXHAUSTED when it cannot.
srt_status train_cp_stage_init(const srt_program *p, train_cp_stage *st);

/// Frees st->rows (NULL is fine).
void train_cp_stage_free(train_cp_stage *st);

/// Writes this cp rank's share (train_cp_split) of the staged batch into
/// the step's inputs in `arena`. Errors: train_cp_split's.
srt_status train_cp_stage_split(const train_cp_stage *st, srt_context *ctx,
                                const srt_program *p, uint8_t *arena);

/// What a step or an evaluation runs on.
typedef struct train_eval {
  srt_exec *exec;              ///< the step's execution (device arena and backend)
  const srt_program *program;
  uint8_t *arena;              ///< the host arena (batches are loaded there first)
  const srt_backend *backend;  ///< the backend the step runs on (the program's)
  const train_pack_plan *plan; ///< the packing of a version 2 token file, or NULL (windows)
  const train_cp_stage *cp;    ///< where batches are loaded first at cp > 1, or NULL
} train_eval;

/// The mean over the scored labels of batches 1..`batches` of `tokens` (the
/// same ones every time: batching depends only on the batch number) of the
/// program's loss (each batch's mean weighted by its count of scored
/// labels; NAN when no batch scores any), each a forward-only step (`options` with forward_only set; no parameter,
/// moment or counter changes). Collective over the world: every rank gets
/// the same mean. The profile, if any, does not count these steps.
/// Errors: those of the batches and the step.
srt_status train_evaluate(const train_eval *ev, const srt_tokens *tokens, int64_t batches,
                          srt_step_options options, double *mean_loss);

/// Runs training step `step` on `ev`: its batch (from `tokens`, or when
/// NULL from `batch_file`, or what the arena holds when both are NULL) and
/// the compiled step, once per micro-batch of a program that accumulates
/// gradients (grad_accum_steps > 1): each micro-batch weighted by its
/// scored labels over dp (labels[:, 1:] != -100), the gradients summed in
/// `grad_accum` (one float per local gradient element; zeroed here) and
/// the optimizer stepping once on their token-weighted mean; the reported
/// loss is that mean over the whole batch too. Collective over the world.
/// With `options.forward_only` (an evaluation) nothing accumulates and
/// the loss is the same weighted mean. `scored` (may be NULL) receives the
/// step's scored labels over the whole global batch (0: every label is
/// -100, and the loss, a mean over nothing, is reported as 0 by the step).
/// Errors: those of the batches and the step.
srt_status train_run_step(const train_eval *ev, const srt_tokens *tokens,
                          const char *batch_file, int64_t step, srt_step_options options,
                          float *grad_accum, srt_step_result *result, double *scored);

/// Model FLOPs per trained token: the program table's flops_per_token,
/// which shard-import counts from the model (torchtitan's count with
/// Megatron-LM's Mamba2 scan term; tools/shard-import/flops.h); 0 for a
/// program built from IR that did not say it.
double train_flops_per_token(const srt_program *p);

/// The peak of the whole run for MFU, in FLOP/s, summed over the ranks of
/// MPI_COMM_WORLD (collective): the backend's peak_flops hook on `device`
/// (the cpu's fp32 GEMMs measured by all ranks at once, so that each sees
/// the others' load; a GPU's dense bf16 datasheet figure). 0 (MFU unknown) when the backend has
/// no hook or any rank's figure failed (its error is printed, the run goes
/// on). `source` (of `size` bytes) receives rank 0's description.
double train_peak_flops(const srt_backend *backend, void *device, char *source, size_t size);

/// One step's figures, for the console and --metrics.
typedef struct train_step_metrics {
  int64_t step, steps;
  float loss;
  double grad_norm, lr;
  double step_s;       ///< seconds of the step
  double tokens_per_s; ///< global tokens of the step / step_s
  double mfu;          ///< model FLOP/s over the peak of every rank; < 0: unknown
  double eta_s;        ///< the remaining steps at the mean step time so far
  bool skipped;
  bool no_labels;      ///< every label of the step is -100: the loss scored nothing
} train_step_metrics;

/// Prints the console line of a step (rank 0):
/// `step 120/1000 | loss L | norm G | lr F | 412.3 ms | MFU 38.2% | 9.9k tok/s | eta 6m`
/// (loss and norm with 9 significant digits, lr 6; MFU '-' when unknown;
/// a step without labels shows `loss -`, not 0, and ends with `| NO LABELS
/// (every label is -100: nothing scored)`).
void train_print_step(const train_step_metrics *m);

/// Appends the JSON object of a step to `f` (one line: step, loss,
/// grad_norm, lr, tokens_per_s, mfu, step_ms, skipped, and eval_loss when
/// `eval_loss` is not NULL; non-finite numbers and an unknown MFU as null;
/// a step without labels has loss null and "no_labels": true)
/// and flushes it. Returns 0, or -1 on a write error.
int train_metrics_write(FILE *f, const train_step_metrics *m, const double *eval_loss);

/// Opens --metrics `path` for appending (created when absent) into *out. A
/// file whose last line was cut off (no final newline: a full disk, a kill
/// mid-write) first gets a newline, so that this run's first record starts a
/// line of its own instead of being glued to the fragment. Returns an
/// SRT_IO error naming the path when it cannot be opened or written.
srt_status train_metrics_open(const char *path, FILE **out);

/// The checkpoint path of step `step` under --keep-last: `save` with
/// "-step%08d" before its ".safetensors" (or at its end). Returns 0, or -1
/// when it does not fit in `size`.
int train_step_path(const char *save, int64_t step, char *out, size_t size);

/// After the save of step `step`: removes all but the `keep` newest
/// step-numbered checkpoints of `save` (train_step_path names) at steps <=
/// `step` whose weights record run id `run_id` ("shardrt.run"), with their
/// optimizer files, never `loaded` (the --load path). Files of another run
/// (another id, none, or unreadable) and of later steps stay and are not
/// counted; `*foreign` (may be NULL) receives how many step files of
/// another run were left. Returns how many were removed. Rank 0 only.
int train_rotate(const char *save, int64_t keep, const char *loaded, int64_t step,
                 const char *run_id, int *foreign);

/// What the command line asks for.
typedef struct train_options {
  const char *data;      ///< token file (--data); required unless --batch-file
  int64_t steps;         ///< last step to run (--steps), required, >= 1
  float lr;              ///< --lr, required: the schedule's peak
  train_lr_schedule schedule; ///< --lr-schedule and its flags (lr filled from --lr)
  unsigned schedule_given;    ///< TRAIN_GIVEN_* bits: the schedule flags on the command line
  bool override_lr_schedule;  ///< --override-lr-schedule: a resume takes the flags, not the record
  float beta1, beta2;    ///< --betas B1,B2 (0.9, 0.999)
  float eps;             ///< --eps (1e-8)
  float weight_decay;    ///< --weight-decay (0.01, torch's AdamW default)
  float max_grad_norm;   ///< --max-grad-norm, required (<= 0: no clipping)
  double norm_type;      ///< --norm-type 2 | inf | p (2)
  const char *load;      ///< --load CKPT or NULL (a link: the file it resolves to)
  const char *save;      ///< --save CKPT or NULL (a link: the file it resolves to)
  char load_file[4096];  ///< where `load` points when resolved from a link
  char save_file[4096];  ///< where `save` points when resolved from a link
  int64_t save_every;    ///< --save-every N (0: only after the last step)
  int64_t keep_last;     ///< --keep-last K: step-numbered saves, the K newest kept (0: one file)
  uint64_t seed;         ///< --seed S (0)
  int64_t log_every;     ///< --log-every N (1)
  const char *batch_file; ///< --batch-file FILE: input_ids/labels for every step, or NULL
  const char *dump;      ///< --dump FILE: loss, norms, parameters (+ logits) after the last step
  int64_t max_skipped;   ///< --max-skipped N: stop after N consecutive skipped steps (5; 0: never)
  double timeout_s;      ///< --timeout SECONDS: deadline of every collective (600; 0: none)
  int64_t threads;       ///< --threads N: cpu kernel threads per rank (0: cores / ranks per node)
  bool profile;          ///< --profile: time per op kind after the run
  const char *eval_data; ///< --eval-data TOKENS: held-out tokens, or NULL
  int64_t eval_every;    ///< --eval-every N (0: only after the last step)
  int64_t eval_batches;  ///< --eval-batches K (4)
  const char *metrics;   ///< --metrics FILE.jsonl: a JSON object per step appended, or NULL
  const char *export_dir; ///< --export DIR: a Hugging Face model directory, or NULL
  srt_dtype export_dtype; ///< --export-dtype f32|bf16|f16 (SRT_DTYPE_COUNT: the input's)
  int64_t max_shard_bytes; ///< --max-shard-size SIZE (5 GB: 5 * 10^9 bytes)
  uint64_t given;        ///< bit k: flag k of the flag table was on the command line
} train_options;

/// Refuses --eval-batches `batches` (the file `path`, opened as `tokens`)
/// when it is more than the batches that start inside the file,
/// ceil(tokens / (batch x seq)) for windows, ceil(packed_rows / batch) for
/// a version 2 file whose epoch packs into `packed_rows` rows (0: windows),
/// at least 1: from there on the batches wrap and re-read what was already
/// evaluated, so that a huge count only costs time (1e9 never finishes).
/// SRT_INVALID_ARGUMENT naming the count, the file's tokens or rows and the
/// limit.
srt_status train_eval_check(const srt_program *p, const srt_tokens *tokens, const char *path,
                            int64_t packed_rows, int64_t batches);

/// Checks where the files of `o` lie, before any step: with the working
/// directory removed (getcwd: ENOENT), no path may be relative (it names
/// nothing: the outputs would fail after training); --metrics, --save and
/// --dump may not lie inside the --export folder or its staging folder
/// (each export replaces the folder whole). Returns SRT_FAILED_PRECONDITION
/// or SRT_INVALID_ARGUMENT naming the flag and both paths.
srt_status train_check_places(const train_options *o);

/// The cpu kernels' threads of this rank and what they were chosen from.
typedef struct train_threads {
  int threads;     ///< threads each cpu kernel of this rank uses (what OpenMP grants)
  int asked;       ///< the count chosen before OpenMP's limits (--threads, OMP_NUM_THREADS, cores)
  int thread_limit; ///< OMP_THREAD_LIMIT's cap (omp_get_thread_limit)
  bool was_dynamic; ///< OMP_DYNAMIC was on (srt_cpu_set_threads turns it off)
  bool had_no_level; ///< OMP_MAX_ACTIVE_LEVELS was 0 (srt_cpu_set_threads raises it to 1)
  int cores;       ///< CPUs online on this node
  int local_ranks; ///< ranks of the job on this node (MPI_COMM_TYPE_SHARED; TCP: same host name)
  int bound;       ///< CPUs this rank may run on (affinity), -1 if unknown
  bool from_env;   ///< the count came from OMP_NUM_THREADS
} train_threads;

/// Sets this rank's kernel threads (srt_cpu_set_threads): `requested` when
/// > 0 (--threads), else OMP_NUM_THREADS's first count when set, else
/// cores / local_ranks (at least 1) lowered to the CPUs the launcher bound
/// the rank to; then capped to the team OpenMP grants (OMP_THREAD_LIMIT),
/// with OMP_DYNAMIC turned off (srt_cpu_set_threads). Collective over
/// MPI_COMM_WORLD (the node split). Never fails: an unknown count falls back
/// to 1 rank / 1 CPU.
train_threads train_choose_threads(int64_t requested);

/// FNV-1a's 64-bit offset basis: the digest of no bytes.
#define TRAIN_FNV1A_BASIS UINT64_C(0xcbf29ce484222325)

/// FNV-1a (Fowler, Noll, Vo) over `n` bytes of `data`, continued from digest
/// `h` (TRAIN_FNV1A_BASIS to start): the ranks' agreement digests (not a
/// cryptographic hash: it tells mistakes apart, not adversaries).
uint64_t train_fnv1a(uint64_t h, const void *data, size_t n);

/// Refuses stacks the driver and the cpu kernels would overflow (a
/// segmentation fault): a stack limit (RLIMIT_STACK, `ulimit -s`, the main
/// thread's and by default every thread's) below 128 KiB, or an OpenMP
/// thread stack (OMP_STACKSIZE, else GOMP_STACKSIZE, read as libgomp reads
/// them) below 128 KiB that libgomp would apply. Needs no MPI (called
/// before MPI_Init). Errors: SRT_INVALID_ARGUMENT naming the limit or the
/// variable, its value and the floor.
srt_status train_check_stacks(void);

// The host plane (launch.c): MPI, or the TCP mesh of an env launch of
// several processes. Every function but train_launch_uses_tcp is
// collective where its MPI counterpart is; an exchange of the TCP plane
// that fails (a lost peer, 300 s without an answer) prints the error and
// ends the process with status 1, as MPI's default error handler does.

/// Whether launch `e` (srt_launch_env_from_environ) meets over TCP: an env
/// launch (torchrun's or Slurm's variables, no MPI launcher) of more than
/// one process. An MPI launch, no launcher and an env launch of one
/// process use MPI. Needs no MPI.
bool train_launch_uses_tcp(const srt_launch_env *e);

/// Starts the plane: MPI_Init, or the TCP rendezvous and mesh (srt_tcp_mesh_
/// connect, deadline 300 s). Errors: those of srt_tcp_mesh_connect.
srt_status train_plane_start(const srt_launch_env *e, int *argc, char ***argv);

/// MPI_Finalize, or closes the mesh.
void train_plane_end(void);

/// The TCP mesh (for srt_context_options.tcp_mesh), or NULL under MPI.
const struct srt_tcp_mesh *train_plane_mesh(void);

/// This process's rank in the job and the job's size.
int train_plane_rank(void);
int train_plane_size(void);

/// Every rank's `buf` (bytes) becomes rank 0's.
void train_plane_bcast(void *buf, size_t bytes);

/// In place: one value of `dtype` (SRT_F64 or SRT_I64) becomes the SUM or
/// MAX over the ranks (TCP: in rank order).
void train_plane_allreduce(void *v, srt_dtype dtype, srt_reduce_op op);

/// Ends the whole job with status 1: MPI_Abort, or this process's exit
/// (its sockets close, so every peer's next exchange fails naming it).
void train_plane_abort(void);

/// Parses argv into *o: each flag of the driver's flag table (options.c)
/// given as "--flag VALUE" or "--flag=VALUE" (a switch alone), the others
/// at their defaults; then train_check_options. Errors: SRT_INVALID_ARGUMENT
/// naming the flag and the value (a missing required flag, a malformed
/// number, an unknown flag, a flag given twice).
srt_status train_parse_options(int argc, char **argv, train_options *o);

/// Whether `flag` ("--eval-batches") was on the command line of *o.
bool train_option_given(const train_options *o, const char *flag);

/// The checks between the flags of *o once all are read (options_check.c):
/// required flags, flags that need another, file names that fit, outputs
/// that replace no input; then resolves --load and --save through symbolic
/// links (into o->load_file, o->save_file). Errors: SRT_INVALID_ARGUMENT
/// (or the output checks' errors) naming the flags and paths.
srt_status train_check_options(train_options *o);

/// Checks that every rank of MPI_COMM_WORLD runs the same program with the
/// same options, before any collective whose size depends on either:
/// every rank builds a fixed-size record (a digest and a short text for
/// the program's ABI, config, mesh, batch, parameter table, memory plan,
/// checkpoint names and backend, and for each option that must agree; not
/// --threads, --log-every, --metrics, --profile), rank 0's is broadcast,
/// and the lowest rank that differs on the first differing item prints
/// "train: rank R disagrees with rank 0 on ITEM: V0 on rank 0, VR on rank
/// R" (for the config, the first key that differs). `o` is NULL when the
/// options did not parse; `command_line` ("parsed", "--help" or the parse
/// error) must agree too. Collective (plain MPI calls, no deadline: every
/// rank reaches it right after parsing). Returns 0 when all agree (and
/// always on one rank), 1 on every rank otherwise.
int train_agree(const srt_program *p, const train_options *o, const char *command_line);

/// After the resume rule (setup): every rank of MPI_COMM_WORLD follows the
/// same lr schedule `s` (kind, lr, warmup, min lr, decay steps, decay
/// fraction), however its flags were spelled (given or taken from the
/// checkpoint), else the lowest differing rank prints "train: rank R
/// disagrees with rank 0 on FLAG: V0 on rank 0, VR on rank R". Collective
/// (plain MPI). Returns 0 when all agree, 1 on every rank otherwise.
int train_agree_schedule(const train_lr_schedule *s);

/// The identity of input file `path` as the ranks compare it: for a regular
/// file a digest of its size and content (all of it up to 64 MiB; above, the
/// first and last MiB and 62 windows of 64 KiB spread between: two large
/// files that differ only elsewhere compare equal), for a folder (a --load
/// checkpoint) that of its .safetensors and .json files by name, for
/// anything else (a FIFO: reading would consume it) its name. Returns the
/// digest (never 0) and writes into `text` (`size` bytes) the path with the
/// size and digest, or why it cannot be read (the same error on every rank
/// is agreement: the open then reports it).
uint64_t train_input_identity(const char *path, char *text, size_t size);

/// The usage text, made from the flag table (every flag, its value, what it
/// does and its default).
const char *train_usage(void);

/// Hugging Face-style initialisation of every parameter of `p` in `arena`
/// (normal(0, initializer_range), zeros or ones by its init kind), such that
/// the global tensor depends only on (seed, parameter name): element i of
/// the full tensor is a function of (seed, hash(name), i), and each rank
/// fills only its local slice. Moments and gradients are zeroed.
/// Errors: SRT_INVALID_ARGUMENT for an unknown init kind or placements that
/// do not fit the mesh (naming the parameter).
srt_status train_init_weights(srt_context *ctx, const srt_program *p, uint8_t *arena,
                              uint64_t seed);

/// Where a resumed run starts.
/// Hex digits of a run id (128 random bits).
#define TRAIN_RUN_ID_LEN 32

/// Whether `id` is a run id: TRAIN_RUN_ID_LEN digits of [0-9a-f].
bool train_run_id_valid(const char *id);

/// Draws a new run id (rank 0, getrandom) and gives it to every rank, into
/// `id`. Collective. Errors: SRT_IO when rank 0 cannot draw one; those of
/// srt_broadcast.
srt_status train_run_id_mint(srt_context *ctx, char id[TRAIN_RUN_ID_LEN + 1]);

/// Makes output `path` of flag `flag` (--save: a file, the lock beside the
/// file a link resolves to; --export: a folder, `folder` true) this job's
/// until exit: rank 0 takes an exclusive flock(2) on "<path>.lock" (created
/// if needed, left in place) without waiting and writes "pid P on host H"
/// into it; the kernel drops the lock when the process ends, however it
/// ends, so a job that died blocks nobody. A character device (--save
/// /dev/null) takes no lock. `*fd` receives the lock's descriptor on rank 0
/// (-1 elsewhere or without a lock), for train_unlock. Collective: every
/// rank returns an error when rank 0's failed. Errors:
/// SRT_FAILED_PRECONDITION naming the flag, the path, the holder's pid and
/// host and the lock file when another job holds it; SRT_IO when the lock
/// file cannot be opened or written; those of srt_output_kind_of and
/// srt_output_destination.
srt_status train_lock(srt_context *ctx, const char *flag, const char *path, bool folder,
                      int *fd);

/// Releases a lock of train_lock (fd -1: nothing).
void train_unlock(int fd);

typedef struct train_state {
  int64_t step;      ///< steps done (the next step is step + 1)
  int64_t adam_step; ///< AdamW updates done (skipped steps do not count)
  /// The lr schedule (train_lr_describe) the state was trained with, as its
  /// checkpoint records it ("shardrt.lr_schedule"); empty when unknown.
  char lr_schedule[256];
  /// The run's identity ("shardrt.run": TRAIN_RUN_ID_LEN lower-case hex
  /// digits), drawn at a fresh start and kept through resumes; written into
  /// the weights and the optimizer file of every save and export, so that a
  /// load pairs only files of one run and --keep-last removes only this
  /// run's saves. Empty until train_run_id_mint or a checkpoint sets it.
  char run_id[TRAIN_RUN_ID_LEN + 1];
  /// The global batch and sequence length of the program that saved it
  /// ("shardrt.batch", "shardrt.seq"): its data windows; -1 when unknown.
  int64_t batch, seq;
} train_state;

/// The checkpoint a run was loaded from, kept open for the whole run: saves
/// and exports name the weights as it did (its layout) and carry the tensors
/// of the modules the program does not train (a vision tower) through,
/// byte for byte.
typedef struct train_input {
  srt_checkpoint_source *src; ///< NULL when the weights were initialised
  srt_checkpoint_names names; ///< the program's layouts and carried modules
  int layout;                 ///< of src's names (0: the in-memory names)
  bool *carried;              ///< per tensor of src (its name order): carried
  srt_dtype dtype;            ///< src's dtype of the first parameter (F32 if none)
} train_input;

/// Parses the program's checkpoint_names into a fresh *in (nothing loaded).
/// Errors: as srt_checkpoint_names_parse.
srt_status train_input_open(const srt_program *p, train_input *in);

/// Metadata `key` of `f` as a positive integer, or -1 when absent or not one.
int64_t train_meta_int(const srt_safetensors *f, const char *key);

/// Closes the input checkpoint (in stays usable as "nothing loaded").
void train_input_close(train_input *in);

/// Saves weights (consolidated, Hugging Face names in the input's layout,
/// with its carried tensors: train_save_weights) to "<path>" and optimizer
/// state ("<path>.optim-<step>": exp_avg / exp_avg_sq per parameter and the
/// step counters) atomically: the optimizer file is written first, then the
/// weights file, whose metadata names it, replaces the previous one (the
/// commit point); then the previous optimizer file is removed. A crash at any
/// point leaves a loadable checkpoint. `prev_optim` (in/out, size 4096)
/// holds the optimizer file of the previous save or load ("" if none).
/// Collective over the world. Errors: as srt_checkpoint_save_items.
srt_status train_save(srt_context *ctx, const srt_program *p, uint8_t *arena,
                      const char *path, const train_state *state, const train_input *in,
                      char *prev_optim);

/// Writes one weights file `path` (atomically, rank 0; collective): every
/// parameter whole, named by the input's layout and stored as `dtype` (F32,
/// BF16, F16), then the input's carried tensors byte for byte; `meta`
/// holds `n_meta` extra metadata pairs. Errors: as srt_checkpoint_save_items.
srt_status train_save_weights(srt_context *ctx, const srt_program *p, uint8_t *arena,
                              const train_input *in, srt_dtype dtype, const char *path,
                              const char *const *meta, size_t n_meta);

/// The tensors of a weights file: every parameter (a view of the arena,
/// named by the input's layout, stored as `dtype`) then the input's carried
/// tensors (byte for byte), as srt_checkpoint_save_items takes them.
typedef struct train_weights {
  srt_checkpoint_item *items;
  size_t n;          ///< items
  srt_tensor *views; ///< [num_params]
  char **names;      ///< [num_params] stored names (owned)
  size_t num_params;
} train_weights;

/// Builds *w. Errors: SRT_RESOURCE_EXHAUSTED.
srt_status train_weights_collect(const srt_program *p, uint8_t *arena, const train_input *in,
                                 srt_dtype dtype, train_weights *w);

/// Frees what train_weights_collect allocated.
void train_weights_free(train_weights *w);

/// Writes the AdamW moments ("<param>.exp_avg", "<param>.exp_avg_sq", F32,
/// whole) to `path` with `meta` (collective, atomic).
/// Errors: as srt_checkpoint_save_consolidated_meta.
srt_status train_save_moments(srt_context *ctx, const srt_program *p, uint8_t *arena,
                              const char *path, const char *const *meta, size_t n_meta);

/// The first parameter with a non-finite element on any rank into *which
/// (-1: none). Collective. Errors: as srt_all_reduce.
srt_status train_first_non_finite(srt_context *ctx, const srt_program *p,
                                  const uint8_t *arena, int32_t *which);

/// Checks before any step that --export DIR may be written: DIR is absent,
/// an empty directory, or an earlier export (it holds optimizer.safetensors
/// with shardrt.step metadata), so that an export never replaces a folder
/// it did not write. Collective (rank 0 looks). Errors: SRT_INVALID_ARGUMENT
/// naming DIR and what it is.
srt_status train_export_check(srt_context *ctx, const char *dir);

/// Removes "<dir>.partial", the staging folder of an export that was
/// killed (its export files, then the folder; one holding anything else
/// stays). Only for the holder of --export's lock (train_lock): no live run
/// exports there. Returns true when such a folder was there and is gone.
bool train_export_drop_staging(const char *dir);

/// Writes the Hugging Face model directory `o->export_dir` after step
/// `state->step`: the weights (the input's layout, its carried tensors, in
/// o->export_dtype or the input's dtype, else the config's, else F32) as
/// model.safetensors or shards of at most o->max_shard_bytes
/// ("model-00001-of-0000N.safetensors", transformers' greedy split in
/// tensor order, a tensor larger than the limit alone in its shard) with
/// model.safetensors.index.json; config.json (the compiled config, its
/// dtype keys set to the weights'); the tokenizer and generation files
/// found beside the compiled config; optimizer.safetensors (the moments and
/// step counters, named in every weights file's metadata, so --load DIR
/// resumes). Everything is written into "<DIR>.partial" and then swapped
/// with DIR in one rename (renameat2 RENAME_EXCHANGE), so a crash leaves
/// the previous export whole. Collective; every rank returns rank 0's
/// outcome. Errors: SRT_FAILED_PRECONDITION for non-finite weights; SRT_IO
/// naming the file and the OS error; as srt_checkpoint_save_items.
srt_status train_export(srt_context *ctx, const srt_program *p, uint8_t *arena,
                        const train_options *o, const train_state *state,
                        const train_input *in);

/// Loads a checkpoint into this rank's slices: the weights from `path` (a
/// safetensors file, a model directory or an index:
/// srt_checkpoint_source_open; any Hugging Face checkpoint of this model,
/// its names in any layout the program knows), and, when the first weights
/// file's metadata names an optimizer file (in the same directory), the
/// moments and step counters (else both start at zero). Every parameter
/// must be present with its global shape; any other tensor must belong to
/// a carried module. The source stays open in `in` (train_input_open'ed).
/// `prev_optim` receives the optimizer file's path ("" if none).
/// Errors: SRT_NOT_FOUND for a missing file or tensor; SRT_INVALID_ARGUMENT
/// for a shape mismatch or an unknown tensor (a checkpoint of another
/// model), naming the file, the tensor and both shapes; SRT_DATA_LOSS for an
/// optimizer file that does not match the weights; the reader's errors.
srt_status train_load(srt_context *ctx, const srt_program *p, uint8_t *arena,
                      const char *path, train_state *state, train_input *in,
                      char *prev_optim);

/// The positions and document segments of rows [first_row, first_row +
/// rows) of a batch of `batch` x `seq` tokens, from a batch file's optional
/// `position_ids` (I64 [batch, seq]) and `attention_mask` ([batch, seq], I64,
/// I32, I8, U8 or BOOL: what tokenizers and collators save; values 0 or 1),
/// each NULL when the file has none, read as transformers 5 does
/// (masking_utils' _preprocess_mask_arguments and
/// find_packed_sequence_indices; the decoders' default position_ids):
///   positions[r][t] = position_ids[first_row + r][t], or t without them;
///   without an attention_mask, segments[r][t] = the number of t' in 1..t
///     where position[t'] != position[t' - 1] + 1 (documents numbered from 0
///     in each row; a row may begin inside a document, at any position);
///   with one, segments[r][t] = -1 where the mask is 0 (padding: no query
///     attends to it) and 0 elsewhere: the row is one document, packing is
///     not inferred from the positions (as masking_utils).
/// `positions` and `segments` are [rows, seq], row-major. Every value of
/// both tensors is checked, not only these rows, so that every dp rank
/// refuses the same file. `file` names the batch file in messages.
/// Errors: SRT_INVALID_ARGUMENT naming the file, the tensor, the row, the
/// column and the value for a wrong dtype or shape, a negative position, a
/// position >= `max_positions` (the model's max_position_embeddings), a mask
/// value other than 0 and 1; rows outside the batch.
srt_status train_documents(const char *file, const srt_tensor_info *position_ids,
                           const srt_tensor_info *attention_mask, int64_t batch, int64_t seq,
                           int64_t max_positions, int64_t first_row, int64_t rows,
                           int64_t *positions, int64_t *segments);

/// Refuses a batch whose `labels` (I64 [batch, seq], checked by the
/// caller) score a token right after a padding token (`attention_mask` 0,
/// checked by train_documents, or else `segment_ids` -1, checked by
/// train_documents_segments, at column t - 1, and labels[b][t] != -100):
/// the loss shifts the labels, so the logits of that padding query would
/// be scored, and a padding query attends to no key (the documents
/// contract; transformers' eager attention still lets it attend, so the
/// two losses would differ). Nothing to check without either (NULL).
/// Errors: SRT_INVALID_ARGUMENT naming the file, the label's row, column
/// and value, and the padding token.
srt_status train_documents_check_labels(const char *file, const srt_tensor_info *labels,
                                        const srt_tensor_info *attention_mask,
                                        const srt_tensor_info *segment_ids);

/// Rows [first_row, first_row + rows) of a batch file's `segment_ids` (I64
/// [batch, seq]: the step's own input, each token's document in its row,
/// -1 padding) into segments [rows, seq]. Every row is checked: ids >= -1,
/// and a document starts with an id larger than every earlier one of its
/// row (so its tokens are contiguous and no id comes back: the cpu kernels
/// read runs of equal ids, the cuda ones compare ids; both then agree).
/// Errors: SRT_INVALID_ARGUMENT naming the file, the row, the column and
/// the value, or the dtype or shape.
srt_status train_documents_segments(const char *file, const srt_tensor_info *segment_ids,
                                    int64_t batch, int64_t seq, int64_t first_row, int64_t rows,
                                    int64_t *segments);

/// The max_position_embeddings of the program's config (at its top level, or
/// in a conditional model's text_config); INT64_MAX when it names none.
int64_t train_max_positions(const srt_program *p);


/// Reads a batch file (--batch-file): a safetensors file holding
/// `input_ids` and `labels`, I64 [batch, seq] (the program's global batch
/// and sequence length), and optionally `position_ids` and
/// `attention_mask` (train_documents) or `position_ids` and `segment_ids`
/// (the step's own inputs, given as they are: train_documents_segments),
/// and copies this dp rank's rows of micro-batch `micro` (train_first_row;
/// 0 without accumulation) into the program's input_ids, labels,
/// position_ids and segment_ids buffers. Ids must lie in [0, vocab); labels
/// too, or be -100 (ignored by the loss, which shifts the labels itself). A
/// step without document inputs (a hand-written one) refuses a batch whose
/// positions or documents differ from one document at 0..S-1.
/// Errors: as srt_safetensors_open; SRT_NOT_FOUND for a missing tensor;
/// SRT_INVALID_ARGUMENT for a tensor of another name, a wrong dtype or
/// shape or an id out of range, naming the file, the tensor, the position
/// and the value; train_documents' errors; SRT_FAILED_PRECONDITION for
/// documents the program cannot take.
srt_status train_load_batch_file(srt_context *ctx, const srt_program *p, uint8_t *arena,
                                 const char *path, int64_t micro);

/// Writes what one step computed (--dump), as one consolidated safetensors
/// file (rank 0 writes, every rank takes part), after the step `r`:
///   "loss" F32 [1], "grad_norm" F32 [1] (the total norm, before clipping),
///   "grad_norm.<param>" F32 [1] per parameter (its own norm of type
///   `norm_type` before clipping: each logical element counted once,
///   float64 accumulation, divided by the clipping coefficient when the
///   step clipped), every parameter after the step under its Hugging Face
///   name (whole), and "logits" F32 [batch, seq, vocab] (whole) when the
///   program keeps them (shard-compile --keep-logits).
/// Errors: as srt_get_grad_norm and srt_checkpoint_save_consolidated_meta;
/// SRT_INVALID_ARGUMENT when the program's logits table does not fit its
/// mesh.
srt_status train_dump(srt_context *ctx, const srt_program *p, uint8_t *arena, const char *path,
                      const srt_step_result *r, const train_options *o, int64_t step);

/// Parameter `pi`'s fp32 buffer at byte offset `off` of `arena` (its value,
/// gradient or a moment: this rank's shard) as a tensor named `name`, with
/// the parameter's shapes and placements. The view borrows `name` and `arena`.
srt_tensor train_param_view(const srt_param_info *pi, const char *name, uint8_t *arena,
                            int64_t off);

#endif // SHARDRT_TRAIN_INTERNAL_H
