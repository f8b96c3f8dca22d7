// The Fibottention patterns the benchmarks run (bench/performance.sh, bench/peers_bench.py:
// configs/attention/vit_fibottention.yaml's kwargs with w_max = N / 3, layer 0, a class token),
// built by the project's generator (src/patterns), and their CSR and diagonal plan as the op
// prepares them for the kernels (ops::DiagonalPlanTensors): per head the signed deltas ascending,
// the global tokens, is_global, and each global row's CSR position of every key. No LibTorch.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "ops/cuda/cuda_kernel_params.h"
#include "patterns/mask_registry.h"

namespace sparsevit::ops::cuda::testing {

// The config's own kwargs (checked against the file), w_max = N / 3 as the benchmarks set it.
inline patterns::Pattern benchmark_fibottention(int64_t tokens, int64_t heads, int64_t head_dim) {
  std::ifstream in(std::string(SPARSEVIT_SOURCE_DIR) + "/configs/attention/vit_fibottention.yaml");
  std::stringstream text;
  text << in.rdbuf();
  for (const char* line : {"mask: fibo", "w_min: 5", "schedule: wythoff"})
    EXPECT_NE(text.str().find(line), std::string::npos) << "vit_fibottention.yaml no longer says " << line;
  patterns::MaskKwargs kw;
  kw.set_scalar("w_min", "5").set_scalar("schedule", "wythoff").set_scalar("w_max", std::to_string(tokens / 3));
  return patterns::build_mask("fibo", patterns::MaskContext{{tokens, 1, heads, head_dim, 12}, 0}, kw);
}

struct DiagonalPlanArrays {
  int64_t heads = 0, tokens = 0, nnz_stride = 0, max_globals = 0;
  std::vector<int32_t> row_ptr, col_idx, delta_ptr, deltas, global_ptr, globals, global_pos;
  std::vector<uint8_t> is_global;

  explicit DiagonalPlanArrays(const patterns::Pattern& p) : heads(p.num_heads()), tokens(p.num_tokens()) {
    row_ptr = p.flat_row_ptr();
    col_idx = p.padded_col_idx();
    nnz_stride = p.max_edges();
    delta_ptr.push_back(0);
    global_ptr.push_back(0);
    is_global.assign(heads * tokens, 0);
    for (int32_t h = 0; h < heads; ++h) {
      const patterns::DiagonalStructure& d = p.diagonals(h).value();
      std::vector<int32_t> signed_deltas;
      for (int32_t o : d.offsets) {
        signed_deltas.push_back(o);
        if (o != 0) signed_deltas.push_back(-o);
      }
      std::sort(signed_deltas.begin(), signed_deltas.end());
      deltas.insert(deltas.end(), signed_deltas.begin(), signed_deltas.end());
      globals.insert(globals.end(), d.global_tokens.begin(), d.global_tokens.end());
      delta_ptr.push_back(static_cast<int32_t>(deltas.size()));
      global_ptr.push_back(static_cast<int32_t>(globals.size()));
      for (int32_t g : d.global_tokens) is_global[h * tokens + g] = 1;
      max_globals = std::max<int64_t>(max_globals, d.global_tokens.size());
    }
    // A global row lists every key, sorted: key k sits at row_ptr + k.
    global_pos.assign(globals.size() * tokens, 0);
    for (int32_t h = 0; h < heads; ++h)
      for (int32_t i = global_ptr[h]; i < global_ptr[h + 1]; ++i)
        for (int64_t k = 0; k < tokens; ++k)
          global_pos[i * tokens + k] = row_ptr[h * (tokens + 1) + globals[i]] + static_cast<int32_t>(k);
  }

  template <typename T>
  void fill(PatternArgs<T>& a) const {
    a.row_ptr = row_ptr.data();
    a.col_idx = col_idx.data();
    a.heads = heads;
    a.tokens = tokens;
    a.nnz_stride = nnz_stride;
    a.diag.delta_ptr = delta_ptr.data();
    a.diag.deltas = deltas.data();
    a.diag.global_ptr = global_ptr.data();
    a.diag.globals = globals.data();
    a.diag.is_global = is_global.data();
    a.diag.global_pos = global_pos.data();
  }
  // Per head: the unsigned offsets and the global tokens (for the tests' Pattern).
  std::vector<std::vector<int32_t>> offsets() const {
    std::vector<std::vector<int32_t>> out(heads);
    for (int64_t h = 0; h < heads; ++h)
      for (int32_t i = delta_ptr[h]; i < delta_ptr[h + 1]; ++i)
        if (deltas[i] >= 0) out[h].push_back(deltas[i]);
    return out;
  }
  std::vector<std::vector<int32_t>> global_tokens() const {
    std::vector<std::vector<int32_t>> out(heads);
    for (int64_t h = 0; h < heads; ++h) out[h].assign(globals.begin() + global_ptr[h], globals.begin() + global_ptr[h + 1]);
    return out;
  }
};

}  // namespace sparsevit::ops::cuda::testing
