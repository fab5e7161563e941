// The driver's launcher check: an env launch (torchrun's or Slurm's
// variables without an MPI launcher, shardrt/launch_env.h) of more than one
// process is refused at start. Every process would otherwise start MPI as
// a singleton, a world of one, and train alone on its own data. The cpu
// backend's collectives are MPI's. A cuda program's NCCL communicators
// could start from the TCP rendezvous (shardrt/rendezvous.h hands out the
// unique id), but the driver's host-side collectives (the options' and the
// stop signals' agreement, metrics, checkpoint bookkeeping) and the
// runtime's groups are MPI's too, and have no TCP implementation yet.
#include "train_internal.h"

#include <stdio.h>

#include "shardrt/launch_env.h"

srt_status train_check_launch(const srt_launch_env *e, const srt_backend *backend) {
  if (e->kind != SRT_LAUNCH_TORCHRUN && e->kind != SRT_LAUNCH_SLURM)
    return NULL;
  if (e->world_size == 1)
    return NULL; // one process: nothing to meet
  bool slurm = e->kind == SRT_LAUNCH_SLURM;
  const char *vars = slurm ? "SLURM_PROCID, SLURM_NTASKS" : "RANK, WORLD_SIZE";
  char how[96];
  snprintf(how, sizeof how, slurm ? "srun --mpi=pmix -n %d (PMIx makes the MPI world)"
                                   : "mpirun -np %d --hostfile HOSTS", e->world_size);
  if (!backend || backend->host)
    return SRT_ERROR(SRT_FAILED_PRECONDITION,
                     "rank %d of %d from %s's variables (%s) but no MPI launcher: a %s "
                     "program's collectives run over MPI, so each process would train "
                     "alone; start the job with %s", e->rank, e->world_size,
                     srt_launch_kind_name(e->kind), vars, backend ? backend->name : "cpu", how);
  return SRT_ERROR(SRT_FAILED_PRECONDITION,
                   "rank %d of %d from %s's variables (%s) but no MPI launcher: a %s "
                   "program's NCCL world could start from the TCP rendezvous at "
                   "MASTER_ADDR:MASTER_PORT %s:%d (shard-rendezvous checks it), but the "
                   "driver's host-side collectives (options, stop signals, metrics, "
                   "checkpoints) have only an MPI implementation, so an env launch of "
                   "more than one process is not supported yet; start the job with %s",
                   e->rank, e->world_size, srt_launch_kind_name(e->kind), vars,
                   backend->name, e->master_addr, e->master_port, how);
}
