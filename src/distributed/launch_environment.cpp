#include "distributed/launch_environment.h"

#include <cstdlib>
#include <stdexcept>

#include "util/errors.h"

namespace sparsevit::dist {
namespace {

std::optional<std::string> getenv_lookup(const std::string& name) {
  const char* v = std::getenv(name.c_str());
  if (v == nullptr || *v == '\0') return std::nullopt;
  return std::string(v);
}



}  // namespace

int64_t parse_env_int(const std::string& name, const std::string& value) {
  try {
    std::size_t used = 0;
    const long long v = std::stoll(value, &used);
    if (used != value.size()) throw std::invalid_argument(value);
    return v;
  } catch (const std::exception&) {
    throw UsageError("environment variable " + name + "='" + value + "' is not an integer");
  }
}

LaunchInfo launch_info_from_environment(const EnvLookup& env_in) {
  const EnvLookup env = env_in ? env_in : EnvLookup(getenv_lookup);
  auto get_int = [&](const std::string& name) -> std::optional<int64_t> {
    const auto v = env(name);
    if (!v) return std::nullopt;
    return parse_env_int(name, *v);
  };
  LaunchInfo info;
  std::optional<int64_t> rank = get_int("RANK"), world = get_int("WORLD_SIZE");
  std::optional<int64_t> local_rank = get_int("LOCAL_RANK"), local_world = get_int("LOCAL_WORLD_SIZE");
  if (rank || world) {
    if (!rank || !world) throw UsageError("the environment sets only one of RANK and WORLD_SIZE; a launcher sets both");
    info.launcher = "torchrun";
  } else if (env("OMPI_COMM_WORLD_SIZE")) {
    rank = get_int("OMPI_COMM_WORLD_RANK");
    world = get_int("OMPI_COMM_WORLD_SIZE");
    local_rank = get_int("OMPI_COMM_WORLD_LOCAL_RANK");
    local_world = get_int("OMPI_COMM_WORLD_LOCAL_SIZE");
    if (!rank) throw UsageError("OMPI_COMM_WORLD_SIZE is set but OMPI_COMM_WORLD_RANK is not");
    info.launcher = "mpirun";
  } else {
    return info;  // a single process
  }
  info.rank = *rank;
  info.world_size = *world;
  if (info.world_size < 1) throw UsageError("WORLD_SIZE must be >= 1, got " + std::to_string(info.world_size));
  if (info.rank < 0 || info.rank >= info.world_size)
    throw UsageError("RANK " + std::to_string(info.rank) + " is not in [0, WORLD_SIZE " + std::to_string(info.world_size) + ")");
  info.local_rank = local_rank.value_or(info.rank);
  info.local_world_size = local_world.value_or(1);
  if (info.local_world_size < 1) throw UsageError("LOCAL_WORLD_SIZE must be >= 1");
  info.agent_store = env("TORCHELASTIC_USE_AGENT_STORE").value_or("") == "True";
  if (info.agent_store) info.restart_count = get_int("TORCHELASTIC_RESTART_COUNT").value_or(0);
  if (const auto addr = env("MASTER_ADDR")) info.master_addr = *addr;
  if (const auto port = get_int("MASTER_PORT")) {
    if (*port < 1 || *port > 65535) throw UsageError("MASTER_PORT must be in [1, 65535], got " + std::to_string(*port));
    info.master_port = *port;
  }
  return info;
}

}  // namespace sparsevit::dist
