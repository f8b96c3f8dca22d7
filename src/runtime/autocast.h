// bfloat16 autocast on the CPU (`--amp bf16`): inside the guard, LibTorch's autocast runs the ops
// on its lower-precision list (linear, matmul, conv, bmm, ...) in bfloat16 and keeps the rest
// (norms, softmax, losses, reductions) in float32; parameters stay float32 (master weights) and
// their gradients arrive in float32. No-op when disabled.
#pragma once

namespace sparsevit::runtime {

class AutocastGuard {
 public:
  explicit AutocastGuard(bool enabled);
  ~AutocastGuard();
  AutocastGuard(const AutocastGuard&) = delete;
  AutocastGuard& operator=(const AutocastGuard&) = delete;

 private:
  bool enabled_;
  bool previous_ = false;
};

}  // namespace sparsevit::runtime
