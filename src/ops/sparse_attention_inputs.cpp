#include "ops/sparse_attention_inputs.h"

#include "ops/cpu/sparse_attention_cpu_kernels.h"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>

#include <algorithm>
#include <cstring>
#include <limits>
#include <list>
#include <mutex>
#include <vector>

namespace sparsevit::ops {
namespace {

bool is_index_type(at::ScalarType t) { return t == at::kInt || t == at::kLong; }

bool is_supported_float(at::ScalarType t) {
  return t == at::kFloat || t == at::kDouble || t == at::kBFloat16 || t == at::kHalf;
}

// Reads element i of a contiguous int32/int64 tensor as int64.
struct IndexReader {
  const int32_t* i32 = nullptr;
  const int64_t* i64 = nullptr;
  explicit IndexReader(const at::Tensor& t) {
    if (t.scalar_type() == at::kInt) {
      i32 = t.data_ptr<int32_t>();
    } else {
      i64 = t.data_ptr<int64_t>();
    }
  }
  int64_t operator[](int64_t i) const { return i32 ? i32[i] : i64[i]; }
};

// row_ptr [H, N+1] and col_idx [H, nnz_max], int32/int64, for the shape s (sets s.nnz_stride).
// `what`/`sizes` name the tensor the shape came from in the messages.
void check_index_tensors(const char* op, AttentionShape& s, const at::Tensor& row_ptr, const at::Tensor& col_idx,
                         const char* what, at::IntArrayRef sizes) {
  TORCH_CHECK(row_ptr.defined() && col_idx.defined(), op, ": row_ptr and col_idx must be defined tensors");
  TORCH_CHECK(is_index_type(row_ptr.scalar_type()), op, ": row_ptr must be int32 or int64, got ",
              row_ptr.scalar_type());
  TORCH_CHECK(is_index_type(col_idx.scalar_type()), op, ": col_idx must be int32 or int64, got ",
              col_idx.scalar_type());
  TORCH_CHECK(row_ptr.dim() == 2 && row_ptr.size(0) == s.layer.num_heads && row_ptr.size(1) == s.layer.num_tokens + 1, op,
              ": row_ptr must be [H, N+1] = [", s.layer.num_heads, ", ", s.layer.num_tokens + 1, "] for ", what, " of shape ", sizes,
              ", got ", row_ptr.sizes());
  TORCH_CHECK(col_idx.dim() == 2 && col_idx.size(0) == s.layer.num_heads, op, ": col_idx must be [H, nnz_max] with H = ",
              s.layer.num_heads, ", got ", col_idx.sizes());
  s.nnz_stride = col_idx.size(1);
  TORCH_CHECK(s.layer.num_tokens < std::numeric_limits<int32_t>::max() && s.nnz_stride < std::numeric_limits<int32_t>::max(),
              op, ": N and nnz_max must be below 2^31, got N = ", s.layer.num_tokens, ", nnz_max = ", s.nnz_stride);
}

}  // namespace

AttentionShape check_attention_inputs(const char* op, const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                                      const at::Tensor& row_ptr, const at::Tensor& col_idx) {
  TORCH_CHECK(q.defined() && k.defined() && v.defined(), op, ": q, k and v must be defined tensors");
  TORCH_CHECK(q.dim() == 4, op, ": q must be [B, H, N, D], got a tensor of shape ", q.sizes());
  TORCH_CHECK(k.sizes() == q.sizes(), op, ": k must have the shape of q ", q.sizes(), ", got ", k.sizes());
  TORCH_CHECK(v.sizes() == q.sizes(), op, ": v must have the shape of q ", q.sizes(), ", got ", v.sizes());
  TORCH_CHECK(is_supported_float(q.scalar_type()), op,
              ": q, k, v must be float32, float64, bfloat16 or float16, got ", q.scalar_type());
  TORCH_CHECK(k.scalar_type() == q.scalar_type() && v.scalar_type() == q.scalar_type(), op,
              ": q, k, v must have one dtype, got ", q.scalar_type(), ", ", k.scalar_type(), ", ", v.scalar_type());
  TORCH_CHECK(k.device() == q.device() && v.device() == q.device(), op, ": q, k, v must be on one device, got ",
              q.device(), ", ", k.device(), ", ", v.device());
  AttentionShape s = AttentionShape::of(q.size(0), q.size(1), q.size(2), q.size(3), 0);
  check_index_tensors(op, s, row_ptr, col_idx, "q", q.sizes());
  return s;
}

AttentionShape check_qkv_inputs(const char* op, const at::Tensor& qkv, int64_t num_heads, const at::Tensor& row_ptr,
                                const at::Tensor& col_idx) {
  TORCH_CHECK(qkv.defined(), op, ": qkv must be a defined tensor");
  TORCH_CHECK(qkv.dim() == 3, op,
              ": qkv must be [B, N, 3*H*D] (the fused qkv projection's output), got a tensor of shape ", qkv.sizes());
  TORCH_CHECK(num_heads > 0, op, ": num_heads must be positive, got ", num_heads);
  TORCH_CHECK(qkv.size(2) > 0 && qkv.size(2) % (3 * num_heads) == 0, op, ": the last dim of qkv (", qkv.size(2),
              ") must be a positive multiple of 3 * num_heads = ", 3 * num_heads, " ([B, N, 3, H, D] flattened)");
  TORCH_CHECK(is_supported_float(qkv.scalar_type()), op, ": qkv must be float32, float64, bfloat16 or float16, got ",
              qkv.scalar_type());
  AttentionShape s = AttentionShape::of(qkv.size(0), num_heads, qkv.size(1), qkv.size(2) / (3 * num_heads), 0);
  check_index_tensors(op, s, row_ptr, col_idx, "qkv", qkv.sizes());
  return s;
}

CsrIndices prepare_csr(const char* op, const at::Tensor& row_ptr, const at::Tensor& col_idx,
                       const AttentionShape& shape) {
  TORCH_CHECK(row_ptr.device().is_cpu() && col_idx.device().is_cpu(), op,
              ": row_ptr and col_idx must be CPU tensors here, got ", row_ptr.device(), " and ", col_idx.device());
  const at::Tensor rp = row_ptr.contiguous();
  const at::Tensor ci = col_idx.contiguous();
  const IndexReader rpr(rp), cir(ci);
  const int64_t H = shape.layer.num_heads, N = shape.layer.num_tokens, nnz = shape.nnz_stride;
  CsrIndices out;
  out.row_ptr = rp.scalar_type() == at::kInt ? rp : at::empty({H, N + 1}, rp.options().dtype(at::kInt));
  out.col_idx = ci.scalar_type() == at::kInt ? ci : at::empty({H, nnz}, ci.options().dtype(at::kInt));
  int32_t* rp32 = out.row_ptr.data_ptr<int32_t>();
  int32_t* ci32 = out.col_idx.data_ptr<int32_t>();
  std::vector<int64_t> seen(static_cast<size_t>(N), -1);  // row that last used key c, per head
  for (int64_t h = 0; h < H; ++h) {
    const int64_t base = h * (N + 1);
    const int64_t first = rpr[base];
    TORCH_CHECK(first >= 0, op, ": row_ptr[", h, ", 0] = ", first, " is negative");
    for (int64_t j = 0; j < N; ++j) {
      const int64_t a = rpr[base + j], b = rpr[base + j + 1];
      TORCH_CHECK(b >= a, op, ": row_ptr[", h, "] must be non-decreasing, but row_ptr[", h, ", ", j + 1, "] = ", b,
                  " < row_ptr[", h, ", ", j, "] = ", a);
      TORCH_CHECK(b <= nnz, op, ": row_ptr[", h, ", ", j + 1, "] = ", b, " exceeds col_idx.size(1) = ", nnz);
      out.max_row_length = std::max(out.max_row_length, b - a);
      for (int64_t e = a; e < b; ++e) {
        const int64_t c = cir[h * nnz + e];
        TORCH_CHECK(c >= 0 && c < N, op, ": col_idx[", h, ", ", e, "] = ", c, " (row ", j,
                    ") is not a token index in [0, ", N, ")");
        TORCH_CHECK(seen[static_cast<size_t>(c)] != h * N + j, op, ": row ", j, " of head ", h, " lists key ", c,
                    " twice");
        seen[static_cast<size_t>(c)] = h * N + j;
      }
    }
    if (rp.scalar_type() != at::kInt) {
      for (int64_t j = 0; j <= N; ++j) rp32[base + j] = static_cast<int32_t>(rpr[base + j]);
    }
    if (ci.scalar_type() != at::kInt) {
      // Only the entries rows own are read by the kernels; copy the rest too (cheap, defined).
      for (int64_t e = 0; e < nnz; ++e) {
        const int64_t c = cir[h * nnz + e];
        ci32[h * nnz + e] = (c >= 0 && c < N) ? static_cast<int32_t>(c) : 0;
      }
    }
  }
  return out;
}

TransposedCsr transpose_csr(const CsrIndices& csr, const AttentionShape& shape) {
  const int64_t H = shape.layer.num_heads, N = shape.layer.num_tokens, nnz = shape.nnz_stride;
  const auto opts = csr.row_ptr.options().dtype(at::kInt);
  TransposedCsr t;
  t.row_ptr = at::empty({H, N + 1}, opts);
  t.query = at::empty({H, nnz}, opts);
  t.edge = at::empty({H, nnz}, opts);
  const int32_t* rp = csr.row_ptr.data_ptr<int32_t>();
  const int32_t* ci = csr.col_idx.data_ptr<int32_t>();
  int32_t* trp = t.row_ptr.data_ptr<int32_t>();
  int32_t* tq = t.query.data_ptr<int32_t>();
  int32_t* te = t.edge.data_ptr<int32_t>();
  at::parallel_for(0, H, 1, [&](int64_t h0, int64_t h1) {
    std::vector<int32_t> cursor(static_cast<size_t>(N));
    for (int64_t h = h0; h < h1; ++h) {
      const int32_t* hrp = rp + h * (N + 1);
      const int32_t* hci = ci + h * nnz;
      int32_t* htrp = trp + h * (N + 1);
      std::fill(htrp, htrp + N + 1, 0);
      for (int32_t e = hrp[0]; e < hrp[N]; ++e) ++htrp[hci[e] + 1];
      for (int64_t c = 0; c < N; ++c) htrp[c + 1] += htrp[c];
      std::copy(htrp, htrp + N, cursor.begin());
      for (int64_t j = 0; j < N; ++j) {
        for (int32_t e = hrp[j]; e < hrp[j + 1]; ++e) {
          const int32_t pos = cursor[static_cast<size_t>(hci[e])]++;
          tq[h * nnz + pos] = static_cast<int32_t>(j);
          te[h * nnz + pos] = e;
        }
      }
    }
  });
  return t;
}

std::optional<DiagonalPlanTensors> detect_diagonal_structure(const CsrIndices& csr, const AttentionShape& shape) {
  const int64_t H = shape.layer.num_heads, N = shape.layer.num_tokens, nnz = shape.nnz_stride;
  const int32_t* rp_all = csr.row_ptr.data_ptr<int32_t>();
  const int32_t* ci_all = csr.col_idx.data_ptr<int32_t>();
  std::vector<int32_t> delta_ptr{0}, deltas, global_ptr{0}, globals, global_pos;
  std::vector<uint8_t> is_global(static_cast<size_t>(H * N), 0);
  std::vector<int64_t> col_count(static_cast<size_t>(N));
  std::vector<char> has_offset(static_cast<size_t>(N));
  int64_t max_slots = 0;
  for (int64_t h = 0; h < H; ++h) {
    const int32_t* rp = rp_all + h * (N + 1);
    const int32_t* ci = ci_all + h * nnz;
    uint8_t* isg = is_global.data() + h * N;
    std::fill(col_count.begin(), col_count.end(), 0);
    for (int64_t e = rp[0]; e < rp[N]; ++e) ++col_count[static_cast<size_t>(ci[e])];
    std::vector<int32_t> g_h;
    for (int64_t j = 0; j < N; ++j) {
      if (rp[j + 1] - rp[j] == N && col_count[static_cast<size_t>(j)] == N) {
        isg[j] = 1;
        g_h.push_back(static_cast<int32_t>(j));
      }
    }
    std::fill(has_offset.begin(), has_offset.end(), 0);
    for (int64_t j = 0; j < N; ++j) {
      if (isg[j]) continue;
      for (int64_t e = rp[j]; e < rp[j + 1]; ++e) {
        const int64_t k = ci[e];
        if (!isg[k]) has_offset[static_cast<size_t>(std::abs(j - k))] = 1;
      }
    }
    std::vector<int32_t> offsets;
    for (int64_t o = 0; o < N; ++o)
      if (has_offset[static_cast<size_t>(o)]) offsets.push_back(static_cast<int32_t>(o));
    const int64_t n_deltas = 2 * static_cast<int64_t>(offsets.size()) - (!offsets.empty() && offsets[0] == 0 ? 1 : 0);
    if (n_deltas + static_cast<int64_t>(g_h.size()) > cpu::kMaxDiagonalSlots) return std::nullopt;
    // Verify: each non-global row lists exactly the reconstruction's number of keys.
    for (int64_t j = 0; j < N; ++j) {
      if (isg[j]) continue;
      int64_t expected = static_cast<int64_t>(g_h.size());
      for (const int32_t o : offsets) {
        if (j - o >= 0 && !isg[j - o]) ++expected;
        if (o > 0 && j + o < N && !isg[j + o]) ++expected;
      }
      if (rp[j + 1] - rp[j] != expected) return std::nullopt;
    }
    for (auto it = offsets.rbegin(); it != offsets.rend(); ++it)
      if (*it > 0) deltas.push_back(-*it);
    for (const int32_t o : offsets) deltas.push_back(o);
    delta_ptr.push_back(static_cast<int32_t>(deltas.size()));
    for (const int32_t g : g_h) {
      const size_t base = global_pos.size();
      global_pos.resize(base + static_cast<size_t>(N));
      for (int64_t e = rp[g]; e < rp[g + 1]; ++e) global_pos[base + static_cast<size_t>(ci[e])] = static_cast<int32_t>(e);
    }
    globals.insert(globals.end(), g_h.begin(), g_h.end());
    global_ptr.push_back(static_cast<int32_t>(globals.size()));
    max_slots = std::max<int64_t>(max_slots, n_deltas + static_cast<int64_t>(g_h.size()));
  }
  auto to_tensor = [](const auto& v, at::ScalarType t) {
    using E = typename std::decay_t<decltype(v)>::value_type;
    at::Tensor x = at::empty({static_cast<int64_t>(v.size())}, at::TensorOptions().dtype(t));
    if (!v.empty()) std::memcpy(x.data_ptr(), v.data(), v.size() * sizeof(E));
    return x;
  };
  DiagonalPlanTensors plan;
  plan.delta_ptr = to_tensor(delta_ptr, at::kInt);
  plan.deltas = to_tensor(deltas, at::kInt);
  plan.global_ptr = to_tensor(global_ptr, at::kInt);
  plan.globals = to_tensor(globals, at::kInt);
  plan.is_global = to_tensor(is_global, at::kByte);
  plan.global_pos = to_tensor(global_pos, at::kInt);
  plan.max_slots = max_slots;
  return plan;
}

namespace {

// One prepared pair. The tensors' addresses only find the entry; whether it applies is decided
// by comparing the caller's index values with the values that were checked, so a write by any
// path (in place, through data(), through a raw pointer) or an address reused by another tensor
// is prepared again, never read unchecked. The kernels read only the entry's private copies.
struct PreparedEntry {
  const void* row_ptr_impl = nullptr;
  const void* col_idx_impl = nullptr;
  at::Tensor row_ptr_seen, col_idx_seen;  // contiguous copies of the inputs as checked
  std::shared_ptr<const PreparedCsr> prepared;
};

struct PreparedCache {
  std::mutex mutex;
  std::list<std::shared_ptr<const PreparedEntry>> entries;  // most recently used first
  bool enabled = true;
  PreparedCsrCacheStats stats;
};

PreparedCache& prepared_cache() {
  static PreparedCache cache;
  return cache;
}

constexpr size_t kPreparedCapacity = 64;

bool same_values(const at::Tensor& t, const at::Tensor& seen) {
  if (t.scalar_type() != seen.scalar_type() || !t.sizes().equals(seen.sizes())) return false;
  if (seen.nbytes() == 0) return true;
  const at::Tensor c = t.contiguous();
  return std::memcmp(c.data_ptr(), seen.data_ptr(), seen.nbytes()) == 0;
}

at::Tensor private_copy(const at::Tensor& made, const at::Tensor& source) {
  return made.is_alias_of(source) ? made.clone(at::MemoryFormat::Contiguous) : made;
}

std::shared_ptr<const PreparedEntry> prepare(const char* op, const at::Tensor& row_ptr, const at::Tensor& col_idx,
                                             const AttentionShape& shape) {
  auto p = std::make_shared<PreparedCsr>();
  p->csr = prepare_csr(op, row_ptr, col_idx, shape);
  p->csr.row_ptr = private_copy(p->csr.row_ptr, row_ptr);
  p->csr.col_idx = private_copy(p->csr.col_idx, col_idx);
  p->transposed = transpose_csr(p->csr, shape);
  p->diagonal = detect_diagonal_structure(p->csr, shape);
  auto e = std::make_shared<PreparedEntry>();
  e->row_ptr_impl = row_ptr.unsafeGetTensorImpl();
  e->col_idx_impl = col_idx.unsafeGetTensorImpl();
  e->row_ptr_seen = row_ptr.clone(at::MemoryFormat::Contiguous);
  e->col_idx_seen = col_idx.clone(at::MemoryFormat::Contiguous);
  e->prepared = std::move(p);
  return e;
}

}  // namespace

std::shared_ptr<const PreparedCsr> prepared_csr(const char* op, const at::Tensor& row_ptr, const at::Tensor& col_idx,
                                                const AttentionShape& shape) {
  // Not CPU: prepare_csr says so (the comparison below reads the values on the host).
  if (!row_ptr.device().is_cpu() || !col_idx.device().is_cpu()) return prepare(op, row_ptr, col_idx, shape)->prepared;
  PreparedCache& cache = prepared_cache();
  std::shared_ptr<const PreparedEntry> found;
  {
    std::lock_guard<std::mutex> lock(cache.mutex);
    if (cache.enabled) {
      for (auto it = cache.entries.begin(); it != cache.entries.end(); ++it) {
        if ((*it)->row_ptr_impl == row_ptr.unsafeGetTensorImpl() &&
            (*it)->col_idx_impl == col_idx.unsafeGetTensorImpl()) {
          cache.entries.splice(cache.entries.begin(), cache.entries, it);
          found = cache.entries.front();
          break;
        }
      }
    }
  }
  // Compared outside the lock: one pass over the indices, a fraction of what checking them costs.
  if (found && same_values(row_ptr, found->row_ptr_seen) && same_values(col_idx, found->col_idx_seen)) {
    std::lock_guard<std::mutex> lock(cache.mutex);
    ++cache.stats.hits;
    return found->prepared;
  }
  // Checked outside the lock (it can throw, and it is the expensive part).
  std::shared_ptr<const PreparedEntry> e = prepare(op, row_ptr, col_idx, shape);
  std::lock_guard<std::mutex> lock(cache.mutex);
  ++cache.stats.misses;
  if (!cache.enabled) return e->prepared;
  if (found) cache.entries.remove(found);
  cache.entries.push_front(e);
  if (cache.entries.size() > kPreparedCapacity) cache.entries.pop_back();
  return e->prepared;
}

void set_prepared_csr_cache_enabled(bool enabled) {
  PreparedCache& cache = prepared_cache();
  std::lock_guard<std::mutex> lock(cache.mutex);
  cache.enabled = enabled;  // entries stay: switching back on finds them again
}

PreparedCsrCacheStats prepared_csr_cache_stats() {
  PreparedCache& cache = prepared_cache();
  std::lock_guard<std::mutex> lock(cache.mutex);
  return cache.stats;
}

}  // namespace sparsevit::ops
