#include "ops/sparse_attention.h"

#include <ATen/ATen.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <c10/core/InferenceMode.h>

#include <cmath>
#include <cstring>
#include <list>
#include <mutex>

#include "patterns/pattern.h"

namespace sparsevit::ops {
namespace {

uint64_t fnv1a(uint64_t h, const void* data, size_t bytes) {
  const auto* p = static_cast<const unsigned char*>(data);
  for (size_t i = 0; i < bytes; ++i) {
    h ^= p[i];
    h *= 1099511628211ULL;
  }
  return h;
}

uint64_t pattern_hash(const patterns::Pattern& pattern) {
  uint64_t h = 1469598103934665603ULL;
  const int32_t dims[2] = {pattern.num_tokens(), pattern.num_heads()};
  h = fnv1a(h, dims, sizeof(dims));
  for (int32_t head = 0; head < pattern.num_heads(); ++head) {
    const auto& rp = pattern.row_ptr(head);
    const auto& ci = pattern.col_idx(head);
    h = fnv1a(h, rp.data(), rp.size() * sizeof(int32_t));
    h = fnv1a(h, ci.data(), ci.size() * sizeof(int32_t));
  }
  return h;
}

bool same_content(const PatternTensors& t, const patterns::Pattern& pattern) {
  if (t.num_tokens != pattern.num_tokens() || t.num_heads != pattern.num_heads() ||
      t.total_edges != pattern.total_edges() || t.col_idx.size(1) != pattern.max_edges()) {
    return false;
  }
  const int64_t N = t.num_tokens, stride = t.col_idx.size(1);
  const int32_t* rp = t.row_ptr.data_ptr<int32_t>();
  const int32_t* ci = t.col_idx.data_ptr<int32_t>();
  for (int32_t h = 0; h < pattern.num_heads(); ++h) {
    const auto& prp = pattern.row_ptr(h);
    const auto& pci = pattern.col_idx(h);
    if (std::memcmp(rp + h * (N + 1), prp.data(), prp.size() * sizeof(int32_t)) != 0) return false;
    if (!pci.empty() && std::memcmp(ci + h * stride, pci.data(), pci.size() * sizeof(int32_t)) != 0) return false;
  }
  return true;
}

struct CacheEntry {
  uint64_t hash;
  PatternTensors tensors;
};

constexpr size_t kCacheCapacity = 64;

}  // namespace

at::Tensor sparse_attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const at::Tensor& row_ptr,
                            const at::Tensor& col_idx, double scale) {
  static auto op = c10::Dispatcher::singleton()
                       .findSchemaOrThrow("sparsevit::sparse_attention", "")
                       .typed<at::Tensor(const at::Tensor&, const at::Tensor&, const at::Tensor&, const at::Tensor&,
                                         const at::Tensor&, double)>();
  return op.call(q, k, v, row_ptr, col_idx, scale);
}

at::Tensor sparse_attention_qkv(const at::Tensor& qkv, int64_t num_heads, const at::Tensor& row_ptr,
                                const at::Tensor& col_idx, double scale) {
  static auto op = c10::Dispatcher::singleton()
                       .findSchemaOrThrow("sparsevit::sparse_attention_qkv", "")
                       .typed<at::Tensor(const at::Tensor&, int64_t, const at::Tensor&, const at::Tensor&, double)>();
  return op.call(qkv, num_heads, row_ptr, col_idx, scale);
}

PatternTensors PatternTensors::from_pattern(const patterns::Pattern& pattern) {
  // Always normal tensors, even when the first conversion happens under InferenceMode: the cache
  // hands these same tensors to every later call, and inference tensors can be neither saved for
  // backward (training with them would fail) nor tracked by a version counter.
  c10::InferenceMode normal_tensors(/*enabled=*/false);
  PatternTensors t;
  t.num_tokens = pattern.num_tokens();
  t.num_heads = pattern.num_heads();
  t.total_edges = pattern.total_edges();
  const auto rp = pattern.flat_row_ptr();
  const auto ci = pattern.padded_col_idx();
  const auto opts = at::TensorOptions().dtype(at::kInt);
  t.row_ptr = at::empty({t.num_heads, t.num_tokens + 1}, opts);
  t.col_idx = at::empty({t.num_heads, pattern.max_edges()}, opts);
  if (!rp.empty()) std::memcpy(t.row_ptr.data_ptr<int32_t>(), rp.data(), rp.size() * sizeof(int32_t));
  if (!ci.empty()) std::memcpy(t.col_idx.data_ptr<int32_t>(), ci.data(), ci.size() * sizeof(int32_t));
  return t;
}

double PatternTensors::density() const {
  const double all = static_cast<double>(num_heads) * static_cast<double>(num_tokens) * static_cast<double>(num_tokens);
  return all > 0 ? static_cast<double>(total_edges) / all : 0.0;
}

PatternTensors pattern_tensors(const patterns::Pattern& pattern) {
  static std::mutex mutex;
  static std::list<CacheEntry> cache;  // most recently used first
  const uint64_t hash = pattern_hash(pattern);
  std::lock_guard<std::mutex> lock(mutex);
  for (auto it = cache.begin(); it != cache.end(); ++it) {
    if (it->hash == hash && same_content(it->tensors, pattern)) {
      cache.splice(cache.begin(), cache, it);
      return cache.front().tensors;
    }
  }
  cache.push_front(CacheEntry{hash, PatternTensors::from_pattern(pattern)});
  if (cache.size() > kCacheCapacity) cache.pop_back();
  return cache.front().tensors;
}

at::Tensor sparse_attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                            const PatternTensors& pattern, double scale) {
  if (q.defined() && q.device() != pattern.row_ptr.device()) {
    return sparse_attention(q, k, v, pattern.row_ptr.to(q.device()), pattern.col_idx.to(q.device()), scale);
  }
  return sparse_attention(q, k, v, pattern.row_ptr, pattern.col_idx, scale);
}

at::Tensor sparse_attention_qkv(const at::Tensor& qkv, int64_t num_heads, const PatternTensors& pattern,
                                double scale) {
  if (qkv.defined() && qkv.device() != pattern.row_ptr.device()) {
    return sparse_attention_qkv(qkv, num_heads, pattern.row_ptr.to(qkv.device()), pattern.col_idx.to(qkv.device()),
                                scale);
  }
  return sparse_attention_qkv(qkv, num_heads, pattern.row_ptr, pattern.col_idx, scale);
}

at::Tensor sparse_attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                            const patterns::Pattern& pattern, double scale) {
  return sparse_attention(q, k, v, pattern_tensors(pattern), scale);
}

double default_scale(int64_t head_dim) { return head_dim > 0 ? 1.0 / std::sqrt(static_cast<double>(head_dim)) : 1.0; }

}  // namespace sparsevit::ops
