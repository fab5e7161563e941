// Scaled dot-product attention on [B, S, heads * head_dim] activations:
// causal, grouped KV heads, sliding window, logit softcap, packed documents
// (segment ids); forward + backward.
#include "shardrt/kernels.h"

#include <math.h>
#include <omp.h>
#include <string.h>

#include "vmath.h"

// FlashAttention-2's tiling (Dao 2023, arXiv:2307.08691) on the CPU: each
// task owns a block of query_block() queries and walks the visible key tiles
// of kKeyBlock keys with the online softmax, so scores never leave a tile;
// QK^T, PV and the backward's four products are GEMMs on tiles
// (srt_cpu_gemm on one thread inside the parallel region). Keys the causal
// or sliding-window mask hides from a whole block are never visited, tiles it
// leaves whole are not masked element by element, and KV heads are read in
// place by the query heads sharing them (GQA without copies). A NaN or inf
// in v (or k) reaches the rows of its tile through the GEMMs (0 x NaN), as
// it reaches every row in torch's eager attention.
//
// Tasks: forward (b, h, query block), independent; backward (b, kv head),
// each owning its dK/dV rows, summed over its query heads and blocks in a
// fixed order. Results are the same bytes for any thread count.
//
// Packed documents (segment_ids [B, S], the document of each token): a
// query sees only the keys of its own run of equal ids, so its visible keys
// stay one contiguous range, the intersection of its document with the
// causal / window range, and both ends of that range still move right with
// the query (a padding query, id -1, gets the empty range at its own lower
// end). A block's tiles cover the union of its rows' ranges only: key tiles
// of other documents are never visited, and the cost is about the sum of
// the squared document lengths (flash-attention's varlen, cu_seqlens).
//
// Context parallelism (cp_size > 1): the queries are the rank's two chunks
// of S / (2 cp) tokens (Megatron's head-tail balance), the keys all S. A
// query block never straddles the two chunks, so its queries are
// consecutive global positions and everything above (ranges, tiles, their
// skipping) runs on global indices unchanged; only the rows q, out, lse and
// dq are addressed by local index.
enum { kQueryBlock = 128, kKeyBlock = 512 };

// Queries per task: kQueryBlock, or half that for a causal (or windowed)
// attention of at most 512 positions. A causal block computes its diagonal
// tile whole and masks half of it: at seq 256 blocks of 128 compute 49152
// score pairs for 32896 visible, blocks of 64 40960, which outweighs the
// smaller tile GEMMs' lower rate (B 4, 8 heads, hd 64 on 2 cores: forward +
// backward 6-10% faster); from seq 1024 on the larger block is faster.
static int64_t query_block(const srt_attention_config *c) {
  bool masked = c->causal || c->sliding_window > 0;
  return masked && c->seq <= 512 ? kQueryBlock / 2 : kQueryBlock;
}

// tanh(x) = 2 sigmoid(2x) - 1 through one exp: glibc's tanhf is about 4x
// slower and dominated softcapped attention. Absolute error ~1e-7 (the
// softcapped logit's error is softcap times that); saturates to +-1 without
// NaN.
static inline float fast_tanh(float x) {
  return 2.0f / (1.0f + srt_expf(-2.0f * x)) - 1.0f;
}

static srt_status check_config(const char *what, const srt_attention_config *c) {
  if (c->batch <= 0 || c->seq <= 0 || c->heads <= 0 || c->kv_heads <= 0 ||
      c->head_dim <= 0)
    return SRT_ERROR(SRT_INVALID_ARGUMENT,
                     "%s: batch %lld, seq %lld, heads %lld, kv_heads %lld, "
                     "head_dim %lld must all be positive",
                     what, (long long)c->batch, (long long)c->seq,
                     (long long)c->heads, (long long)c->kv_heads,
                     (long long)c->head_dim);
  if (c->heads % c->kv_heads != 0)
    return SRT_ERROR(SRT_INVALID_ARGUMENT,
                     "%s: kv_heads %lld does not divide heads %lld", what,
                     (long long)c->kv_heads, (long long)c->heads);
  if (c->cp_size < 0 || c->cp_rank < 0 ||
      c->cp_rank >= (c->cp_size > 1 ? c->cp_size : 1) ||
      (c->cp_size > 1 && c->seq % (2 * c->cp_size) != 0))
    return SRT_ERROR(SRT_INVALID_ARGUMENT,
                     "%s: cp_rank %lld must lie in [0, cp_size %lld) and 2 * "
                     "cp_size divide seq %lld (two chunks per rank)",
                     what, (long long)c->cp_rank, (long long)c->cp_size,
                     (long long)c->seq);
  if (c->sliding_window < 0 || !(c->softcap >= 0.0f) || isinf(c->softcap) ||
      !isfinite(c->scale))
    return SRT_ERROR(SRT_INVALID_ARGUMENT,
                     "%s: sliding_window %lld must be >= 0, softcap %g finite "
                     "and >= 0, scale %g finite",
                     what, (long long)c->sliding_window, (double)c->softcap,
                     (double)c->scale);
  return NULL;
}

// Floats of one thread's tiles, sized for the largest block: scores /
// probabilities and dP/dS [bq, bk], plus three per-query vectors (running
// max, running sum, D).
static int64_t thread_floats(void) {
  return 2 * kQueryBlock * kKeyBlock + 3 * kQueryBlock;
}

int64_t srt_cpu_attention_workspace_floats(const srt_attention_config *config) {
  if (config->seq <= 0)
    return 0;
  return (int64_t)srt_cpu_threads() * thread_floats();
}

// Visible keys of query i: [lo, hi).
static int64_t key_lo(const srt_attention_config *c, int64_t i) {
  int64_t w = c->sliding_window;
  return w > 0 && i - w + 1 > 0 ? i - w + 1 : 0;
}

static int64_t key_hi(const srt_attention_config *c, int64_t i) {
  if (c->causal)
    return i + 1;
  int64_t w = c->sliding_window;
  return w > 0 && i + w < c->seq ? i + w : c->seq;
}

// Query rows per batch row: all S, or a context-parallel rank's S / cp.
static int64_t q_rows(const srt_attention_config *c) {
  return c->cp_size > 1 ? c->seq / c->cp_size : c->seq;
}

// Local queries are `chunks` runs of `chunk` rows each: one run of S, or
// the two chunks cp_rank and 2 cp - 1 - cp_rank of a context-parallel rank.
static int64_t q_chunk(const srt_attention_config *c) {
  return c->cp_size > 1 ? c->seq / (2 * c->cp_size) : c->seq;
}

static int64_t q_chunks(const srt_attention_config *c) { return c->cp_size > 1 ? 2 : 1; }

// The global position of local chunk k's first query.
static int64_t q_chunk_start(const srt_attention_config *c, int64_t k) {
  if (c->cp_size <= 1)
    return 0;
  int64_t chunk = k == 0 ? c->cp_rank : 2 * c->cp_size - 1 - c->cp_rank;
  return chunk * q_chunk(c);
}

// A query block: m queries at local row `local` (of q, out, lse, dq) and
// global position `global` (of the masks), consecutive in both.
typedef struct query_span {
  int64_t local, global, m;
} query_span;

// Views of one (batch, head) pair inside the folded-head activations.
typedef struct head_view {
  int64_t ldq, ldkv; // row strides of q/out and of k/v
  int64_t q_off, kv_off;
} head_view;

static head_view view_of(const srt_attention_config *c, int64_t b, int64_t h) {
  int64_t hd = c->head_dim, group = c->heads / c->kv_heads;
  head_view v;
  v.ldq = c->heads * hd;
  v.ldkv = c->kv_heads * hd;
  v.q_off = b * q_rows(c) * v.ldq + h * hd;
  v.kv_off = b * c->seq * v.ldkv + (h / group) * hd;
  return v;
}

// The visible keys [lo[r], hi[r]) of each query i0 + r of a block [i0, i1)
// of batch row `seg` (segment ids of that row, or NULL: one document).
typedef struct block_ranges {
  int64_t lo[kQueryBlock], hi[kQueryBlock];
} block_ranges;

static void block_ranges_of(const srt_attention_config *c, const int64_t *seg, int64_t i0,
                            int64_t i1, block_ranges *br) {
  if (!seg) {
    for (int64_t i = i0; i < i1; i++) {
      br->lo[i - i0] = key_lo(c, i);
      br->hi[i - i0] = key_hi(c, i);
    }
    return;
  }
  int64_t start = i0; // the first token of query i's document
  while (start > 0 && seg[start - 1] == seg[i0])
    start--;
  int64_t end = i0; // one past its last
  for (int64_t i = i0; i < i1; i++) {
    if (i > i0 && seg[i] != seg[i - 1])
      start = i;
    if (end <= i)
      for (end = i + 1; end < c->seq && seg[end] == seg[i];)
        end++;
    int64_t lo = key_lo(c, i) > start ? key_lo(c, i) : start;
    int64_t hi = key_hi(c, i) < end ? key_hi(c, i) : end;
    br->lo[i - i0] = lo;
    br->hi[i - i0] = seg[i] < 0 || hi < lo ? lo : hi;
  }
}

// One (query block, key tile) pair: queries [i0, i0 + m), keys [j0, j0 + nk).
typedef struct tile {
  int64_t i0, m, j0, nk;
  bool whole; // every query sees every key: no element masking
} tile;

// Key tiles of a query block of m rows with ranges br: the union of its
// rows' ranges [br->lo[0], br->hi[m - 1]) (contiguous, so no tile inside is
// hidden wholly: the keys the causal, sliding-window or document mask hides
// from every row are never visited) cut into tiles of kKeyBlock from lo,
// the last one cut at hi (so a causal block computes only its diagonal
// triangle in vain). Returns false past the last tile; *t is the tile at
// key j, `whole` when no element needs masking.
static bool next_tile(const block_ranges *br, int64_t i0, int64_t m, int64_t j, tile *t) {
  int64_t hi = br->hi[m - 1];
  if (j >= hi)
    return false;
  t->i0 = i0;
  t->m = m;
  t->j0 = j;
  t->nk = j + kKeyBlock < hi ? kKeyBlock : hi - j;
  int64_t end = j + t->nk;
  // Visible ranges move right with i (both ends non-decreasing): the block's
  // last query has the rightmost lo, its first the leftmost hi.
  t->whole = br->lo[m - 1] <= j && br->hi[0] >= end;
  return true;
}

// The visible range of row r inside tile t, as offsets [lo, hi) into the row.
static void row_range(const block_ranges *br, const tile *t, int64_t r, int64_t *lo,
                      int64_t *hi) {
  if (t->whole) {
    *lo = 0;
    *hi = t->nk;
    return;
  }
  int64_t a = br->lo[r] - t->j0, b = br->hi[r] - t->j0;
  *lo = a < 0 ? 0 : a > t->nk ? t->nk : a;
  *hi = b < *lo ? *lo : b > t->nk ? t->nk : b;
}

SRT_CPU_CLONES
static void softcap_row(float *row, int64_t lo, int64_t hi, float cap) {
#pragma omp simd
  for (int64_t j = lo; j < hi; j++)
    row[j] = cap * fast_tanh(row[j] / cap);
}

// The online softmax of one score row against its running max mx and sum l
// (FlashAttention-2, Algorithm 1): row becomes exp(s - mx_new) (0 where
// masked); returns the factor exp(mx_old - mx_new) the output row and l take.
SRT_CPU_CLONES
static float online_softmax_row(float *row, int64_t nk, int64_t lo, int64_t hi,
                                float *mx, float *l) {
  float tile_max = srt_max(row + lo, hi - lo);
  float m_new = tile_max > *mx ? tile_max : *mx;
  float alpha = *mx == -INFINITY ? 0.0f : srt_expf_below_88(*mx - m_new);
  for (int64_t j = 0; j < lo; j++)
    row[j] = 0.0f;
#pragma omp simd
  for (int64_t j = lo; j < hi; j++)
    row[j] = srt_expf_below_88(row[j] - m_new);
  // Fixed lanes (srt_sum), not a SIMD reduction, whose order would follow
  // the clone's vector width: every clone gives the same bytes.
  float sum = srt_sum(row + lo, hi - lo);
  for (int64_t j = hi; j < nk; j++)
    row[j] = 0.0f;
  *l = *l * alpha + sum;
  *mx = m_new;
  return alpha;
}

static void scale_row(float *row, int64_t n, float s) {
  for (int64_t d = 0; d < n; d++)
    row[d] *= s;
}

// One forward task: the queries qs of (b, h), out rows and lse written.
static srt_status forward_block(float *out, float *lse, const float *q,
                                const float *k, const float *v, const int64_t *seg,
                                float *ws, const srt_attention_config *c, int64_t b,
                                int64_t h, query_span qs) {
  head_view hv = view_of(c, b, h);
  int64_t hd = c->head_dim, m = qs.m, i0 = qs.global;
  const float *Q = q + hv.q_off + qs.local * hv.ldq, *K = k + hv.kv_off, *V = v + hv.kv_off;
  float *O = out + hv.q_off + qs.local * hv.ldq;
  float *L = lse + (b * c->heads + h) * q_rows(c) + qs.local;
  float *s = ws, *mx = ws + 2 * kQueryBlock * kKeyBlock, *l = mx + kQueryBlock;
  for (int64_t r = 0; r < m; r++) {
    mx[r] = -INFINITY;
    l[r] = 0.0f;
    memset(O + r * hv.ldq, 0, (size_t)hd * sizeof *O);
  }
  block_ranges br;
  block_ranges_of(c, seg ? seg + b * c->seq : NULL, i0, i0 + m, &br);
  tile t;
  for (int64_t j = br.lo[0]; next_tile(&br, i0, m, j, &t); j += t.nk) {
    // s[m, nk] = scale * Q K[j:j+nk]^T
    SRT_RETURN_IF_ERROR(srt_cpu_gemm(false, true, m, t.nk, hd, c->scale, Q, hv.ldq,
                                     K + j * hv.ldkv, hv.ldkv, 0.0f, s, kKeyBlock));
    for (int64_t r = 0; r < m; r++) {
      int64_t lo, hi;
      row_range(&br, &t, r, &lo, &hi);
      float *row = s + r * kKeyBlock;
      if (c->softcap > 0.0f)
        softcap_row(row, lo, hi, c->softcap);
      if (lo == hi) { // this row sees nothing here: p = 0, state kept
        memset(row, 0, (size_t)t.nk * sizeof *row);
        continue;
      }
      float alpha = online_softmax_row(row, t.nk, lo, hi, &mx[r], &l[r]);
      if (alpha != 1.0f)
        scale_row(O + r * hv.ldq, hd, alpha);
    }
    // O += P V[j:j+nk]
    SRT_RETURN_IF_ERROR(srt_cpu_gemm(false, false, m, hd, t.nk, 1.0f, s, kKeyBlock,
                                     V + j * hv.ldkv, hv.ldkv, 1.0f, O, hv.ldq));
  }
  for (int64_t r = 0; r < m; r++) {
    if (l[r] == 0.0f) { // a padding query: it sees no key
      L[r] = -INFINITY;
      continue;
    }
    scale_row(O + r * hv.ldq, hd, 1.0f / l[r]);
    L[r] = mx[r] + logf(l[r]);
  }
  return NULL;
}

// Inside a task's parallel region: the tile GEMMs run on this thread alone.
// oneDNN keeps to one thread when omp_in_parallel(), but a team that got one
// thread (OMP_DYNAMIC, a busy machine) is not an active region, and the GEMM
// would then start its own threads and round differently. This sets only
// this thread's nested pool size.
static void one_thread_gemms(void) { omp_set_num_threads(1); }

// The first error of a parallel loop, kept by the thread that saw it.
static void keep_first(srt_status *first, srt_status s) {
  if (!s)
    return;
#pragma omp critical(srt_attention_error)
  {
    if (!*first)
      *first = s;
    else
      srt_status_free(s);
  }
}

// The operands of one attention call, shared by its tasks.
typedef struct attention_args {
  const srt_attention_config *c;
  const int64_t *seg; // segment ids [B, S], or NULL
  const float *q, *k, *v, *out, *dout, *lse_in;
  float *o, *lse, *dq, *dk, *dv;
} attention_args;

// One task of a call on this thread's tiles `ws`.
typedef srt_status (*attention_task)(const attention_args *a, float *ws, int64_t task);

// Runs tasks [0, tasks) on the kernels' threads, each thread on its own
// slice of `workspace` with its tile GEMMs on itself; returns the first
// error. Tasks write disjoint outputs (dynamic scheduling changes no byte).
static srt_status run_tasks(const attention_args *a, float *workspace, int64_t tasks,
                            attention_task fn) {
  srt_status first = NULL;
#pragma omp parallel num_threads(srt_cpu_threads())
  {
    float *ws = workspace + (int64_t)omp_get_thread_num() * thread_floats();
    one_thread_gemms();
#pragma omp for schedule(dynamic, 1)
    for (int64_t task = 0; task < tasks; task++)
      keep_first(&first, fn(a, ws, task));
  }
  return first;
}

// Query blocks per chunk, and per (b, h): blocks are cut from each chunk's
// start, so none straddles two chunks.
static int64_t chunk_blocks(const srt_attention_config *c) {
  return (q_chunk(c) + query_block(c) - 1) / query_block(c);
}

static int64_t query_blocks(const srt_attention_config *c) {
  return q_chunks(c) * chunk_blocks(c);
}

// Query block n (0 <= n < query_blocks) of a (b, h) pair, in local order.
static query_span query_span_of(const srt_attention_config *c, int64_t n) {
  int64_t qb = query_block(c), chunk = q_chunk(c), k = n / chunk_blocks(c);
  int64_t off = n % chunk_blocks(c) * qb;
  return (query_span){.local = k * chunk + off,
                      .global = q_chunk_start(c, k) + off,
                      .m = off + qb < chunk ? qb : chunk - off};
}

// Forward task: query block task % blocks of (b, h) = task / blocks.
static srt_status forward_task(const attention_args *a, float *ws, int64_t task) {
  const srt_attention_config *c = a->c;
  int64_t blocks = query_blocks(c), bh = task / blocks;
  return forward_block(a->o, a->lse, a->q, a->k, a->v, a->seg, ws, c, bh / c->heads,
                       bh % c->heads, query_span_of(c, task % blocks));
}

srt_status srt_cpu_attention_forward(float *out, float *lse, const float *q,
                                     const float *k, const float *v,
                                     const int64_t *segment_ids, float *workspace,
                                     const srt_attention_config *config) {
  SRT_RETURN_IF_ERROR(check_config("attention forward", config));
  attention_args a = {.c = config, .seg = segment_ids, .q = q, .k = k, .v = v, .o = out,
                      .lse = lse};
  // Causal blocks differ in cost: dynamic scheduling.
  return run_tasks(&a, workspace, config->batch * config->heads * query_blocks(config),
                   forward_task);
}

// dS = P (dP - D) scale (softcap: times 1 - tanh^2) on one row of tile t;
// s holds the (softcapped) scores on entry, P on exit; masked entries 0.
SRT_CPU_CLONES
static void backward_row(float *s, float *dp, int64_t nk, int64_t lo, int64_t hi,
                         float lse, float D, float scale, float cap) {
  for (int64_t j = 0; j < lo; j++)
    s[j] = dp[j] = 0.0f;
  if (cap > 0.0f) {
#pragma omp simd
    for (int64_t j = lo; j < hi; j++) {
      float th = fast_tanh(s[j] / cap);
      float p = srt_expf_below_88(cap * th - lse);
      s[j] = p;
      dp[j] = p * (dp[j] - D) * (1.0f - th * th) * scale;
    }
  } else {
#pragma omp simd
    for (int64_t j = lo; j < hi; j++) {
      float p = srt_expf_below_88(s[j] - lse);
      s[j] = p;
      dp[j] = p * (dp[j] - D) * scale;
    }
  }
  for (int64_t j = hi; j < nk; j++)
    s[j] = dp[j] = 0.0f;
}

// The backward of the queries qs of (b, h): dQ rows written, dK/dV of its
// KV head accumulated.
static srt_status backward_block(const attention_args *a, float *ws, int64_t b, int64_t h,
                                 query_span qs) {
  const srt_attention_config *c = a->c;
  const float *q = a->q, *k = a->k, *v = a->v, *out = a->out, *dout = a->dout;
  const float *lse = a->lse_in;
  float *dq = a->dq, *dk = a->dk, *dv = a->dv;
  head_view hv = view_of(c, b, h);
  int64_t hd = c->head_dim, m = qs.m, i0 = qs.global, row = hv.q_off + qs.local * hv.ldq;
  const float *Q = q + row, *dO = dout + row, *O = out + row;
  const float *K = k + hv.kv_off, *V = v + hv.kv_off;
  const float *L = lse + (b * c->heads + h) * q_rows(c) + qs.local;
  float *dQ = dq + row, *dK = dk + hv.kv_off, *dV = dv + hv.kv_off;
  float *s = ws, *dp = ws + kQueryBlock * kKeyBlock, *D = dp + kQueryBlock * kKeyBlock;
  // D_i = sum_j p_ij dp_ij = dO_i . O_i (the softmax Jacobian's term).
  for (int64_t r = 0; r < m; r++) {
    D[r] = srt_dot(dO + r * hv.ldq, O + r * hv.ldq, hd);
    memset(dQ + r * hv.ldq, 0, (size_t)hd * sizeof *dQ);
  }
  block_ranges br;
  block_ranges_of(c, a->seg ? a->seg + b * c->seq : NULL, i0, i0 + m, &br);
  tile t;
  for (int64_t j = br.lo[0]; next_tile(&br, i0, m, j, &t); j += t.nk) {
    const float *Kj = K + j * hv.ldkv, *Vj = V + j * hv.ldkv;
    // s = scale Q K^T (recomputed), dp = dO V^T
    SRT_RETURN_IF_ERROR(srt_cpu_gemm(false, true, m, t.nk, hd, c->scale, Q, hv.ldq, Kj,
                                     hv.ldkv, 0.0f, s, kKeyBlock));
    SRT_RETURN_IF_ERROR(srt_cpu_gemm(false, true, m, t.nk, hd, 1.0f, dO, hv.ldq, Vj,
                                     hv.ldkv, 0.0f, dp, kKeyBlock));
    for (int64_t r = 0; r < m; r++) {
      int64_t lo, hi;
      row_range(&br, &t, r, &lo, &hi);
      backward_row(s + r * kKeyBlock, dp + r * kKeyBlock, t.nk, lo, hi, L[r], D[r],
                   c->scale, c->softcap);
    }
    // dV[j] += P^T dO;  dK[j] += dS^T Q;  dQ += dS K[j]
    SRT_RETURN_IF_ERROR(srt_cpu_gemm(true, false, t.nk, hd, m, 1.0f, s, kKeyBlock, dO,
                                     hv.ldq, 1.0f, dV + j * hv.ldkv, hv.ldkv));
    SRT_RETURN_IF_ERROR(srt_cpu_gemm(true, false, t.nk, hd, m, 1.0f, dp, kKeyBlock, Q,
                                     hv.ldq, 1.0f, dK + j * hv.ldkv, hv.ldkv));
    SRT_RETURN_IF_ERROR(srt_cpu_gemm(false, false, m, hd, t.nk, 1.0f, dp, kKeyBlock, Kj,
                                     hv.ldkv, 1.0f, dQ, hv.ldq));
  }
  return NULL;
}

// Backward task: every query head and block of (b, kv) = (task / KV,
// task % KV), in order, so its dK/dV rows sum in a fixed order.
static srt_status backward_task(const attention_args *a, float *ws, int64_t task) {
  const srt_attention_config *c = a->c;
  int64_t group = c->heads / c->kv_heads, b = task / c->kv_heads, kv = task % c->kv_heads;
  for (int64_t h = kv * group; h < (kv + 1) * group; h++)
    for (int64_t n = 0; n < query_blocks(c); n++)
      SRT_RETURN_IF_ERROR(backward_block(a, ws, b, h, query_span_of(c, n)));
  return NULL;
}

srt_status srt_cpu_attention_backward(float *dq, float *dk, float *dv,
                                      const float *dout, const float *q,
                                      const float *k, const float *v,
                                      const float *out, const float *lse,
                                      const int64_t *segment_ids, float *workspace,
                                      const srt_attention_config *config) {
  SRT_RETURN_IF_ERROR(check_config("attention backward", config));
  const srt_attention_config *c = config;
  // dk/dv sum over query blocks and over the heads sharing a KV head.
  size_t kv_floats = (size_t)(c->batch * c->seq * c->kv_heads * c->head_dim);
  memset(dk, 0, kv_floats * sizeof *dk);
  memset(dv, 0, kv_floats * sizeof *dv);
  attention_args a = {.c = c, .seg = segment_ids, .q = q, .k = k, .v = v, .out = out,
                      .dout = dout, .lse_in = lse, .dq = dq, .dk = dk, .dv = dv};
  return run_tasks(&a, workspace, c->batch * c->kv_heads, backward_task);
}
