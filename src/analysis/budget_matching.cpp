#include "analysis/budget_matching.h"

#include <cmath>
#include <optional>
#include <vector>

#include <fmt/format.h>

#include "analysis/attention_report.h"
#include "config/attention_backends.h"
#include "patterns/mask_registry.h"
#include "util/errors.h"

namespace sparsevit::analysis {
namespace {

using Assignment = std::vector<std::pair<std::string, std::string>>;  // kwarg -> value

// A mask kwarg's default as its generator declares it (the registry is its one source).
int64_t registered_default(const std::string& mask, const std::string& kwarg) {
  for (const patterns::KwargDoc& k : patterns::find_mask(mask).kwargs)
    if (k.name == kwarg) return std::stoll(k.default_value);
  throw RuntimeError("mask '" + mask + "' declares no kwarg '" + kwarg + "'");
}

// The knob's candidate settings at this geometry as runs along which the budget grows (the
// pruning ratio does not increase): Sparse Transformer has one run of local widths per stride,
// every other knob one run.
std::vector<std::vector<Assignment>> candidates(const config::AttentionSpec& spec, const std::string& knob,
                                                const AttentionGeometry& g) {
  std::vector<std::vector<Assignment>> runs(1);
  auto range = [&](int64_t lo, int64_t hi) {
    for (int64_t v = lo; v <= hi; ++v) runs[0].push_back({{knob, std::to_string(v)}});
  };
  const int64_t n = g.num_tokens;
  if (knob == "w_max") {  // w_min kept, or lowered with w_max below it
    const int64_t w_min = spec.mask_kwargs.get_int("w_min", registered_default(spec.mask, "w_min"), 0);
    for (int64_t w = 1; w < n; ++w)
      runs[0].push_back({{"w_max", std::to_string(w)}, {"w_min", std::to_string(std::min(w_min, w))}});
  } else if (knob == "stride") {  // Sparse Transformer: the local width untied from the stride
    runs.clear();
    for (int64_t stride = 1; stride <= n; ++stride) {
      runs.emplace_back();
      for (int64_t local = 1; local <= stride; ++local)
        runs.back().push_back({{"stride", std::to_string(stride)}, {"local", std::to_string(local)}});
    }
  } else if (knob == "window") {
    range(0, n - 1);
  } else if (knob == "keys_per_query" || knob == "k" || knob == "k_end") {
    range(1, spec.backend == "linformer" ? n : g.num_patches());
  } else if (knob == "random_per_query") {
    range(0, g.num_patches());
  } else if (knob == "num_features") {
    range(1, 2 * n);
  } else if (knob == "landmarks") {
    for (int64_t s = 1; s * s <= g.num_patches(); ++s) runs[0].push_back({{knob, std::to_string(s * s)}});
  } else if (knob == "chunk") {
    range(1, n);
  } else if (knob == "key_dim") {
    range(1, g.head_dim);
  }
  return runs;
}

}  // namespace

double budget_pruning_ratio(const config::AttentionSpec& spec, const AttentionGeometry& geometry) {
  return attention_report(spec, geometry).pruning_ratio;
}

std::string budget_knob(const config::AttentionSpec& spec) {
  if (spec.has_mask()) {
    const std::string& m = spec.mask;
    if (m == "fibo") return "w_max";
    if (m == "local" || m == "longformer") return "window";
    if (m == "random") return "keys_per_query";
    if (m == "bigbird") return "random_per_query";
    if (m == "sparse_transformer") return "stride";
    if (m == "topk") return spec.mask_kwargs.has("k_start") || spec.mask_kwargs.has("k_end") ? "k_end" : "k";
    if (m == "pruning") return "pruning_ratio";
    return "";
  }
  const std::string& b = spec.backend;
  if (b == "linformer") return "k";
  if (b == "performer") return "num_features";
  if (b == "imhsa") return "landmarks";
  if (b == "reformer") return "chunk";
  if (b == "efficient") return "key_dim";
  return "";
}

MatchedBudget match_budget(const config::AttentionSpec& spec, const AttentionGeometry& geometry, double target) {
  if (!(target >= 0.0 && target <= 1.0))
    throw UsageError(fmt::format("budget matching: target pruning ratio {} is outside [0, 1]", target));
  MatchedBudget best{spec, budget_knob(spec), "", 0.0, target};
  if (best.knob.empty()) {
    best.pruning_ratio = budget_pruning_ratio(spec, geometry);
    return best;
  }
  config::AttentionSpec base = spec;
  patterns::MaskKwargs& kwargs = spec.has_mask() ? base.mask_kwargs : base.backend_kwargs;
  // What would override the knob.
  if (best.knob != "pruning_ratio") kwargs.erase("pruning_ratio");
  if (base.mask == "random") kwargs.erase("density");
  if (base.mask == "local") kwargs.erase("head_windows").erase("layer_windows");
  if (best.knob == "pruning_ratio") {  // continuous and exact: the target itself
    kwargs.set_scalar(best.knob, fmt::format("{}", target));
    best.spec = base;
    best.value = fmt::format("pruning_ratio={}", target);
    best.pruning_ratio = target;
    return best;
  }
  double best_gap = INFINITY;
  auto consider = [&](const Assignment& setting) -> std::optional<double> {
    config::AttentionSpec trial = base;
    std::string value;
    for (const auto& [name, text] : setting) {
      (trial.has_mask() ? trial.mask_kwargs : trial.backend_kwargs).set_scalar(name, text);
      value += (value.empty() ? "" : " ") + name + "=" + text;
    }
    double ratio = 0;
    try {
      ratio = budget_pruning_ratio(trial, geometry);
    } catch (const UsageError&) {
      return std::nullopt;  // a value the mechanism refuses at this geometry
    }
    const double gap = std::abs(ratio - target);
    if (gap < best_gap - 1e-12 || (std::abs(gap - best_gap) <= 1e-12 && ratio > best.pruning_ratio)) {
      best_gap = gap;
      best.spec = trial;
      best.value = value;
      best.pruning_ratio = ratio;
    }
    return ratio;
  };
  // Backends without a pattern cost a formula: every setting is tried. Patterns are built per
  // setting, so along a run (budget growing) a bisection finds the two settings around the
  // target; a refused setting falls back to trying the whole run.
  const bool formula = !spec.has_mask() || spec.has_dynamic_mask();
  for (const std::vector<Assignment>& run : candidates(base, best.knob, geometry)) {
    if (formula || run.size() < 8) {
      for (const Assignment& setting : run) consider(setting);
      continue;
    }
    std::size_t lo = 0, hi = run.size();  // first index whose pruning ratio <= target
    bool refused = false;
    while (lo < hi && !refused) {
      const std::size_t mid = (lo + hi) / 2;
      const std::optional<double> ratio = consider(run[mid]);
      if (!ratio) refused = true;
      else if (*ratio <= target) hi = mid;
      else lo = mid + 1;
    }
    if (refused) {
      for (const Assignment& setting : run) consider(setting);
      continue;
    }
    for (std::size_t i : {lo > 0 ? lo - 1 : lo, lo})
      if (i < run.size()) consider(run[i]);
  }
  if (best.value.empty())
    throw UsageError("budget matching: no value of " + best.knob + " is valid for " + spec.source);
  return best;
}

}  // namespace sparsevit::analysis
