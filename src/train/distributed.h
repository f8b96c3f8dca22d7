// Data-parallel training over LibTorch's c10d process groups (Gloo on CPU; NCCL where the
// LibTorch build has it), with the rendezvous torchrun / mpirun / scripts/launch set up in the
// environment. Every c10d type stays in distributed.cpp (its API differs between LibTorch 1.13
// and 2.x); this header needs only ATen's Tensor.
//
//   LaunchInfo info = launch_info_from_environment();   // RANK, WORLD_SIZE, MASTER_ADDR, ...
//   if (info.distributed()) pg = ProcessGroup::create(info, {"gloo", "env://", 1800});
//   pg->broadcast(params_and_buffers);                    // rank 0's values everywhere
//   GradientReducer reducer(*pg, params, 25 << 20, /*overlap=*/true);
//   loss.backward(); reducer.finish();                   // .grad = mean over ranks
//
// Errors (a peer that exited, was killed or stopped answering within the timeout; a busy port;
// a rendezvous nobody joins) are RuntimeErrors with one line naming this rank and the operation.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace sparsevit::train::dist {

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

struct InitOptions {
  std::string backend = "gloo";   // gloo | nccl
  std::string url = "env://";     // env:// (TCPStore at MASTER_ADDR:MASTER_PORT, served by rank 0),
                                  // tcp://HOST:PORT (the same, explicit), file:///PATH (FileStore)
  double timeout_seconds = 1800;  // rendezvous and every collective
};

// Whether this LibTorch build has the backend ("gloo": always; "nccl": CUDA + NCCL builds only).
bool backend_available(const std::string& backend);

// One c10d process group (all ranks of the job).
class ProcessGroup {
 public:
  // Rendezvous and connect. UsageError for an unknown / unavailable backend or a bad URL,
  // RuntimeError when the rendezvous fails or times out.
  static std::unique_ptr<ProcessGroup> create(const LaunchInfo& info, const InitOptions& options);
  ~ProcessGroup();
  ProcessGroup(const ProcessGroup&) = delete;
  ProcessGroup& operator=(const ProcessGroup&) = delete;

  int64_t rank() const { return rank_; }
  int64_t world_size() const { return world_size_; }
  double timeout_seconds() const { return timeout_seconds_; }
  const std::string& backend() const { return backend_; }

  // Sums `tensor` over the ranks, in place (it must be contiguous).
  void allreduce_sum(at::Tensor& tensor);
  // Copies root's values into every rank's `tensors` (in place, no autograd), flattened into a
  // few collectives of at most bucket_bytes each (one per dtype and bucket).
  void broadcast(const std::vector<at::Tensor>& tensors, int64_t root = 0, int64_t bucket_bytes = 25 << 20);
  void barrier();

  // Asynchronous in-place sum: returns a handle for wait(). Collectives run in call order.
  int64_t allreduce_sum_async(at::Tensor& tensor);
  void wait(int64_t handle);

  // "distributed (rank R of W): OP failed: WHY (...)" as a RuntimeError; for callers' own checks.
  [[noreturn]] void fail(const std::string& op, const std::string& why) const;

 private:
  struct Impl;
  ProcessGroup(std::unique_ptr<Impl> impl, int64_t rank, int64_t world_size, double timeout, std::string backend);
  [[noreturn]] void rethrow(const std::string& op) const;  // inside catch: the current exception as fail()

  std::unique_ptr<Impl> impl_;
  int64_t rank_, world_size_;
  double timeout_seconds_;
  std::string backend_;
};

// Averages gradients over the ranks the way DistributedDataParallel does: parameters are packed
// (in reverse registration order, roughly the order backward produces them) into flat buckets
// of at most bucket_bytes; each bucket is summed with one allreduce and divided by world_size.
//
// overlap = true: a hook on every parameter copies its gradient into its bucket as backward
// produces it, and a full bucket's allreduce starts asynchronously right away (buckets start in
// bucket order on every rank, so the ranks issue the collectives in the same order), overlapping
// communication with the rest of backward. overlap = false: everything is packed and reduced
// after backward. Either way finish(), called after backward and before the optimizer step,
// waits and writes the averaged gradients into .grad. A parameter that got no gradient this
// step counts as zero (and gets a zero .grad), as with find_unused_parameters.
class GradientReducer {
 public:
  GradientReducer(ProcessGroup& group, std::vector<at::Tensor> params, int64_t bucket_bytes, bool overlap);
  ~GradientReducer();
  GradientReducer(const GradientReducer&) = delete;
  GradientReducer& operator=(const GradientReducer&) = delete;

  void finish();

  int64_t num_buckets() const;
  // Bucket b's parameters, as indices into `params`.
  std::vector<int64_t> bucket_params(int64_t b) const;
  // How many buckets the last finish() found already started by the hooks (0 without overlap).
  int64_t buckets_started_during_backward() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace sparsevit::train::dist
