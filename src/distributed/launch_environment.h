// Where this process sits in a data-parallel job, read from the environment the launcher set
// up (torchrun / scripts/launch: RANK, WORLD_SIZE, MASTER_ADDR, ...; Open MPI's mpirun:
// OMPI_COMM_WORLD_*). Standard library only.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>

namespace sparsevit::dist {
// Where this process sits in the job, from the launcher's environment.
struct LaunchInfo {
  int64_t rank = 0;
  int64_t world_size = 1;
  int64_t local_rank = 0;
  int64_t local_world_size = 1;
  std::string master_addr = "127.0.0.1";
  int64_t master_port = 29500;
  std::string launcher;  // "torchrun" (RANK/WORLD_SIZE), "mpirun" (OMPI_COMM_WORLD_*), "" (none)
  // torchrun's agent already serves the TCPStore at MASTER_ADDR:MASTER_PORT
  // (TORCHELASTIC_USE_AGENT_STORE=True): every rank connects as a client, under the key prefix
  // /worker/attempt_<TORCHELASTIC_RESTART_COUNT>, as PyTorch's env:// does.
  bool agent_store = false;
  int64_t restart_count = 0;
  bool distributed() const { return world_size > 1; }
};

using EnvLookup = std::function<std::optional<std::string>(const std::string& name)>;

// Reads RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR, MASTER_PORT (torchrun and
// scripts/launch), or else OMPI_COMM_WORLD_RANK / _SIZE / _LOCAL_RANK / _LOCAL_SIZE (Open MPI's
// mpirun; MASTER_ADDR / MASTER_PORT then default to 127.0.0.1:29500). Nothing set: a single
// process (rank 0 of 1). UsageError on malformed or inconsistent values. `env` defaults to getenv.
LaunchInfo launch_info_from_environment(const EnvLookup& env = {});

// An integer from the environment or a URL (`name` says which); UsageError otherwise.
int64_t parse_env_int(const std::string& name, const std::string& value);

}  // namespace sparsevit::dist
