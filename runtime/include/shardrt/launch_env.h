// How this process was launched, read from its environment: by an MPI
// launcher (mpirun, or srun --mpi=pmix), or the torchrun/Slurm way, where
// each process learns its rank, the world size and a rendezvous address
// (rank 0's host and a port) from environment variables and the processes
// find each other over TCP (shardrt/rendezvous.h) rather than through MPI.
//
// The variables, as torchrun sets them: RANK, WORLD_SIZE, LOCAL_RANK,
// MASTER_ADDR, MASTER_PORT. As Slurm's srun sets them: SLURM_PROCID,
// SLURM_NTASKS, SLURM_LOCALID, SLURM_JOB_NODELIST (whose first host is
// rank 0's) and SLURM_JOB_ID; MASTER_ADDR and MASTER_PORT, when set,
// override the host and port derived from them. SHARD_RENDEZVOUS_PORT, when
// set, overrides the port of either.
#ifndef SHARDRT_LAUNCH_ENV_H
#define SHARDRT_LAUNCH_ENV_H

#include <stddef.h>

#include "shardrt/status.h"

typedef enum srt_launch_kind {
  SRT_LAUNCH_NONE,     // no launcher variables: one process on its own
  SRT_LAUNCH_MPI,      // an MPI launcher (OMPI_COMM_WORLD_SIZE or PMIX_RANK set)
  SRT_LAUNCH_TORCHRUN, // RANK and WORLD_SIZE set
  SRT_LAUNCH_SLURM,    // SLURM_PROCID set (srun without an MPI plugin)
} srt_launch_kind;

/// The length of a host name kept here, with its NUL (HOST_NAME_MAX + 1).
#define SRT_LAUNCH_HOST_LEN 256

/// Base of the port derived from a Slurm job id when MASTER_PORT is unset:
/// 15000 + the job id's last four decimal digits (PyTorch Lightning's
/// Slurm default), so two jobs sharing a node seldom pick the same port.
#define SRT_LAUNCH_SLURM_PORT_BASE 15000

typedef struct srt_launch_env {
  srt_launch_kind kind;
  int rank;        // 0 <= rank < world_size (NONE and MPI: 0; MPI ranks come from MPI)
  int world_size;  // >= 1 (NONE and MPI: 1)
  int local_rank;  // the rank among the processes of this host, >= 0
  char master_addr[SRT_LAUNCH_HOST_LEN]; // rank 0's host name or address
  int master_port; // 1..65535 (0 for NONE and MPI)
  int start_timeout_s; // seconds for every process to join the rendezvous and mesh
} srt_launch_env;

/// The start-up deadline of an env launch unless SHARD_RENDEZVOUS_TIMEOUT
/// says otherwise (seconds): the processes of a job start within this of
/// each other (torchrun's rendezvous waits 900 s; a lost rank is then
/// named sooner).
#define SRT_LAUNCH_START_TIMEOUT 300

/// Looks up one environment variable: its value or NULL when unset.
/// `user` is the pointer given to srt_launch_env_read.
typedef const char *(*srt_getenv_fn)(const char *name, void *user);

/// Reads the launch from the variables `get` returns (getenv's view for
/// srt_launch_env_from_environ; a table in tests). The order of precedence:
/// an MPI launcher's variables (OMPI_COMM_WORLD_SIZE, PMIX_RANK) make
/// SRT_LAUNCH_MPI and nothing else is read; then RANK or WORLD_SIZE make a
/// torchrun launch (RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR and
/// MASTER_PORT all required); then SLURM_PROCID makes a Slurm launch
/// (SLURM_PROCID, SLURM_NTASKS, SLURM_LOCALID required, the master host
/// MASTER_ADDR or else SLURM_JOB_NODELIST's first host, the port
/// MASTER_PORT or else SRT_LAUNCH_SLURM_PORT_BASE + SLURM_JOB_ID % 10000);
/// else SRT_LAUNCH_NONE. For torchrun and Slurm, SHARD_RENDEZVOUS_PORT, when
/// set, is the port instead; it is required under torchrun when
/// TORCHELASTIC_USE_AGENT_STORE=True (MASTER_PORT is then held by
/// torchrun's own store on rank 0's host). SHARD_RENDEZVOUS_TIMEOUT (whole
/// seconds, 1..86400) replaces SRT_LAUNCH_START_TIMEOUT.
///
/// Errors: SRT_INVALID_ARGUMENT naming the variable and its value: a
/// required variable unset, a value that is not a decimal integer, RANK
/// outside [0, WORLD_SIZE), WORLD_SIZE < 1, LOCAL_RANK < 0, a port outside
/// 1..65535, an empty or too long MASTER_ADDR, a malformed node list,
/// torchrun's store on MASTER_PORT without SHARD_RENDEZVOUS_PORT, a
/// SHARD_RENDEZVOUS_TIMEOUT outside 1..86400.
/// `out` is fully written on success only.
srt_status srt_launch_env_read(srt_getenv_fn get, void *user, srt_launch_env *out);

/// srt_launch_env_read over this process's environment (getenv).
srt_status srt_launch_env_from_environ(srt_launch_env *out);

/// The first host of a Slurm host list (SLURM_JOB_NODELIST's syntax: names
/// separated by commas, each with bracketed ranges or lists of numbers,
/// e.g. "gpu[03-05,09],login1" -> "gpu03", "rack[1-2]-n[07-08]" ->
/// "rack1-n07"; a range's first number keeps its zero padding) into `out`
/// (`len` bytes with the NUL).
///
/// Errors: SRT_INVALID_ARGUMENT naming the list: empty, an unclosed or
/// empty bracket, a name that does not fit `len`.
srt_status srt_slurm_first_host(const char *nodelist, char *out, size_t len);

/// "torchrun" / "Slurm" / "MPI" / "none": the name of `kind` in messages.
const char *srt_launch_kind_name(srt_launch_kind kind);

#endif // SHARDRT_LAUNCH_ENV_H
