// Self CPU time per ATen / sparsevit operator while a scope is active, through LibTorch's
// RecordFunction callbacks (the mechanism torch.profiler uses), aggregated by op name.
//
//   OpProfiler profiler;                 // starts recording (one profiler at a time)
//   ... run steps ...
//   auto ops = profiler.totals();        // name -> {self_seconds, calls}
//
// "Self" time is an op's wall time minus the time of the ops it calls, so the totals add up to
// the time spent inside ops without double counting (composite ops such as aten::linear get only
// their own overhead; the aten::addmm they call gets the GEMM). Backward nodes (AddmmBackward0,
// ...) are scopes too, so the kernels they call are counted under their own names. Ops inside a
// user scope named "phase:NAME" (RECORD_USER_SCOPE("phase:optimizer")) are keyed
// "phase:NAME/op" and belong to part NAME.
#pragma once

#include <cstdint>
#include <map>
#include <string>

namespace sparsevit::benchmarks {

struct OpTotals {
  double self_seconds = 0;
  int64_t calls = 0;
};

class OpProfiler {
 public:
  OpProfiler();
  ~OpProfiler();
  OpProfiler(const OpProfiler&) = delete;
  OpProfiler& operator=(const OpProfiler&) = delete;

  std::map<std::string, OpTotals> totals() const;
  void reset();

 private:
  uint64_t handle_ = 0;
};

// The part of a ViT training step an op belongs to, for the step breakdown: patch_embedding,
// linear_gemm (qkv, proj, MLP, head), attention (scores, softmax, the sparse operator),
// layer_norm, gelu, elementwise (residual adds, scaling, bias gradients), layout_copies
// (permute/contiguous copies, cat/stack, zero fills), loss, other.
std::string step_part_of_op(const std::string& op_name);

}  // namespace sparsevit::benchmarks
