#include "analysis/attention_report.h"

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>

#include "config/attention_backends.h"
#include "patterns/mask_registry.h"
#include "patterns/pattern_stats.h"
#include "patterns/topk_mask.h"

namespace sparsevit::analysis {
namespace {

LayerReport report_layer(const patterns::Pattern& p) {
  LayerReport layer;
  for (int32_t h = 0; h < p.num_heads(); ++h) {
    HeadReport head;
    head.edges = p.edges(h);
    head.patch_edges = patterns::patch_edges(p, h);
    if (const auto& d = p.diagonals(h)) head.offsets = d->offsets;
    head.window = p.window(h);
    layer.heads.push_back(std::move(head));
  }
  layer.pruning_ratio = patterns::pruning_ratio(p);
  layer.density = patterns::density(p);
  double overlap = 0;
  int pairs = 0;
  for (int32_t a = 0; a < p.num_heads(); ++a)
    for (int32_t b = a + 1; b < p.num_heads(); ++b, ++pairs) overlap += patterns::head_jaccard(p, a, b);
  layer.mean_head_overlap = pairs ? overlap / pairs : 1.0;
  layer.union_coverage = patterns::union_coverage(p);
  return layer;
}

// Every query attends every key: the dense layer.
LayerReport dense_layer(const AttentionGeometry& s) {
  LayerReport layer;
  const int64_t n = s.num_tokens, patches = s.num_tokens - s.num_prefix_tokens;
  for (int64_t h = 0; h < s.num_heads; ++h) layer.heads.push_back(HeadReport{n * n, patches * patches, std::nullopt, std::nullopt});
  return layer;
}

// Top-k keeps k keys per query but scores every pair to choose them.
LayerReport topk_layer(const AttentionGeometry& s, int64_t k) {
  LayerReport layer;
  const int64_t n = s.num_tokens, patches = s.num_tokens - s.num_prefix_tokens;
  for (int64_t h = 0; h < s.num_heads; ++h) layer.heads.push_back(HeadReport{n * k, patches * std::min(k, patches), std::nullopt, std::nullopt});
  layer.density = static_cast<double>(k) / n;
  layer.pruning_ratio = patches > 0 ? 1.0 - static_cast<double>(std::min(k, patches)) / patches : 0.0;
  layer.mean_head_overlap = layer.union_coverage = std::nan("");
  return layer;
}

// A backend without a pattern: every head costs `pairs` equivalent pairs (`patch_pairs` when the
// class token is left out), reported like a pattern of that many edges.
LayerReport equivalent_layer(const AttentionGeometry& s, double pairs, double patch_pairs) {
  LayerReport layer;
  const double n = s.num_tokens, patches = s.num_tokens - s.num_prefix_tokens;
  for (int64_t h = 0; h < s.num_heads; ++h)
    layer.heads.push_back(HeadReport{std::llround(pairs), std::llround(patch_pairs), std::nullopt, std::nullopt});
  layer.density = pairs / (n * n);
  layer.pruning_ratio = patches > 0 ? std::max(0.0, 1.0 - patch_pairs / (patches * patches)) : 0.0;
  layer.mean_head_overlap = layer.union_coverage = std::nan("");
  return layer;
}

}  // namespace

AttentionReport attention_report(const config::AttentionSpec& spec, const AttentionGeometry& shape) {
  return attention_report(spec, shape,
                          config::build_layer_patterns(spec, shape));
}

AttentionReport attention_report(const config::AttentionSpec& spec, const AttentionGeometry& shape,
                                 const std::vector<std::optional<patterns::Pattern>>& layers) {
  AttentionReport r;
  r.geometry = shape;
  r.backend = spec.backend;
  r.mask = spec.mask;
  r.kernel = config::kernel_name(spec.kernel);
  r.dynamic = spec.has_dynamic_mask();
  const double d = shape.head_dim;
  const double n = shape.num_tokens, patches = shape.num_tokens - shape.num_prefix_tokens;
  double pruning = 0, density = 0, gflops = 0, gflops_patch = 0;
  const std::optional<double> backend_pairs =
      config::backend_pairs_per_head(spec.backend, spec.backend_kwargs, shape);
  // The patch-only number: the same backend on the patch tokens alone.
  std::optional<double> backend_patch_pairs;
  if (backend_pairs)
    backend_patch_pairs = config::backend_pairs_per_head(
        spec.backend, spec.backend_kwargs,
        shape.patches_only());
  r.equivalent_pairs = backend_pairs.has_value();
  for (int64_t l = 0; l < shape.num_layers; ++l) {
    LayerReport layer;
    if (backend_pairs) {
      layer = equivalent_layer(shape, *backend_pairs, *backend_patch_pairs);
      gflops += shape.num_heads * patterns::attention_gflops_for_pairs(*backend_pairs, shape.head_dim);
      gflops_patch += shape.num_heads * patterns::attention_gflops_for_pairs(*backend_patch_pairs, shape.head_dim);
    } else if (l < static_cast<int64_t>(layers.size()) && layers[l]) {
      layer = report_layer(*layers[l]);
      gflops += patterns::attention_gflops(*layers[l], shape.head_dim);
      gflops_patch += patterns::attention_gflops_patch(*layers[l], shape.head_dim);
      for (const auto& w : layers[l]->warnings())
        if (std::find(r.warnings.begin(), r.warnings.end(), w) == r.warnings.end()) r.warnings.push_back(w);
    } else if (r.dynamic) {
      r.keys_per_query = patterns::topk_keys_per_query(patterns::MaskContext{shape, l}, spec.mask_kwargs);
      layer = topk_layer(shape, r.keys_per_query);
      const double k = r.keys_per_query;
      // Q.K^T over every pair (to select), P.V over the k kept: d multiply-adds each.
      gflops += shape.num_heads * (d * n * n + d * n * k) / 1e9;
      gflops_patch += shape.num_heads * (d * patches * patches + d * patches * std::min(k, patches)) / 1e9;
    } else {
      layer = dense_layer(shape);
      gflops += shape.num_heads * patterns::attention_gflops_for_pairs(n * n, shape.head_dim);
      gflops_patch += shape.num_heads * patterns::attention_gflops_for_pairs(patches * patches, shape.head_dim);
    }
    pruning += layer.pruning_ratio;
    density += layer.density;
    r.layers.push_back(std::move(layer));
  }
  r.pruning_ratio = pruning / shape.num_layers;
  r.density = density / shape.num_layers;
  r.attention_gflops = gflops;
  r.attention_gflops_patch = gflops_patch;
  return r;
}

nlohmann::json report_to_json(const AttentionReport& r) {
  nlohmann::json layers = nlohmann::json::array();
  for (const auto& layer : r.layers) {
    nlohmann::json heads = nlohmann::json::array();
    for (const auto& h : layer.heads) {
      heads.push_back({{"edges", h.edges},
                       {"patch_edges", h.patch_edges},
                       {"offsets", h.offsets ? nlohmann::json(*h.offsets) : nlohmann::json(nullptr)},
                       {"window", h.window ? nlohmann::json(*h.window) : nlohmann::json(nullptr)}});
    }
    auto finite_or_null = [](double x) { return std::isnan(x) ? nlohmann::json(nullptr) : nlohmann::json(x); };
    layers.push_back({{"heads", heads},
                      {"pruning_ratio", layer.pruning_ratio},
                      {"density", layer.density},
                      {"mean_head_overlap", finite_or_null(layer.mean_head_overlap)},
                      {"union_coverage", finite_or_null(layer.union_coverage)}});
  }
  nlohmann::json out = {
      {"backend", r.backend},
      {"mask", r.mask.empty() ? nlohmann::json(nullptr) : nlohmann::json(r.mask)},
      {"tokens", r.geometry.num_tokens},
      {"heads", r.geometry.num_heads},
      {"layers", r.geometry.num_layers},
      {"head_dim", r.geometry.head_dim},
      {"pruning_ratio", r.pruning_ratio},
      {"density", r.density},
      {"attention_gflops", r.attention_gflops},
      {"attention_gflops_patch", r.attention_gflops_patch},
      {"layers_detail", layers},
  };
  if (r.dynamic) out["keys_per_query"] = r.keys_per_query;
  if (r.equivalent_pairs) out["equivalent_pairs"] = true;
  return out;
}

}  // namespace sparsevit::analysis
