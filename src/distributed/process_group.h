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
#include <memory>
#include <string>
#include <vector>

#include "distributed/launch_environment.h"

namespace sparsevit::dist {

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

}  // namespace sparsevit::dist
