#include "experiments/sweep_plan.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <optional>

#include "analysis/budget_matching.h"
#include "experiments/sweep_runs.h"
#include "models/model_shapes.h"
#include "models/video_attention_layout.h"
#include "patterns/pattern_equality.h"
#include "util/atomic_file.h"
#include "util/errors.h"

namespace sparsevit::experiments {
namespace {

namespace fs = std::filesystem;

// Why a config cannot run here ("" when it can): pruning configs need their scores file.
std::string skip_reason(const config::AttentionSpec& spec) {
  if (spec.mask != "pruning") return "";
  if (!spec.mask_kwargs.has("scores_file")) return "mask: pruning without scores_file";
  const std::string file = spec.mask_kwargs.values().at("scores_file").items.at(0);
  if (!fs::exists(file)) return "scores_file " + file + " does not exist (run `sparsevit calibrate` first)";
  return "";
}

// Per spec, an earlier spec whose static masks compute exactly the same pairs at this geometry
// (-1 when none). Two masks can coincide at a small N (Fibonacci and local windows at N = 50),
// and the report says so rather than showing one pattern as two results. Dense, dynamic and
// pattern-free configs have no pairs to compare.
std::vector<int> same_pattern_twins(const std::vector<config::AttentionSpec>& specs, const AttentionGeometry& geometry) {
  std::vector<int> twin(specs.size(), -1);
  std::vector<std::optional<std::vector<std::optional<patterns::Pattern>>>> layers(specs.size());
  for (std::size_t i = 0; i < specs.size(); ++i) {
    if (!specs[i].has_mask() || specs[i].has_dynamic_mask()) continue;
    auto built = config::build_layer_patterns(specs[i], geometry);
    if (std::none_of(built.begin(), built.end(), [](const auto& l) { return l.has_value(); })) continue;
    layers[i] = std::move(built);
    for (std::size_t j = 0; j < i && twin[i] < 0; ++j)
      if (layers[j] && patterns::same_pairs(*layers[i], *layers[j])) twin[i] = static_cast<int>(j);
  }
  return twin;
}

}  // namespace

// What the attention config runs on, where budgets are measured: the model's attention for image
// models; for video models the spatial attention at the recipe's frames and attention type (one
// frame's P + 1 tokens, or the whole clip's 1 + P T in joint_space_time), whose pruning ratio is
// the one training reports.
AttentionGeometry budget_geometry(const pipelines::TrainConfig& recipe, const models::ModelShape& shape) {
  if (!shape.is_video()) return shape.attention_geometry();
  const int64_t frames = recipe.num_frames > 0 ? recipe.num_frames : shape.num_frames;
  return models::video_attention_layout(shape.attention_geometry(), frames,
                                        models::parse_video_attention(recipe.attention_type))
      .spatial;
}

bool is_dense_attention(const config::AttentionSpec& spec) {
  return (spec.backend == "vit" || spec.backend == "dense") && !spec.has_mask();
}

SweepPlan plan_sweep(const SweepConfig& c, SweepResult& result) {
  SweepPlan plan;
  std::vector<SweepItem>& items = plan.items;
  // Configs: parsed and checked first, so a typo fails before hours of training.
  std::map<std::string, std::string> stems;
  for (const std::string& path : c.configs) {
    config::AttentionSpec spec = config::load_attention_spec(path);
    config::apply_mask_kwarg_overrides(spec, c.recipe.attn_set);
    const std::string stem = fs::path(path).stem().string();
    if (stems.count(stem)) {
      if (fs::absolute(stems[stem]) == fs::absolute(path)) continue;  // the same file twice
      throw UsageError("sweep: configs " + stems[stem] + " and " + path + " share the name '" + stem +
                       "' (runs are stored by file stem)");
    }
    stems[stem] = path;
    const std::string why = skip_reason(spec);
    if (!why.empty()) {
      spdlog::warn("sweep: skipping {}: {}", path, why);
      result.skipped.push_back(path + ": " + why);
      continue;
    }
    items.push_back({path, stem, spec, path, "", ""});
  }
  // The baseline first (--baseline, else the dense config); otherwise the order given.
  std::string& baseline = plan.baseline;
  baseline = c.baseline;
  if (baseline.empty())
    for (const SweepItem& i : items)
      if (is_dense_attention(i.spec)) {
        baseline = i.stem;
        break;
      }
  if (!c.baseline.empty() &&
      std::none_of(items.begin(), items.end(), [&](const SweepItem& i) { return i.stem == c.baseline; }))
    throw UsageError("sweep: --baseline " + c.baseline + " is not the name (file stem) of one of the --configs");
  std::stable_partition(items.begin(), items.end(), [&](const SweepItem& i) { return i.stem == baseline; });

  fs::create_directories(c.output_dir);
  // Matched budgets: every config's knob set to the reference's pruning ratio at this model.
  if (!c.match_to.empty() && c.match_pruning_ratio >= 0)
    throw UsageError("sweep: give --match_to or --match_pruning_ratio, not both");
  if (c.match_pruning_ratio > 1)
    throw UsageError(fmt::format("sweep: --match_pruning_ratio {} is outside [0, 1]", c.match_pruning_ratio));
  if (!c.match_to.empty() || c.match_pruning_ratio >= 0) {
    result.geometry = budget_geometry(c.recipe, models::find_model_shape(c.recipe.model));
    std::string reference;
    if (!c.match_to.empty()) {
      config::AttentionSpec ref = config::load_attention_spec(c.match_to);
      config::apply_mask_kwarg_overrides(ref, c.recipe.attn_set);
      result.target_pruning_ratio = analysis::budget_pruning_ratio(ref, result.geometry);
      reference = fs::weakly_canonical(c.match_to).string();
    } else {
      result.target_pruning_ratio = c.match_pruning_ratio;
    }
    spdlog::info("sweep: matching budgets to pruning ratio {:.4f} at N = {}, {} layers, {} heads",
                 result.target_pruning_ratio, result.geometry.num_tokens, result.geometry.num_layers,
                 result.geometry.num_heads);
    const fs::path derived = fs::path(c.output_dir) / "configs";
    for (SweepItem& item : items) {
      if (!reference.empty() && fs::weakly_canonical(item.path).string() == reference) continue;
      const analysis::MatchedBudget m = analysis::match_budget(item.spec, result.geometry, result.target_pruning_ratio);
      if (m.knob.empty()) continue;  // dense, file masks: nothing to set
      item.spec = m.spec;
      item.knob = m.value;
      item.path = (derived / (item.stem + ".yaml")).string();
      spdlog::info("sweep: {}: {} -> pruning ratio {:.4f}", item.stem, item.knob, m.pruning_ratio);
    }
  }
  // Every finished run is checked against the config it would now run, before any derived
  // config is (over)written.
  for (const SweepItem& item : items) check_finished_runs(c, item.stem, config::attention_spec_yaml(item.spec));
  if (result.target_pruning_ratio >= 0) {
    fs::create_directories(fs::path(c.output_dir) / "configs");
    for (const SweepItem& item : items)
      if (!item.knob.empty())
        write_file_atomically(item.path, fmt::format("# {} matched to pruning ratio {:.4f} at {} (N = {}): {}\n",
                                                     item.source_path, result.target_pruning_ratio, c.recipe.model,
                                                     result.geometry.num_tokens, item.knob) +
                                             config::attention_spec_yaml(item.spec));
  }

  {
    const models::ModelShape* shape = nullptr;
    try {
      shape = &models::find_model_shape(c.recipe.model);
    } catch (const UsageError&) {  // a model without a registered shape: no budget in the plan
    }
    std::optional<AttentionGeometry> geometry;  // budgets and patterns need one
    if (shape) geometry = budget_geometry(c.recipe, *shape);
    if (geometry) {
      std::vector<config::AttentionSpec> specs;
      for (const SweepItem& item : items) specs.push_back(item.spec);
      const std::vector<int> twin = same_pattern_twins(specs, *geometry);
      for (std::size_t i = 0; i < items.size(); ++i)
        if (twin[i] >= 0) items[i].same_pattern_as = items[twin[i]].stem;
    }
    for (const SweepItem& item : items) {
      int64_t finished = 0;
      for (int64_t seed : c.seeds)
        finished += fs::exists(sweep_run_dir(c, item.stem, seed) / "summary.json");
      const std::string budget =
          geometry ? fmt::format("pruning ratio {:.4f}", analysis::budget_pruning_ratio(item.spec, *geometry))
                   : std::string("pruning ratio n/a");
      result.plan.push_back(fmt::format("{}: {}{}, {}{}, {}/{} runs finished", item.stem, item.path,
                                        item.knob.empty() ? "" : " (" + item.knob + ")", budget,
                                        item.same_pattern_as.empty() ? "" : ", same pairs as " + item.same_pattern_as,
                                        finished, c.seeds.size()));
    }
  }
  return plan;
}

}  // namespace sparsevit::experiments
