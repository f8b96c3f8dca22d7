// Gradient averaging over a process group, as DistributedDataParallel does it.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <memory>
#include <vector>

#include "distributed/process_group.h"

namespace sparsevit::dist {

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
  // Gradient accumulation (MAE's --accum_iter, DDP's no_sync): with sync off, backward passes
  // only accumulate into .grad and nothing is communicated; the next synced backward reduces
  // the accumulated sum (its hooks add what .grad already holds) and finish() averages it.
  void set_sync(bool sync);

  int64_t num_buckets() const;
  // How many buckets the last finish() found already started by the hooks (0 without overlap).
  int64_t buckets_started_during_backward() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace sparsevit::dist
