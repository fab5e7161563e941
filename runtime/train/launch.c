// The driver's host plane: how the job's processes meet and make their
// small host-side agreements (options, metrics, the stop signals' are the
// context's). Under an MPI launcher (mpirun, srun --mpi=pmix) or with no
// launcher it is MPI, as before. An env launch (torchrun's or Slurm's
// variables, shardrt/launch_env.h) of several processes cannot ride MPI:
// each process would start a singleton world of its own. It meets over the
// TCP rendezvous instead and builds the TCP mesh (shardrt/tcp_mesh.h);
// the context's groups then run over the mesh (the cpu backend's tensors
// as well: correct but slower than MPI's shared memory), MPI is never
// started, and on the cuda backend NCCL's unique ids go over the mesh as
// srt_broadcast calls (llm.c's "tcp" init method).
#include "train_internal.h"

#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

#include "shardrt/launch_env.h"
#include "shardrt/tcp_mesh.h"

static srt_tcp_mesh *plane; // NULL: MPI
// The mesh's build deadline and that of the plane's exchanges through rank
// 0 (seconds, the launch's start_timeout_s: SHARD_RENDEZVOUS_TIMEOUT or
// 300): the processes of a job start within this of each other; the
// steps' collectives have --timeout.
static int plane_timeout = SRT_LAUNCH_START_TIMEOUT;

bool train_launch_uses_tcp(const srt_launch_env *e) {
  return (e->kind == SRT_LAUNCH_TORCHRUN || e->kind == SRT_LAUNCH_SLURM) && e->world_size > 1;
}

srt_status train_plane_start(const srt_launch_env *e, int *argc, char ***argv) {
  if (!train_launch_uses_tcp(e)) {
    MPI_Init(argc, argv);
    return NULL;
  }
  plane_timeout = e->start_timeout_s;
  return srt_tcp_mesh_connect(e, plane_timeout, &plane);
}

void train_plane_end(void) {
  if (plane) {
    srt_tcp_mesh_free(plane);
    plane = NULL;
  } else {
    MPI_Finalize();
  }
}

const srt_tcp_mesh *train_plane_mesh(void) { return plane; }

int train_plane_rank(void) {
  int rank = 0;
  if (plane)
    return plane->rank;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  return rank;
}

int train_plane_size(void) {
  int size = 1;
  if (plane)
    return plane->size;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  return size;
}

// A failed exchange of the TCP plane: a peer is lost; as MPI's default
// error handler does for an MPI failure, the process ends (status 1).
static void plane_failed(srt_status s) {
  fprintf(stderr, "train: rank %d: %s\n", plane->rank, srt_status_message(s));
  srt_status_free(s);
  fflush(stderr);
  exit(1);
}

void train_plane_bcast(void *buf, size_t bytes) {
  if (plane) {
    srt_status s = srt_tcp_mesh_bcast(plane, buf, bytes, plane_timeout);
    if (s)
      plane_failed(s);
    return;
  }
  size_t off = 0;
  do { // in chunks an int counts
    size_t n = bytes - off < (1 << 20) ? bytes - off : (1 << 20);
    MPI_Bcast((char *)buf + off, (int)n, MPI_BYTE, 0, MPI_COMM_WORLD);
    off += n;
  } while (off < bytes);
}

// v = op over the ranks' v (one value), in rank order.
static void tcp_allreduce(void *v, srt_dtype dtype, srt_reduce_op op) {
  size_t elem = dtype == SRT_F64 ? sizeof(double) : sizeof(int64_t);
  unsigned char *all = malloc((size_t)plane->size * elem);
  srt_status s = all ? srt_tcp_mesh_allgather(plane, v, all, elem, plane_timeout)
                     : SRT_ERROR(SRT_RESOURCE_EXHAUSTED, "host plane: no memory");
  if (s) {
    free(all);
    plane_failed(s);
  }
  for (int r = 0; r < plane->size; ++r) {
    if (dtype == SRT_F64) {
      double x = ((double *)(void *)all)[r], *d = v;
      *d = r == 0 ? x : op == SRT_REDUCE_SUM ? *d + x : x > *d ? x : *d;
    } else {
      int64_t x = ((int64_t *)(void *)all)[r], *d = v;
      *d = r == 0 ? x : op == SRT_REDUCE_SUM ? *d + x : x > *d ? x : *d;
    }
  }
  free(all);
}

void train_plane_allreduce(void *v, srt_dtype dtype, srt_reduce_op op) {
  if (plane) {
    tcp_allreduce(v, dtype, op);
    return;
  }
  MPI_Allreduce(MPI_IN_PLACE, v, 1, dtype == SRT_F64 ? MPI_DOUBLE : MPI_INT64_T,
                op == SRT_REDUCE_SUM ? MPI_SUM : MPI_MAX, MPI_COMM_WORLD);
}

void train_plane_abort(void) {
  if (!plane)
    MPI_Abort(MPI_COMM_WORLD, 1);
  fflush(stderr);
  exit(1); // its sockets close: every peer's next exchange names this rank
}
