// srt_context: MPI start-up, the dp x cp x tp mesh and its communicators, created
// once; the arena and the collective scratch; releasing them (the teardown
// that first drains the collectives in flight is teardown.c's).
#include "context_internal.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

static const char *const kGroupNames[SRT_GROUP_COUNT] = {
    [SRT_GROUP_WORLD] = "world",
    [SRT_GROUP_DP] = "dp",
    [SRT_GROUP_TP] = "tp",
    [SRT_GROUP_DP_CP] = "dp_cp",
    [SRT_GROUP_CP] = "cp",
};

srt_status srt_group_annotate(const srt_group *g, srt_status s) {
  return srt_status_annotate(s, g->world_rank, "on group '%s', rank %d of %d, world rank %d",
                             g->name, g->rank, g->size, g->world_rank);
}

srt_status srt_mpi_error(int rc, const char *call, const srt_group *group,
                         const char *file, int line) {
  char text[MPI_MAX_ERROR_STRING] = "";
  int len = 0;
  if (MPI_Error_string(rc, text, &len) != MPI_SUCCESS)
    strcpy(text, "unknown MPI error");
  srt_status s = srt_status_make(SRT_UNAVAILABLE, file, line, "%s failed: %s (MPI error %d)",
                                 call, text, rc);
  if (!group || group->comm == MPI_COMM_NULL) // its rank and size are not known yet
    return srt_status_annotate(s, group ? group->world_rank : -1,
                               "while creating group '%s', world rank %d",
                               group ? group->name : "?", group ? group->world_rank : -1);
  return srt_group_annotate(group, s);
}

srt_context_options srt_context_default_options(void) {
  srt_context_options o;
  memset(&o, 0, sizeof o);
  o.dp = 0;
  o.cp = 1;
  o.tp = 1;
  o.comm = MPI_COMM_NULL;
  o.timeout_s = 600;
  return o;
}

// Splits the world communicator into `g` by `color`, ordered by `key`, and
// checks that the rank in the group is the expected mesh coordinate.
static srt_status split_group(srt_context *ctx, srt_group *g, int color, int key) {
  srt_group *world = &ctx->groups[SRT_GROUP_WORLD];
  SRT_MPI(world, MPI_Comm_split(world->comm, color, key, &g->comm));
  SRT_MPI(g, MPI_Comm_set_errhandler(g->comm, MPI_ERRORS_RETURN));
  SRT_MPI(g, MPI_Comm_dup(g->comm, &g->side));
  SRT_MPI(g, MPI_Comm_size(g->comm, &g->size));
  SRT_MPI(g, MPI_Comm_rank(g->comm, &g->rank));
  if (g->rank != key)
    return srt_group_annotate(
        g, SRT_ERROR(SRT_INTERNAL, "split: the rank in the group is not its mesh coordinate %d",
                     key));
  return NULL;
}

// The members of group `kind`: the world ranks of its color (which group
// of the kind), in the order of their key (the rank in it); for MPI the
// color and key of this rank are the split's. tp: same dp and cp index,
// ordered by tp index; dp: same cp and tp index; dp_cp (where the loss,
// the gradients and their norm are reduced): same tp index, ordered
// dp-major; cp: same dp and tp index.
static void group_key(const srt_mesh *mesh, int w, int kind, int *color, int *key) {
  int coord[SRT_MESH_NDIMS];
  srt_mesh_coord(mesh, w, coord);
  int cp = mesh->cp, tp = mesh->shape[SRT_MESH_TP], tpi = coord[SRT_MESH_TP];
  int cpi = srt_mesh_cp_index(mesh, w), dpi = coord[SRT_MESH_DP];
  int colors[SRT_GROUP_COUNT] = {[SRT_GROUP_TP] = dpi * cp + cpi, [SRT_GROUP_DP] = cpi * tp + tpi,
                                 [SRT_GROUP_DP_CP] = tpi, [SRT_GROUP_CP] = dpi * tp + tpi};
  int keys[SRT_GROUP_COUNT] = {[SRT_GROUP_TP] = tpi, [SRT_GROUP_DP] = dpi,
                               [SRT_GROUP_DP_CP] = dpi * cp + cpi, [SRT_GROUP_CP] = cpi};
  *color = colors[kind];
  *key = keys[kind];
}

// Group `kind` over the TCP mesh (world: every rank): its members in key
// order, no communication (every rank derives the same lists).
static srt_status tcp_group(srt_context *ctx, int kind, const srt_tcp_mesh *mesh) {
  srt_group *g = &ctx->groups[kind];
  g->tcp = calloc(1, sizeof *g->tcp);
  int *members = malloc((size_t)mesh->size * sizeof *members);
  if (!g->tcp || !members) {
    free(members);
    return srt_group_annotate(g, SRT_ERROR(SRT_RESOURCE_EXHAUSTED, "context: no memory"));
  }
  g->tcp->mesh = mesh;
  g->tcp->members = members;
  int color = 0, key = 0, c, k;
  if (kind != SRT_GROUP_WORLD)
    group_key(&ctx->mesh, mesh->rank, kind, &color, &key);
  g->size = 0;
  for (int w = 0; w < mesh->size; ++w) {
    c = k = 0;
    if (kind != SRT_GROUP_WORLD)
      group_key(&ctx->mesh, w, kind, &c, &k);
    if (c == color) {
      members[kind == SRT_GROUP_WORLD ? w : k] = w;
      g->size++;
    }
  }
  g->rank = kind == SRT_GROUP_WORLD ? mesh->rank : key;
  return NULL;
}

// Every rank must build the same mesh, or the splits would pair ranks
// wrongly; one small all-reduce tells every rank at once.
static srt_status agree_on_mesh(srt_group *world, const srt_context_options *o) {
  int v[6] = {o->dp, o->cp, o->tp, -o->dp, -o->cp, -o->tp};
  if (world->tcp) {
    int all[6 * 64];
    const srt_tcp_mesh *m = world->tcp->mesh;
    int *every = m->size <= 64 ? all : malloc((size_t)m->size * sizeof v);
    srt_status s = every ? srt_tcp_mesh_allgather(m, v, every, sizeof v, world->ctx->timeout_s)
                         : SRT_ERROR(SRT_RESOURCE_EXHAUSTED, "context: no memory");
    for (int r = 0; !s && r < m->size; ++r)
      for (int i = 0; i < 6; ++i)
        v[i] = every[r * 6 + i] > v[i] ? every[r * 6 + i] : v[i];
    if (every != all)
      free(every);
    SRT_RETURN_IF_ERROR(s);
  } else
    SRT_MPI(world, MPI_Allreduce(MPI_IN_PLACE, v, 6, MPI_INT, MPI_MAX, world->comm));
  if (v[0] == o->dp && v[1] == o->cp && v[2] == o->tp && -v[3] == o->dp && -v[4] == o->cp &&
      -v[5] == o->tp)
    return NULL;
  return srt_status_annotate(SRT_ERROR(SRT_INVALID_ARGUMENT,
                                       "context: ranks disagree on the mesh: this rank has "
                                       "dp=%d cp=%d tp=%d, others range over dp=%d..%d "
                                       "cp=%d..%d tp=%d..%d",
                                       o->dp, o->cp, o->tp, -v[3], v[0], -v[4], v[1], -v[5],
                                       v[2]),
                             world->rank, "world rank %d", world->rank);
}

// The world group: a duplicate of the caller's communicator, or every
// rank of the TCP mesh.
static srt_status make_world(srt_context *ctx, const srt_context_options *o) {
  srt_group *world = &ctx->groups[SRT_GROUP_WORLD];
  ctx->timeout_s = o->timeout_s;
  if (o->tcp_mesh)
    return tcp_group(ctx, SRT_GROUP_WORLD, o->tcp_mesh);
  MPI_Comm parent = o->comm == MPI_COMM_NULL ? MPI_COMM_WORLD : o->comm;
  SRT_MPI(world, MPI_Comm_dup(parent, &world->comm));
  SRT_MPI(world, MPI_Comm_set_errhandler(world->comm, MPI_ERRORS_RETURN));
  SRT_MPI(world, MPI_Comm_dup(world->comm, &world->side));
  SRT_MPI(world, MPI_Comm_size(world->comm, &world->size));
  SRT_MPI(world, MPI_Comm_rank(world->comm, &world->rank));
  return NULL;
}

static srt_status build(srt_context *ctx, const srt_context_options *o) {
  srt_group *world = &ctx->groups[SRT_GROUP_WORLD];
  SRT_RETURN_IF_ERROR(make_world(ctx, o));
  for (int k = 0; k < SRT_GROUP_COUNT; ++k)
    ctx->groups[k].world_rank = world->rank;

  SRT_RETURN_IF_ERROR(agree_on_mesh(world, o));
  int cp = o->cp > 0 ? o->cp : 1;
  SRT_RETURN_IF_ERROR(srt_mesh_init_cp(&ctx->mesh, world->size, o->dp, cp, o->tp));
  srt_mesh_coord(&ctx->mesh, world->rank, ctx->coord);
  int dpi = ctx->coord[SRT_MESH_DP];
  int cpi = srt_mesh_cp_index(&ctx->mesh, world->rank);
  ctx->placement = srt_mesh_placement(&ctx->mesh);
  ctx->coord[SRT_MESH_DP] = dpi * cp + cpi;

  static const int kinds[] = {SRT_GROUP_TP, SRT_GROUP_DP, SRT_GROUP_DP_CP, SRT_GROUP_CP};
  for (int i = 0; i < 4; ++i) {
    int color, key;
    group_key(&ctx->mesh, world->rank, kinds[i], &color, &key);
    SRT_RETURN_IF_ERROR(o->tcp_mesh ? tcp_group(ctx, kinds[i], o->tcp_mesh)
                                    : split_group(ctx, &ctx->groups[kinds[i]], color, key));
  }
  // MPI user ops, which a TCP world (no MPI) does without: collectives_tcp.c
  // combines bf16 with the same functions.
  if (!o->tcp_mesh)
    SRT_RETURN_IF_ERROR(srt_bf16_reductions_create(ctx));

  if (o->arena_bytes) {
    SRT_RETURN_IF_ERROR(srt_arena_init(&ctx->arena, o->arena_bytes));
    ctx->has_arena = 1;
  }
  if (o->scratch_bytes) {
    void *p;
    SRT_RETURN_IF_ERROR(srt_context_scratch(ctx, o->scratch_bytes, &p));
  }
  return NULL;
}

srt_status srt_context_release(srt_context *ctx, srt_status stuck) {
  if (stuck) {
    free(ctx->scratch);
    free(ctx->op_scratch);
    free(ctx);
    return stuck; // MPI is left as it is: the caller ends the job
  }
  srt_status first = NULL;
  srt_bf16_reductions_free(ctx);
  for (int k = SRT_GROUP_COUNT - 1; k >= 0; --k) {
    srt_group *g = &ctx->groups[k];
    if (g->tcp) {
      free(g->tcp->members);
      free(g->tcp->tmp);
      free(g->tcp);
      g->tcp = NULL;
    }
    if (g->side != MPI_COMM_NULL)
      MPI_Comm_free(&g->side);
    if (g->comm == MPI_COMM_NULL)
      continue;
    int rc = MPI_Comm_free(&g->comm);
    if (rc != MPI_SUCCESS && !first)
      first = srt_mpi_error(rc, "MPI_Comm_free(&g->comm)", g, __FILE__, __LINE__);
    g->comm = MPI_COMM_NULL;
  }
  srt_arena_destroy(&ctx->arena);
  free(ctx->scratch);
  free(ctx->op_scratch);
  for (int i = 0; i < SRT_MAX_PENDING; ++i)
    free(ctx->pending[i].stage);
  if (ctx->owns_mpi) {
    int rc = MPI_Finalize();
    if (rc != MPI_SUCCESS && !first)
      first = srt_mpi_error(rc, "MPI_Finalize()", NULL, __FILE__, __LINE__);
  }
  free(ctx);
  return first;
}

srt_status srt_context_create(const srt_context_options *options,
                              srt_context **out) {
  *out = NULL;
  if (!options)
    return SRT_ERROR(SRT_INVALID_ARGUMENT, "context: options is NULL");
  if (options->tp < 1)
    return SRT_ERROR(SRT_INVALID_ARGUMENT, "context: tp must be >= 1, got %d",
                     options->tp);
  int flag = 0;
  if (!options->tcp_mesh)
    MPI_Finalized(&flag);
  if (flag)
    return SRT_ERROR(SRT_FAILED_PRECONDITION,
                     "context: MPI was already finalised in this process");
  srt_context *ctx = calloc(1, sizeof *ctx);
  if (!ctx)
    return SRT_ERROR(SRT_RESOURCE_EXHAUSTED, "context: out of memory");
  ctx->bf16_sum = ctx->bf16_max = MPI_OP_NULL;
  for (int k = 0; k < SRT_GROUP_COUNT; ++k) {
    ctx->groups[k].comm = MPI_COMM_NULL;
    ctx->groups[k].side = MPI_COMM_NULL;
    ctx->groups[k].name = kGroupNames[k];
    ctx->groups[k].world_rank = -1; // until MPI_Comm_rank tells
    ctx->groups[k].ctx = ctx;
  }
  if (options->tcp_mesh)
    flag = 1; // the groups run over TCP: MPI is not started
  else
    MPI_Initialized(&flag);
  if (!flag) {
    int rc = MPI_Init(NULL, NULL);
    if (rc != MPI_SUCCESS) {
      free(ctx);
      return srt_mpi_error(rc, "MPI_Init(NULL, NULL)", NULL, __FILE__, __LINE__);
    }
    ctx->owns_mpi = 1;
  }
  srt_status s = build(ctx, options);
  if (s) {
    // Release communicators (and MPI, if we started it: the process is left
    // as it was, except that MPI cannot be initialised again).
    srt_status_free(srt_context_release(ctx, NULL));
    return s;
  }
  *out = ctx;
  return NULL;
}

const srt_mesh *srt_context_mesh(const srt_context *ctx) { return &ctx->mesh; }

const srt_mesh *srt_context_placement_mesh(const srt_context *ctx) { return &ctx->placement; }

int srt_context_rank(const srt_context *ctx) {
  return ctx->groups[SRT_GROUP_WORLD].rank;
}

void srt_context_coord(const srt_context *ctx, int coord[SRT_MESH_NDIMS]) {
  coord[SRT_MESH_DP] = ctx->coord[SRT_MESH_DP];
  coord[SRT_MESH_TP] = ctx->coord[SRT_MESH_TP];
}

srt_group *srt_context_group(srt_context *ctx, srt_group_kind kind) {
  return (unsigned)kind < SRT_GROUP_COUNT ? &ctx->groups[kind] : NULL;
}

srt_arena *srt_context_arena(srt_context *ctx) {
  return ctx->has_arena ? &ctx->arena : NULL;
}

// `s` naming this process's world rank (the context of an error that
// belongs to no one group).
static srt_status at_world_rank(const srt_context *ctx, srt_status s) {
  int rank = ctx->groups[SRT_GROUP_WORLD].world_rank;
  return srt_status_annotate(s, rank, "world rank %d", rank);
}

srt_status srt_context_scratch(srt_context *ctx, size_t bytes, void **out) {
  if (bytes <= ctx->scratch_bytes) {
    *out = ctx->scratch;
    return NULL;
  }
  size_t rounded = (bytes + SRT_ARENA_ALIGN - 1) / SRT_ARENA_ALIGN * SRT_ARENA_ALIGN;
  void *p = aligned_alloc(SRT_ARENA_ALIGN, rounded);
  if (!p)
    return at_world_rank(ctx, SRT_ERROR(SRT_RESOURCE_EXHAUSTED,
                                        "collective scratch: cannot allocate %zu bytes", rounded));
  free(ctx->scratch);
  ctx->scratch = p;
  ctx->scratch_bytes = rounded;
  *out = p;
  return NULL;
}

// Grows *buf (of *have bytes) to at least `bytes`, 64-byte aligned.
static srt_status grow(void **buf, size_t *have, size_t bytes, const char *what) {
  if (bytes <= *have)
    return NULL;
  size_t rounded = (bytes + SRT_ARENA_ALIGN - 1) / SRT_ARENA_ALIGN * SRT_ARENA_ALIGN;
  void *p = aligned_alloc(SRT_ARENA_ALIGN, rounded);
  if (!p)
    return SRT_ERROR(SRT_RESOURCE_EXHAUSTED, "%s: cannot allocate %zu bytes", what, rounded);
  free(*buf);
  *buf = p;
  *have = rounded;
  return NULL;
}

srt_status srt_context_op_scratch(srt_context *ctx, size_t bytes, void **out) {
  SRT_RETURN_IF_ERROR(
      at_world_rank(ctx, grow(&ctx->op_scratch, &ctx->op_scratch_bytes, bytes, "op scratch")));
  *out = ctx->op_scratch;
  return NULL;
}

int srt_group_size(const srt_group *group) { return group->size; }
int srt_group_rank(const srt_group *group) { return group->rank; }
const char *srt_group_name(const srt_group *group) { return group->name; }
MPI_Comm srt_group_comm(const srt_group *group) { return group->comm; }

void srt_context_set_step(srt_context *ctx, int64_t step) {
  if (ctx)
    ctx->step = step;
}

int64_t srt_context_step(const srt_context *ctx) { return ctx ? ctx->step : 0; }

void srt_context_set_profile(srt_context *ctx, struct srt_profile *profile) {
  if (ctx)
    ctx->profile = profile;
}

struct srt_profile *srt_context_profile(const srt_context *ctx) {
  return ctx ? ctx->profile : NULL;
}

double srt_context_timeout(const srt_context *ctx) { return ctx ? ctx->timeout_s : 0; }
