// The single-process MPI of mpi_serial/mpi.h.
#include "mpi.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static int g_initialized, g_finalized;
static MPI_Comm g_next_comm = 3; // after NULL, WORLD, SELF

// The number of processes the launcher started, from the variables that
// mpirun (Open MPI, MPICH/Hydra, Slurm) and torchrun set; 1 when none is.
// The first variable set decides; its text goes to *value. -1 when that
// text is not a positive decimal count ("abc", "2x", "0"): strtol would
// read "abc" as 0 and the refusal would say "0 processes".
static long launched_size(const char **var, const char **value) {
  static const char *const vars[] = {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "SLURM_NTASKS",
                                     "WORLD_SIZE"};
  for (size_t i = 0; i < sizeof vars / sizeof *vars; ++i) {
    const char *v = getenv(vars[i]);
    if (v && *v) {
      *var = vars[i];
      *value = v;
      char *end;
      errno = 0;
      long n = v[0] >= '0' && v[0] <= '9' ? strtol(v, &end, 10) : -1;
      return n > 0 && !*end && errno == 0 ? n : -1;
    }
  }
  return 1;
}

int MPI_Init(int *argc, char ***argv) {
  (void)argc, (void)argv;
  const char *var = NULL, *value = NULL;
  long size = launched_size(&var, &value);
  if (size < 0) { // a launcher's variable that names no count: say which, not "0"
    fprintf(stderr,
            "shardrt: %s='%s' is not a process count (a positive integer): unset it, or "
            "set it to the number of processes launched\n",
            var, value);
    exit(1);
  }
  if (size != 1) {
    // Each process would think it is rank 0 of 1: refuse rather than run N
    // copies of the same job.
    fprintf(stderr,
            "shardrt: this program was built with the serial runtime (no MPI): it runs as "
            "one process, but %s=%ld processes were launched; run it as one process, or "
            "recompile with shard-compile --tp-size/--dp-size whose product is %ld\n",
            var, size, size);
    exit(1);
  }
  g_initialized = 1;
  return MPI_SUCCESS;
}

int MPI_Initialized(int *flag) {
  *flag = g_initialized;
  return MPI_SUCCESS;
}

int MPI_Finalize(void) {
  g_finalized = 1;
  return MPI_SUCCESS;
}

int MPI_Finalized(int *flag) {
  *flag = g_finalized;
  return MPI_SUCCESS;
}

int MPI_Abort(MPI_Comm comm, int errorcode) {
  (void)comm;
  fflush(stdout);
  fflush(stderr);
  exit(errorcode ? errorcode : 1);
}

double MPI_Wtime(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

int MPI_Error_string(int errorcode, char *string, int *resultlen) {
  int n = snprintf(string, MPI_MAX_ERROR_STRING, "serial MPI stand-in: error %d", errorcode);
  *resultlen = n < MPI_MAX_ERROR_STRING ? n : MPI_MAX_ERROR_STRING - 1;
  return MPI_SUCCESS;
}

//===----------------------------------------------------------------------===//
// Communicators and groups: one process each
//===----------------------------------------------------------------------===//

static int check_comm(MPI_Comm comm) { return comm > 0 ? MPI_SUCCESS : MPI_ERR_OTHER; }

int MPI_Comm_rank(MPI_Comm comm, int *rank) {
  *rank = 0;
  return check_comm(comm);
}

int MPI_Comm_size(MPI_Comm comm, int *size) {
  *size = 1;
  return check_comm(comm);
}

int MPI_Comm_dup(MPI_Comm comm, MPI_Comm *newcomm) {
  *newcomm = check_comm(comm) ? MPI_COMM_NULL : g_next_comm++;
  return check_comm(comm);
}

int MPI_Comm_split(MPI_Comm comm, int color, int key, MPI_Comm *newcomm) {
  (void)key;
  *newcomm = check_comm(comm) || color < 0 ? MPI_COMM_NULL : g_next_comm++;
  return check_comm(comm);
}

// The one process shares its node with itself: a communicator of one.
int MPI_Comm_split_type(MPI_Comm comm, int split_type, int key, MPI_Info info,
                        MPI_Comm *newcomm) {
  (void)info;
  return MPI_Comm_split(comm, split_type == MPI_COMM_TYPE_SHARED ? 0 : -1, key, newcomm);
}

int MPI_Comm_free(MPI_Comm *comm) {
  int rc = check_comm(*comm);
  *comm = MPI_COMM_NULL;
  return rc;
}

int MPI_Comm_set_errhandler(MPI_Comm comm, MPI_Errhandler errhandler) {
  (void)errhandler;
  return check_comm(comm);
}

int MPI_Comm_group(MPI_Comm comm, MPI_Group *group) {
  *group = 1;
  return check_comm(comm);
}

int MPI_Group_translate_ranks(MPI_Group group1, int n, const int ranks1[], MPI_Group group2,
                              int ranks2[]) {
  (void)group1, (void)group2;
  for (int i = 0; i < n; ++i)
    ranks2[i] = ranks1[i] == 0 ? 0 : -32766; // MPI_UNDEFINED for a rank not in a group of 1
  return MPI_SUCCESS;
}

int MPI_Group_free(MPI_Group *group) {
  *group = MPI_GROUP_NULL;
  return MPI_SUCCESS;
}

//===----------------------------------------------------------------------===//
// Collectives: the one process's contribution is the result
//===----------------------------------------------------------------------===//

// Copies count elements of `type` from send to recv unless in place.
static int copy(const void *send, void *recv, int count, MPI_Datatype type) {
  if (count < 0 || type <= 0)
    return MPI_ERR_OTHER;
  if (send != MPI_IN_PLACE && send != recv && count)
    memmove(recv, send, (size_t)count * (size_t)type);
  return MPI_SUCCESS;
}

static int done(MPI_Request *request, int rc) {
  *request = MPI_REQUEST_NULL;
  return rc;
}

// A reduction over one process never calls its function: a user op is a
// new handle (after MPI_SUM and MPI_MAX) the reductions accept.
int MPI_Op_create(MPI_User_function *function, int commute, MPI_Op *op) {
  static MPI_Op next = 3;
  (void)commute;
  *op = function ? next++ : MPI_OP_NULL;
  return function ? MPI_SUCCESS : MPI_ERR_OTHER;
}

int MPI_Op_free(MPI_Op *op) {
  *op = MPI_OP_NULL;
  return MPI_SUCCESS;
}

int MPI_Barrier(MPI_Comm comm) { return check_comm(comm); }

int MPI_Bcast(void *buffer, int count, MPI_Datatype datatype, int root, MPI_Comm comm) {
  (void)buffer, (void)count, (void)datatype;
  return root == 0 ? check_comm(comm) : MPI_ERR_OTHER;
}

int MPI_Allreduce(const void *sendbuf, void *recvbuf, int count, MPI_Datatype datatype,
                  MPI_Op op, MPI_Comm comm) {
  return op == MPI_OP_NULL || check_comm(comm) ? MPI_ERR_OTHER
                                               : copy(sendbuf, recvbuf, count, datatype);
}

int MPI_Reduce_scatter_block(const void *sendbuf, void *recvbuf, int recvcount,
                             MPI_Datatype datatype, MPI_Op op, MPI_Comm comm) {
  return MPI_Allreduce(sendbuf, recvbuf, recvcount, datatype, op, comm);
}

int MPI_Ireduce_scatter_block(const void *sendbuf, void *recvbuf, int recvcount,
                              MPI_Datatype datatype, MPI_Op op, MPI_Comm comm,
                              MPI_Request *request) {
  return done(request, MPI_Reduce_scatter_block(sendbuf, recvbuf, recvcount, datatype, op, comm));
}

int MPI_Iallreduce(const void *sendbuf, void *recvbuf, int count, MPI_Datatype datatype,
                   MPI_Op op, MPI_Comm comm, MPI_Request *request) {
  return done(request, MPI_Allreduce(sendbuf, recvbuf, count, datatype, op, comm));
}

int MPI_Iallgather(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf,
                   int recvcount, MPI_Datatype recvtype, MPI_Comm comm,
                   MPI_Request *request) {
  if (check_comm(comm) || (sendbuf != MPI_IN_PLACE &&
                           (size_t)sendcount * (size_t)sendtype !=
                               (size_t)recvcount * (size_t)recvtype))
    return done(request, MPI_ERR_OTHER);
  return done(request, copy(sendbuf, recvbuf, recvcount, recvtype));
}

int MPI_Ialltoall(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf,
                  int recvcount, MPI_Datatype recvtype, MPI_Comm comm, MPI_Request *request) {
  return MPI_Iallgather(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm,
                        request);
}

int MPI_Ibcast(void *buffer, int count, MPI_Datatype datatype, int root, MPI_Comm comm,
               MPI_Request *request) {
  return done(request, MPI_Bcast(buffer, count, datatype, root, comm));
}

int MPI_Test(MPI_Request *request, int *flag, MPI_Status *status) {
  (void)status;
  *request = MPI_REQUEST_NULL;
  *flag = 1;
  return MPI_SUCCESS;
}

int MPI_Wait(MPI_Request *request, MPI_Status *status) {
  int flag;
  return MPI_Test(request, &flag, status);
}

//===----------------------------------------------------------------------===//
// Point to point: a group of one has no peer
//===----------------------------------------------------------------------===//

int MPI_Isend(const void *buf, int count, MPI_Datatype datatype, int dest, int tag,
              MPI_Comm comm, MPI_Request *request) {
  (void)buf, (void)count, (void)datatype, (void)dest, (void)tag, (void)comm;
  return done(request, MPI_ERR_OTHER);
}

int MPI_Iprobe(int source, int tag, MPI_Comm comm, int *flag, MPI_Status *status) {
  (void)source, (void)tag, (void)comm, (void)status;
  *flag = 0;
  return MPI_SUCCESS;
}

int MPI_Recv(void *buf, int count, MPI_Datatype datatype, int source, int tag, MPI_Comm comm,
             MPI_Status *status) {
  (void)buf, (void)count, (void)datatype, (void)source, (void)tag, (void)comm, (void)status;
  return MPI_ERR_OTHER; // would wait forever: there is no sender
}
