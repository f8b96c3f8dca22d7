#include "benchmarks/op_profiler.h"

#include <ATen/record_function.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <vector>

namespace sparsevit::benchmarks {
namespace {

using Clock = std::chrono::steady_clock;
constexpr const char* kPhasePrefix = "phase:";

struct Frame {
  const char* name;
  Clock::time_point start;
  double child_seconds;
  const char* phase;  // the innermost enclosing "phase:" user scope, or nullptr
};

std::mutex g_mutex;
std::map<std::string, OpTotals> g_totals;
bool g_active = false;
thread_local std::vector<Frame> t_stack;

std::unique_ptr<at::ObserverContext> on_start(const at::RecordFunction& fn) {
  const char* name = fn.name();
  const char* phase = t_stack.empty() ? nullptr : t_stack.back().phase;
  if (std::strncmp(name, kPhasePrefix, std::strlen(kPhasePrefix)) == 0) phase = name;
  t_stack.push_back({name, Clock::now(), 0.0, phase});
  return nullptr;
}

void on_end(const at::RecordFunction&, at::ObserverContext*) {
  if (t_stack.empty()) return;  // started before the profiler
  const Frame f = t_stack.back();
  t_stack.pop_back();
  const double elapsed = std::chrono::duration<double>(Clock::now() - f.start).count();
  if (!t_stack.empty()) t_stack.back().child_seconds += elapsed;
  std::lock_guard<std::mutex> lock(g_mutex);
  OpTotals& t = g_totals[f.phase != nullptr && f.phase != f.name ? std::string(f.phase) + "/" + f.name : f.name];
  t.self_seconds += std::max(0.0, elapsed - f.child_seconds);
  ++t.calls;
}

bool contains(const std::string& s, const char* part) { return s.find(part) != std::string::npos; }

}  // namespace

OpProfiler::OpProfiler() {
  {
    std::lock_guard<std::mutex> lock(g_mutex);
    if (g_active) throw std::logic_error("OpProfiler: one profiler at a time");
    g_active = true;
    g_totals.clear();
  }
  handle_ = at::addGlobalCallback(at::RecordFunctionCallback(&on_start, &on_end));
}

OpProfiler::~OpProfiler() {
  at::removeCallback(handle_);
  std::lock_guard<std::mutex> lock(g_mutex);
  g_active = false;
}

std::map<std::string, OpTotals> OpProfiler::totals() const {
  std::lock_guard<std::mutex> lock(g_mutex);
  return g_totals;
}

void OpProfiler::reset() {
  std::lock_guard<std::mutex> lock(g_mutex);
  g_totals.clear();
}

std::string step_part_of_op(const std::string& op) {
  if (op.rfind(kPhasePrefix, 0) == 0) return op.substr(std::strlen(kPhasePrefix), op.find('/') - std::strlen(kPhasePrefix));
  if (contains(op, "onvolution") || contains(op, "conv2d")) return "patch_embedding";
  if (contains(op, "cross_entropy") || contains(op, "nll_loss") || contains(op, "log_softmax") ||
      contains(op, "LogSoftmax") || contains(op, "NllLoss"))
    return "loss";
  if (contains(op, "sparsevit::") || contains(op, "bmm") || contains(op, "oftmax") || contains(op, "SparseAttention") ||
      contains(op, "masked_fill"))
    return "attention";
  if (contains(op, "addmm") || op == "aten::mm" || contains(op, "MmBackward") || contains(op, "aten::linear") ||
      contains(op, "aten::matmul"))
    return "linear_gemm";
  if (contains(op, "layer_norm") || contains(op, "LayerNorm")) return "layer_norm";
  if (contains(op, "gelu") || contains(op, "Gelu")) return "gelu";
  if (contains(op, "copy_") || contains(op, "clone") || contains(op, "contiguous") || op == "aten::cat" ||
      contains(op, "stack") || contains(op, "zero") || contains(op, "fill_") || contains(op, "SelectBackward") ||
      contains(op, "select_backward") || contains(op, "CatBackward") || contains(op, "UnbindBackward") ||
      contains(op, "empty") || contains(op, "reshape") || contains(op, "_unsafe_view") || contains(op, "permute") ||
      contains(op, "transpose") || contains(op, "View") || contains(op, "Permute") || contains(op, "Transpose") ||
      contains(op, "as_strided") || contains(op, "Expand") || contains(op, "expand"))
    return "layout_copies";
  if (op == "aten::add" || op == "aten::add_" || op == "aten::mul" || op == "aten::mul_" || op == "aten::sum" ||
      op == "aten::div" || contains(op, "AddBackward") || contains(op, "MulBackward") || contains(op, "AccumulateGrad"))
    return "elementwise";
  if (contains(op, "autograd::engine")) return "autograd_engine";
  return "other";
}

}  // namespace sparsevit::benchmarks
