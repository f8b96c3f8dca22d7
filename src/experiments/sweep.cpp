#include "experiments/sweep.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <set>
#include <sstream>

#include "analysis/budget_matching.h"
#include "analysis/raster_plot.h"
#include "config/attention_spec.h"
#include "experiments/head_diversity.h"
#include "models/model_shapes.h"
#include "patterns/pattern_equality.h"
#include "runtime/cpu_threads.h"
#include "runtime/host_info.h"
#include "util/atomic_file.h"
#include "util/errors.h"

namespace sparsevit::experiments {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

json read_json(const fs::path& path) {
  std::ifstream in(path);
  try {
    return json::parse(in);
  } catch (const json::exception& e) {
    throw RuntimeError(path.string() + ": " + e.what());
  }
}

// metrics.jsonl -> one record per epoch (the last line wins: a run interrupted between the
// metrics line and its checkpoint repeats that epoch on resume).
std::map<int64_t, json> read_metrics(const fs::path& path) {
  std::map<int64_t, json> epochs;
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    const json record = json::parse(line, nullptr, false);
    if (record.is_discarded() || !record.contains("epoch")) continue;
    epochs[record["epoch"].get<int64_t>()] = record;
  }
  return epochs;
}

// The recipe as it decides results: finetune's fields of the recipe group (those the sweep takes;
// the run group is set per run or left at its default), less the ones that only change speed or
// progress output. The field list itself has no mark for those, so they are named here.
json recipe_json(const pipelines::TrainConfig& recipe) {
  const std::set<std::string> speed_only = {"threads", "num_workers", "print_freq"};
  json j = json::object();
  pipelines::for_each_field(recipe, [&](const auto& value, const pipelines::FieldInfo& f) {
    if ((f.commands & pipelines::kFinetune) && f.group == pipelines::FieldGroup::recipe && !speed_only.count(f.name))
      j[f.name] = value;
  });
  return j;
}

// Trains one (config, seed) run unless its summary.json exists; returns that summary.
// `attention_yaml`: the config as run, recorded so that a changed config (or matched budget)
// cannot reuse a finished run of the old one (check_finished_runs).
json run_one(const SweepConfig& c, const std::string& config_path, const std::string& attention_yaml, int64_t seed,
             const fs::path& dir, bool& trained) {
  const fs::path summary_path = dir / "summary.json";
  const json recipe = recipe_json(c.recipe);
  if (fs::exists(summary_path)) {
    trained = false;
    json summary = read_json(summary_path);
    // A finished run of another recipe must not slip into this report.
    if (summary.contains("recipe") && summary["recipe"] != recipe) {
      // A key the finished run did not record (a field added since) counts as its default.
      const json defaults = recipe_json(pipelines::TrainConfig{});
      std::string differs;
      for (const auto& [key, value] : recipe.items()) {
        const json& had = summary["recipe"].contains(key) ? summary["recipe"][key] : defaults.value(key, json());
        if (had != value) differs += (differs.empty() ? "" : ", ") + key;
      }
      if (!differs.empty()) throw UsageError(dir.string() + " holds a run of another recipe (" + differs +
                       " differ): use another --output_dir or remove it");
    }
    return summary;
  }
  trained = true;
  fs::create_directories(dir);
  pipelines::TrainConfig t = c.recipe;
  t.attn_cfg = config_path;
  t.seed = seed;
  t.output_dir = dir.string();
  t.log_dir.clear();
  t.resume.clear();
  t.eval = false;
  const fs::path checkpoint = dir / "checkpoint.pt";
  if (fs::exists(checkpoint)) {
    t.resume = checkpoint.string();
    spdlog::info("sweep: resuming {} seed {} from {}", config_path, seed, t.resume);
  } else {
    // A fresh start: drop metrics of an attempt that never reached its first checkpoint.
    fs::remove(dir / "metrics.jsonl");
  }
  const auto t0 = std::chrono::steady_clock::now();
  const pipelines::TrainSummary s = pipelines::run_finetune(t);
  json summary = s.to_json();
  summary["config"] = config_path;
  summary["seed"] = seed;
  summary["recipe"] = recipe;
  summary["attention_yaml"] = attention_yaml;

  const std::map<int64_t, json> epochs = read_metrics(dir / "metrics.jsonl");
  json curve = json::array();
  double ips = 0, seconds = 0;
  for (const auto& [epoch, r] : epochs) {
    curve.push_back(r.value("test_acc1", 0.0));
    ips += r.value("train_images_per_second", 0.0);
    seconds += r.value("epoch_seconds", 0.0);
  }
  summary["curve_test_acc1"] = curve;
  summary["train_images_per_second"] = epochs.empty() ? 0.0 : ips / static_cast<double>(epochs.size());
  summary["train_seconds"] = seconds;
  summary["epochs"] = static_cast<int64_t>(epochs.size());

  if (c.diversity_limit >= 0) {
    DiversityConfig d;
    d.resume = checkpoint.string();
    d.dataset = t.dataset;
    d.data_path = t.data_path;
    d.split = "test";
    d.limit = c.diversity_limit;
    if (t.max_eval_samples > 0) d.limit = d.limit > 0 ? std::min(d.limit, t.max_eval_samples) : t.max_eval_samples;
    d.batch_size = t.batch_size;
    d.num_workers = t.num_workers;
    d.threads = t.threads;
    d.progress = false;
    try {
      const DiversitySummary ds = run_diversity(d);
      summary["diversity"] = ds.stats.to_json();
      summary["diversity_samples"] = ds.samples;
    } catch (const UsageError& e) {  // a backend without per-head outputs
      spdlog::warn("sweep: no head diversity for {}: {}", config_path, e.what());
      summary["diversity"] = nullptr;
      summary["diversity_note"] = e.what();
    }
  }
  summary["wall_seconds"] = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  // Where the run finished: the same recipe repeats to the last digit only on the same CPU model
  // at the same thread count, and the thread count is not part of the recipe.
  const runtime::HostInfo host = runtime::describe_host();
  summary["finished_on"] = {{"cpu", host.cpu},
                            {"cores", host.cores},
                            {"threads", runtime::resolve_cpu_threads(t.threads)},
                            {"utc", runtime::utc_now()}};
  write_file_atomically(summary_path.string(), summary.dump(2) + "\n");  // marks the run finished
  return summary;
}

// Where the run of one config and seed lives: <output_dir>/<config stem>/seed<k>.
fs::path run_dir(const SweepConfig& c, const std::string& stem, int64_t seed) {
  return fs::path(c.output_dir) / stem / ("seed" + std::to_string(seed));
}

// Refuses before anything is written when a finished run of `stem` ran another attention config
// (an edited config file, or another matched budget).
void check_finished_runs(const SweepConfig& c, const std::string& stem, const std::string& attention_yaml) {
  for (int64_t seed : c.seeds) {
    const fs::path summary = run_dir(c, stem, seed) / "summary.json";
    if (!fs::exists(summary)) continue;
    const json s = read_json(summary);
    if (s.contains("attention_yaml") && s["attention_yaml"] != attention_yaml)
      throw UsageError(summary.parent_path().string() + " holds a run of another attention config (budget) than " +
                       "this sweep derives for " + stem + ": use another --output_dir or remove it");
  }
}

// Every run of one report must have seen the same images. The recipe records --max_*_samples, not
// what the data path held, so a run on a truncated copy of a dataset would otherwise pass as one of
// the full set. `value` and `first` hold the first run's count and directory (0: none recorded yet;
// runs from before the count was recorded are not checked).
void check_same_data(const json& summary, const char* key, const fs::path& dir, int64_t& value, fs::path& first) {
  if (!summary.contains(key)) return;
  const int64_t n = summary[key].get<int64_t>();
  if (value == 0) {
    value = n;
    first = dir;
  } else if (n != value) {
    throw UsageError(fmt::format("{} ran on {} {} but {} on {}: runs of one report must see the same data "
                                 "(use another --output_dir or remove one)",
                                 dir.string(), n, key, first.string(), value));
  }
}

// Why a config cannot run here ("" when it can): pruning configs need their scores file.
std::string skip_reason(const config::AttentionSpec& spec) {
  if (spec.mask != "pruning") return "";
  if (!spec.mask_kwargs.has("scores_file")) return "mask: pruning without scores_file";
  const std::string file = spec.mask_kwargs.values().at("scores_file").items.at(0);
  if (!fs::exists(file)) return "scores_file " + file + " does not exist (run `sparsevit calibrate` first)";
  return "";
}

std::string pm(double mean, double std) { return fmt::format("{:.2f} ± {:.2f}", mean, std); }

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

std::vector<int64_t> parse_seed_list(const std::string& text) {
  std::vector<int64_t> seeds;
  std::stringstream in(text);
  std::string item;
  while (std::getline(in, item, ',')) {
    try {
      std::size_t used = 0;
      const long long v = std::stoll(item, &used);
      if (used != item.size() || v < 0) throw std::invalid_argument(item);
      if (std::find(seeds.begin(), seeds.end(), v) == seeds.end()) seeds.push_back(v);
    } catch (const std::exception&) {
      throw UsageError("--seeds: '" + item + "' is not a non-negative integer (expected e.g. 0,1,2)");
    }
  }
  if (seeds.empty()) throw UsageError("--seeds: no seeds given (expected e.g. 0,1,2)");
  return seeds;
}

SweepResult run_sweep(const SweepConfig& c) {
  if (c.configs.empty()) throw UsageError("sweep needs --configs FILE...");
  if (c.seeds.empty()) throw UsageError("sweep needs --seeds");
  if (c.output_dir.empty()) throw UsageError("sweep needs --output_dir");
  pipelines::resolve(c.recipe);  // the recipe's usage errors before any run

  // Configs: parsed and checked first, so a typo fails before hours of training.
  struct Item {
    std::string path, stem;
    config::AttentionSpec spec;
    std::string source_path, knob;  // the config given; path is the derived one when matched
    std::string same_pattern_as;    // an earlier item's stem when both compute exactly the same pairs
  };
  std::vector<Item> items;
  SweepResult result;
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
  auto is_dense = [](const config::AttentionSpec& spec) {
    return (spec.backend == "vit" || spec.backend == "dense") && !spec.has_mask();
  };
  std::string baseline = c.baseline;
  if (baseline.empty())
    for (const Item& i : items)
      if (is_dense(i.spec)) {
        baseline = i.stem;
        break;
      }
  if (!c.baseline.empty() &&
      std::none_of(items.begin(), items.end(), [&](const Item& i) { return i.stem == c.baseline; }))
    throw UsageError("sweep: --baseline " + c.baseline + " is not the name (file stem) of one of the --configs");
  std::stable_partition(items.begin(), items.end(), [&](const Item& i) { return i.stem == baseline; });

  fs::create_directories(c.output_dir);
  // Matched budgets: every config's knob set to the reference's pruning ratio at this model.
  if (!c.match_to.empty() && c.match_pruning_ratio >= 0)
    throw UsageError("sweep: give --match_to or --match_pruning_ratio, not both");
  if (c.match_pruning_ratio > 1)
    throw UsageError(fmt::format("sweep: --match_pruning_ratio {} is outside [0, 1]", c.match_pruning_ratio));
  if (!c.match_to.empty() || c.match_pruning_ratio >= 0) {
    const models::ModelShape& shape = models::find_model_shape(c.recipe.model);
    if (shape.is_video()) throw UsageError("sweep: budget matching needs an image model, got " + c.recipe.model);
    result.geometry = shape.attention_geometry();
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
    for (Item& item : items) {
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
  for (const Item& item : items) check_finished_runs(c, item.stem, config::attention_spec_yaml(item.spec));
  if (result.target_pruning_ratio >= 0) {
    fs::create_directories(fs::path(c.output_dir) / "configs");
    for (const Item& item : items)
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
    std::optional<AttentionGeometry> geometry;  // image models only: budgets and patterns need one
    if (shape && !shape->is_video()) geometry = shape->attention_geometry();
    if (geometry) {
      std::vector<config::AttentionSpec> specs;
      for (const Item& item : items) specs.push_back(item.spec);
      const std::vector<int> twin = same_pattern_twins(specs, *geometry);
      for (std::size_t i = 0; i < items.size(); ++i)
        if (twin[i] >= 0) items[i].same_pattern_as = items[twin[i]].stem;
    }
    for (const Item& item : items) {
      int64_t finished = 0;
      for (int64_t seed : c.seeds)
        finished += fs::exists(run_dir(c, item.stem, seed) / "summary.json");
      const std::string budget =
          geometry ? fmt::format("pruning ratio {:.4f}", analysis::budget_pruning_ratio(item.spec, *geometry))
                   : std::string("pruning ratio n/a");
      result.plan.push_back(fmt::format("{}: {}{}, {}{}, {}/{} runs finished", item.stem, item.path,
                                        item.knob.empty() ? "" : " (" + item.knob + ")", budget,
                                        item.same_pattern_as.empty() ? "" : ", same pairs as " + item.same_pattern_as,
                                        finished, c.seeds.size()));
    }
  }
  if (c.plan_only) return result;

  const std::size_t total = items.size() * c.seeds.size();
  std::size_t done = 0;
  fs::path first_train_run, first_eval_run;
  for (const Item& item : items) {
    SweepRow row;
    row.name = item.stem;
    row.config = item.path;
    row.source_config = item.source_path;
    row.budget_knob = item.knob;
    row.same_pattern_as = item.same_pattern_as;
    row.mechanism = item.spec.backend + (item.spec.has_mask() ? " / " + item.spec.mask : "");
    row.dense = is_dense(item.spec);
    row.baseline = item.stem == baseline;
    double ips = 0, div_median = 0, div_iqr = 0;
    int64_t div_runs = 0;
    std::vector<std::vector<double>> curves;
    const std::string attention_yaml = config::attention_spec_yaml(item.spec);
    for (int64_t seed : c.seeds) {
      ++done;
      spdlog::info("sweep: run {}/{}: {} seed {}", done, total, item.stem, seed);
      bool trained = false;
      const fs::path dir = run_dir(c, item.stem, seed);
      const json s = run_one(c, item.path, attention_yaml, seed, dir, trained);
      (trained ? result.runs_trained : result.runs_reused)++;
      check_same_data(s, "train_samples", dir, result.train_samples, first_train_run);
      check_same_data(s, "eval_samples", dir, result.eval_samples, first_eval_run);
      row.seeds.push_back(seed);
      row.acc1.push_back(s.at("test_acc1").get<double>());
      row.attention_gflops = s.at("attention_gflops").get<double>();
      row.attention_gflops_patch = s.at("attention_gflops_patch").get<double>();
      row.attention_gflops_paid = s.value("attention_gflops_paid", row.attention_gflops);
      row.pruning_ratio = s.at("pruning_ratio").get<double>();
      row.density = s.at("density").get<double>();
      row.params = s.at("params").get<int64_t>();
      ips += s.value("train_images_per_second", 0.0);
      row.seconds += s.value("wall_seconds", 0.0);
      if (s.contains("diversity") && s["diversity"].is_object()) {
        div_median += s["diversity"]["median"].get<double>();
        div_iqr += s["diversity"]["q3"].get<double>() - s["diversity"]["q1"].get<double>();
        ++div_runs;
      }
      curves.push_back(s.value("curve_test_acc1", std::vector<double>{}));
    }
    row.acc1_stats = analysis::summarize_seeds(row.acc1, c.confidence);
    if (!result.rows.empty() && result.rows.front().baseline && result.rows.front().seeds == row.seeds)
      row.paired = analysis::paired_difference(row.acc1, result.rows.front().acc1, c.confidence);
    row.images_per_second = ips / static_cast<double>(row.acc1.size());
    row.has_diversity = div_runs > 0;
    if (div_runs > 0) {
      row.diversity_median = div_median / static_cast<double>(div_runs);
      row.diversity_iqr = div_iqr / static_cast<double>(div_runs);
    }
    row.seed_curves = curves;
    std::size_t epochs = 0;
    for (const auto& cv : curves) epochs = std::max(epochs, cv.size());
    for (std::size_t e = 0; e < epochs; ++e) {
      std::vector<double> at;
      for (const auto& cv : curves)
        if (e < cv.size()) at.push_back(cv[e]);
      const analysis::SeedSummary point = analysis::summarize_seeds(at, c.confidence);
      row.curve.push_back(point.mean);
      row.curve_low.push_back(point.ci_low);
      row.curve_high.push_back(point.ci_high);
    }
    result.rows.push_back(std::move(row));
  }

  // Plots.
  const fs::path out(c.output_dir);
  std::vector<analysis::PlotSeries> points, curves;
  for (std::size_t i = 0; i < result.rows.size(); ++i) {
    const SweepRow& r = result.rows[i];
    analysis::PlotSeries p{r.name, analysis::palette_color(i), {r.attention_gflops}, {r.acc1_stats.mean}, false, true,
                           {r.acc1_stats.ci_low}, {r.acc1_stats.ci_high}};
    points.push_back(p);
    analysis::PlotSeries cv{r.name, analysis::palette_color(i), {}, r.curve, true, true, r.curve_low, r.curve_high};
    for (std::size_t e = 0; e < r.curve.size(); ++e) cv.x.push_back(static_cast<double>(e + 1));
    curves.push_back(cv);
  }
  if (!result.rows.empty()) {
    analysis::PlotOptions po;
    po.title = "Top-1 vs attention GFLOPs";
    po.x_label = "attention GFLOPs (log scale)";
    po.y_label = fmt::format("top-1 (%), mean over seeds and {:.0f}% interval", 100 * c.confidence);
    po.log_x = true;
    analysis::render_plot(points, po).write_png((out / (c.report_name + "_accuracy_vs_gflops.png")).string());
    analysis::PlotOptions co;
    co.title = "Test top-1 per epoch";
    co.x_label = "epoch";
    co.y_label = fmt::format("test top-1 (%), mean over seeds, band: {:.0f}% interval", 100 * c.confidence);
    analysis::render_plot(curves, co).write_png((out / (c.report_name + "_training_curves.png")).string());
    result.files.push_back((out / (c.report_name + "_accuracy_vs_gflops.png")).string());
    result.files.push_back((out / (c.report_name + "_training_curves.png")).string());
  }
  write_file_atomically((out / (c.report_name + ".json")).string(), sweep_report_json(c, result).dump(2) + "\n");
  write_file_atomically((out / (c.report_name + ".md")).string(), sweep_report_markdown(c, result));
  result.files.insert(result.files.begin(), {(out / (c.report_name + ".md")).string(), (out / (c.report_name + ".json")).string()});
  return result;
}

json sweep_report_json(const SweepConfig& c, const SweepResult& result) {
  json rows = json::array();
  for (const SweepRow& r : result.rows) {
    json row = {{"method", r.name},
                {"config", r.config},
                {"source_config", r.source_config},
                {"budget_knob", r.budget_knob},
                {"mechanism", r.mechanism},
                {"dense", r.dense},
                {"baseline", r.baseline},
                {"seeds", r.seeds},
                {"test_acc1", r.acc1},
                {"test_acc1_mean", r.acc1_stats.mean},
                {"test_acc1_std", r.acc1_stats.std},
                {"test_acc1_ci", {r.acc1_stats.ci_low, r.acc1_stats.ci_high}},
                {"attention_gflops", r.attention_gflops},
                {"attention_gflops_patch", r.attention_gflops_patch},
                {"attention_gflops_paid", r.attention_gflops_paid},
                {"pruning_ratio", r.pruning_ratio},
                {"density", r.density},
                {"params", r.params},
                {"train_images_per_second", r.images_per_second},
                {"run_seconds", r.seconds},
                {"curve_test_acc1", r.curve},
                {"curves_test_acc1_per_seed", r.seed_curves},
                {"curve_test_acc1_ci_low", r.curve_low},
                {"curve_test_acc1_ci_high", r.curve_high}};
    row["paired_difference_to_baseline"] =
        r.paired ? json{{"mean", r.paired->mean}, {"ci", {r.paired->ci_low, r.paired->ci_high}}} : json(nullptr);
    row["same_pattern_as"] = r.same_pattern_as.empty() ? json(nullptr) : json(r.same_pattern_as);
    row["head_diversity_median"] = r.has_diversity ? json(r.diversity_median) : json(nullptr);
    row["head_diversity_iqr"] = r.has_diversity ? json(r.diversity_iqr) : json(nullptr);
    rows.push_back(row);
  }
  json report = {{"recipe", recipe_json(c.recipe)},
                 {"seeds", c.seeds},
                 {"diversity_limit", c.diversity_limit},
                 {"std", "sample standard deviation over seeds (n - 1)"},
                 {"confidence", c.confidence},
                 {"ci", "mean +- t_{(1+confidence)/2, n-1} * std / sqrt(n) over seeds (Student's t); the mean for one seed"},
                 {"baseline", result.rows.empty() || !result.rows.front().baseline ? json(nullptr)
                                                                                    : json(result.rows.front().name)},
                 {"paired_difference", "per seed: method top-1 - baseline top-1 (same seed = same data order); "
                                       "mean and t interval of those differences"},
                 {"head_diversity", "per run: median and Q3 - Q1 (linear interpolation) over the eval images; mean over seeds"},
                 {"train_samples", result.train_samples > 0 ? json(result.train_samples) : json(nullptr)},
                 {"eval_samples", result.eval_samples > 0 ? json(result.eval_samples) : json(nullptr)},
                 {"rows", rows},
                 {"skipped", result.skipped}};
  if (result.target_pruning_ratio >= 0)
    report["budget_matching"] = {{"target_pruning_ratio", result.target_pruning_ratio},
                                 {"reference", c.match_to.empty() ? json(nullptr) : json(c.match_to)},
                                 {"num_tokens", result.geometry.num_tokens},
                                 {"num_layers", result.geometry.num_layers},
                                 {"num_heads", result.geometry.num_heads}};
  return report;
}

std::string sweep_report_markdown(const SweepConfig& c, const SweepResult& result) {
  const auto& rows = result.rows;
  // Best per column: lowest GFLOPs, highest pruning ratio, images/s, diversity.
  auto best = [&](auto value, bool highest, auto valid) {
    double b = highest ? -1e300 : 1e300;
    for (const SweepRow& r : rows)
      if (valid(r)) b = highest ? std::max(b, value(r)) : std::min(b, value(r));
    return b;
  };
  auto always = [](const SweepRow&) { return true; };
  const double best_gflops = best([](const SweepRow& r) { return r.attention_gflops; }, false, always);
  const double best_pr = best([](const SweepRow& r) { return std::round(r.pruning_ratio * 1e4); }, true, always);
  const double best_ips = best([](const SweepRow& r) { return std::round(r.images_per_second); }, true, always);
  const double best_div = best([](const SweepRow& r) { return std::round(r.diversity_median * 1e3); }, true,
                               [](const SweepRow& r) { return r.has_diversity; });
  // Top-1: the highest mean is marked only when its interval separates from every other row's.
  std::size_t top = rows.size();
  for (std::size_t i = 0; i < rows.size(); ++i)
    if (top == rows.size() || rows[i].acc1_stats.mean > rows[top].acc1_stats.mean) top = i;
  bool top_separates = top < rows.size() && rows.size() > 1 && c.seeds.size() > 1;
  for (std::size_t i = 0; i < rows.size() && top_separates; ++i)
    if (i != top && !analysis::intervals_separate(rows[top].acc1_stats, rows[i].acc1_stats)) top_separates = false;
  auto bold = [](bool on, const std::string& s) { return on ? "**" + s + "**" : s; };

  std::string seeds;
  for (std::size_t i = 0; i < c.seeds.size(); ++i) seeds += (i ? "," : "") + std::to_string(c.seeds[i]);
  std::string md = "# Attention sweep\n\n";
  const std::string date = runtime::utc_now("%Y-%m-%d");
  const std::string images = result.train_samples > 0 ? fmt::format(" ({} training / {} test images)",
                                                                    result.train_samples, result.eval_samples)
                                                      : std::string();
  md += fmt::format("Model `{}` on `{}`{}, {} epochs, seeds {} (same seed = same data order for every method), "
                    "generated {}.\n\n",
                    c.recipe.model, c.recipe.dataset, images, c.recipe.epochs, seeds, date);
  if (result.target_pruning_ratio >= 0)
    md += fmt::format("Budgets matched to pruning ratio {:.4f}{} at N = {} tokens, {} layers, {} heads: each config's "
                      "budget knob (column *budget*) set to the value closest to it; the derived configs are in "
                      "`configs/`.\n\n",
                      result.target_pruning_ratio, c.match_to.empty() ? "" : " (that of `" + c.match_to + "`)",
                      result.geometry.num_tokens, result.geometry.num_layers, result.geometry.num_heads);
  if (!c.command_line.empty()) md += "```\n" + c.command_line + "\n```\n\n";
  const int pct = static_cast<int>(std::lround(100 * c.confidence));
  const std::string base = !rows.empty() && rows.front().baseline ? rows.front().name : std::string("baseline");
  md += fmt::format("| method | mechanism | budget | top-1 (%) mean ± std | {}% CI | Δ vs {} (paired) [{}% CI] | "
                    "attention GFLOPs | pruning ratio | train images/s | head diversity median (IQR) |\n"
                    "|---|---|---|---|---|---|---|---|---|---|\n", pct, base, pct);
  for (std::size_t i = 0; i < rows.size(); ++i) {
    const SweepRow& r = rows[i];
    const std::string div = r.has_diversity ? fmt::format("{:.3f} ({:.3f})", r.diversity_median, r.diversity_iqr) : "n/a";
    // One seed has no spread: its std and intervals would read 0 and claim a certainty it lacks.
    const bool spread = r.acc1.size() > 1;
    std::string paired = r.baseline ? "—" : "n/a";
    if (r.paired) {
      const bool excludes_zero = r.paired->ci_low > 0 || r.paired->ci_high < 0;
      paired = !spread ? fmt::format("{:+.2f} (one seed)", r.paired->mean)
                       : bold(excludes_zero, fmt::format("{:+.2f} [{:+.2f}, {:+.2f}]", r.paired->mean,
                                                         r.paired->ci_low, r.paired->ci_high));
    }
    md += fmt::format("| {}{} | {} | {} | {} | {} | {} | {} | {} | {} | {} |\n", r.name, r.baseline ? " (baseline)" : "",
                      r.mechanism, r.budget_knob.empty() ? "as given" : "`" + r.budget_knob + "`",
                      bold(i == top && top_separates,
                           spread ? pm(r.acc1_stats.mean, r.acc1_stats.std) : fmt::format("{:.2f}", r.acc1_stats.mean)),
                      spread ? fmt::format("[{:.2f}, {:.2f}]", r.acc1_stats.ci_low, r.acc1_stats.ci_high) : "n/a (one seed)",
                      paired,
                      bold(r.attention_gflops == best_gflops, fmt::format("{:.6f}", r.attention_gflops)) +
                          (std::abs(r.attention_gflops_paid - r.attention_gflops) > 1e-9
                               ? fmt::format(" (paid {:.6f})", r.attention_gflops_paid)
                               : std::string()),
                      bold(std::round(r.pruning_ratio * 1e4) == best_pr, fmt::format("{:.4f}", r.pruning_ratio)),
                      bold(std::round(r.images_per_second) == best_ips, fmt::format("{:.0f}", r.images_per_second)),
                      bold(r.has_diversity && std::round(r.diversity_median * 1e3) == best_div, div));
  }
  md += fmt::format(
      "\nStd is the sample standard deviation over seeds; the {0}% CI is Student's t interval of the mean over seeds. "
      "Δ is the paired difference to the baseline (per seed: method − baseline, same data order) with its t interval; bold when "
      "that interval excludes 0. The highest top-1 is bold only when its interval separates from every other row's "
      "({1}). Other columns: bold marks the best value (lowest attention GFLOPs, highest pruning ratio, highest "
      "train images/s, highest head diversity) at the precision shown. Attention GFLOPs and pruning ratio are those "
      "of the patterns the model runs (the `flops` command's numbers; equivalent pairs for backends without a "
      "pattern); for a scheduled budget (top-k's k_start -> k_end) the final one, with the mean paid during "
      "training in parentheses. Head diversity: per image, the mean over head pairs of ‖Y_i − Y_j‖_F / "
      "(‖Y_i‖_F + ‖Y_j‖_F) on the last layer's per-head outputs; per run the median and IQR (Q3 − Q1, linear "
      "interpolation) over the evaluation images, averaged over seeds.\n\n",
      pct, top_separates ? "here it does" : "here it does not: no row is marked");
  for (const SweepRow& r : rows)
    if (!r.same_pattern_as.empty())
      md += fmt::format("`{}` computes exactly the pairs of `{}` in every layer and head at this model: one pattern "
                        "under two names, so its row is not a second result.\n\n",
                        r.name, r.same_pattern_as);
  md += "Per-seed top-1:\n\n";
  for (const SweepRow& r : rows) {
    md += "- " + r.name + ":";
    for (std::size_t i = 0; i < r.acc1.size(); ++i) md += fmt::format(" seed {} {:.2f}", r.seeds[i], r.acc1[i]);
    md += fmt::format(" ({:.0f} s)\n", r.seconds);
  }
  if (!result.skipped.empty()) {
    md += "\nSkipped:\n\n";
    for (const auto& s : result.skipped) md += "- " + s + "\n";
  }
  md += fmt::format("\n![accuracy vs attention GFLOPs]({0}_accuracy_vs_gflops.png)\n\n![training curves]({0}_training_curves.png)\n",
                    c.report_name);
  return md;
}

}  // namespace sparsevit::experiments
