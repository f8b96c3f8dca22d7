// The process a run lives in: its place in a data-parallel job (rank, world size, process
// group), its CPU threads and seeds, and where progress goes (rank 0's stdout; the other ranks
// stay quiet). Built once at the start of every pipeline.
#pragma once

#include <cstdint>
#include <memory>
#include <ostream>
#include <string>

#include "distributed/launch_environment.h"
#include "distributed/process_group.h"

namespace sparsevit::train {

struct ProcessOptions {
  int64_t threads = 0;  // 0: every core, shared among this machine's processes of the job
  int64_t seed = 0;
  std::string dist_backend = "gloo";
  std::string dist_url = "env://";
  double dist_timeout = 1800;
};

class ProcessContext {
 public:
  // Joins the process group when a launcher started several processes, sets the threads and
  // seeds torch with `seed` (rank 0's stream; see reseed_per_rank).
  explicit ProcessContext(const ProcessOptions& options);
  ~ProcessContext();
  ProcessContext(const ProcessContext&) = delete;
  ProcessContext& operator=(const ProcessContext&) = delete;

  int64_t rank() const { return launch_.rank; }
  int64_t world_size() const { return group_ ? launch_.world_size : 1; }
  bool main_rank() const { return launch_.rank == 0; }
  int64_t threads() const { return threads_; }
  const dist::LaunchInfo& launch() const { return launch_; }
  dist::ProcessGroup* group() { return group_.get(); }  // null: a single process
  // Progress and per-epoch lines: std::cout on rank 0, a stream that drops everything elsewhere.
  std::ostream& out();
  // Stochastic depth and the like differ per rank (MAE: seed + rank); data order and augmentation
  // come from the shared seed through the loaders. `salt` separates resumed epochs' streams.
  void reseed_per_rank(int64_t seed, int64_t salt = -1);

 private:
  dist::LaunchInfo launch_;
  std::unique_ptr<dist::ProcessGroup> group_;
  int64_t threads_ = 1;
  std::ostream null_stream_{nullptr};
  int saved_log_level_ = 0;
};

}  // namespace sparsevit::train
