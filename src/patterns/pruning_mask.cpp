#include "patterns/pruning_mask.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <numeric>

#include "patterns/mask_generators.h"
#include "util/errors.h"
#include "util/npy_file.h"

namespace sparsevit::patterns {

Pattern prune_by_scores(const MaskContext& ctx, const LayerScores& scores, double pruning_ratio,
                        const std::vector<int32_t>& global_tokens) {
  const int32_t n = ctx.num_tokens;
  const int32_t prefix = ctx.num_prefix_tokens;
  if (static_cast<int32_t>(scores.size()) != ctx.num_heads)
    throw UsageError("pruning: scores have " + std::to_string(scores.size()) + " heads, the model " +
                     std::to_string(ctx.num_heads));
  std::vector<char> is_global(n, 0);
  for (int32_t g : global_tokens) is_global.at(g) = 1;
  const double patches = ctx.num_patches();
  const int64_t budget = std::llround((1.0 - pruning_ratio) * patches * patches);

  Pattern pattern(n, ctx.num_heads, prefix);
  std::vector<int64_t> order;
  std::vector<char> keep;
  for (int32_t h = 0; h < ctx.num_heads; ++h) {
    const auto& s = scores[h];
    if (static_cast<int64_t>(s.size()) != static_cast<int64_t>(n) * n)
      throw UsageError("pruning: scores of head " + std::to_string(h) + " are not N x N");
    keep.assign(static_cast<std::size_t>(n) * n, 0);
    int64_t kept_patch = 0;
    auto take = [&](int64_t e) {
      if (keep[e]) return;
      keep[e] = 1;
      kept_patch += (e / n >= prefix && e % n >= prefix);
    };
    // Every row keeps its best key (lowest index on ties) so no query is left without keys.
    for (int32_t j = 0; j < n; ++j) {
      if (is_global[j]) continue;
      int32_t best = 0;
      for (int32_t k = 1; k < n; ++k)
        if (s[static_cast<int64_t>(j) * n + k] > s[static_cast<int64_t>(j) * n + best]) best = k;
      take(static_cast<int64_t>(j) * n + best);
    }
    order.resize(static_cast<std::size_t>(n) * n);
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return s[a] > s[b]; });
    for (int64_t e : order) {
      if (kept_patch >= budget) break;
      const int32_t j = static_cast<int32_t>(e / n), k = static_cast<int32_t>(e % n);
      if (!is_global[j] && !is_global[k]) take(e);
    }
    pattern.set_head(h, [&](int32_t j, std::vector<int32_t>& keys) {
      for (int32_t k = 0; k < n; ++k)
        if (is_global[j] || is_global[k] || keep[static_cast<int64_t>(j) * n + k]) keys.push_back(k);
    });
  }
  return pattern;
}

LayerScores load_layer_scores(const std::string& path, const MaskContext& ctx) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw RuntimeError("pruning: cannot open scores file '" + path + "'");
  const std::vector<int64_t> shape = read_npy_float32_header(in, path, "pruning");
  const int64_t n = ctx.num_tokens, h = ctx.num_heads;
  int64_t layer = 0;
  if (shape.size() == 4 && shape[1] == h && shape[2] == n && shape[3] == n) {
    if (shape[0] != ctx.num_layers)
      throw RuntimeError("pruning: '" + path + "' has " + std::to_string(shape[0]) + " layers, the model " +
                         std::to_string(ctx.num_layers));
    layer = ctx.layer;
  } else if (!(shape.size() == 3 && shape[0] == h && shape[1] == n && shape[2] == n)) {
    throw RuntimeError("pruning: '" + path + "' must be shaped [L, H, N, N] or [H, N, N] with H=" +
                       std::to_string(h) + ", N=" + std::to_string(n));
  }
  in.seekg(static_cast<std::streamoff>(layer * h * n * n * 4), std::ios::cur);
  LayerScores scores(h, std::vector<float>(static_cast<std::size_t>(n * n)));
  for (auto& head : scores) {
    in.read(reinterpret_cast<char*>(head.data()), static_cast<std::streamsize>(head.size() * 4));
    if (!in) throw RuntimeError("pruning: '" + path + "' is truncated");
    for (float v : head)
      if (!std::isfinite(v)) throw RuntimeError("pruning: '" + path + "' contains NaN or infinite scores");
  }
  return scores;
}

namespace {

constexpr DoubleKwarg kPruningRatio{"pruning_ratio", 0.98, "share of patch pairs to drop"};

Pattern build_pruning(const MaskContext& ctx, const MaskKwargs& kw) {
  const double target = kPruningRatio.read(kw, 0.0, 1.0);
  if (!kw.has("scores_file"))
    throw UsageError("mask 'pruning' needs mask_kwargs.scores_file: a float32 .npy attention map [L, H, N, N] "
                     "averaged over a calibration set");
  const std::string path = kw.values().at("scores_file").items.at(0);
  return prune_by_scores(ctx, load_layer_scores(path, ctx), target, class_token_globals(ctx, kw));
}

}  // namespace

MaskGenerator pruning_generator() {
  return MaskGenerator{
      "pruning",
      "static pruning: keep the highest-mass edges of a calibrated attention map per head, >= 1 key per row",
      {
          kPruningRatio.doc_entry(),
          {"scores_file", "", "float32 .npy attention mass [L, H, N, N] (or [H, N, N] for every layer)"},
          class_token_kwarg_doc(),
      },
      false,
      build_pruning,
  };
}

}  // namespace sparsevit::patterns
