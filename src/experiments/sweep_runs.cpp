#include "experiments/sweep_runs.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <map>
#include <set>

#include "config/attention_spec.h"
#include "experiments/head_diversity.h"
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

// Trains one (config, seed) run unless its summary.json exists; returns that summary.
// `attention_yaml`: the config as run, recorded so that a changed config (or matched budget)
// cannot reuse a finished run of the old one (check_finished_runs).
json run_one(const SweepConfig& c, const std::string& config_path, const std::string& attention_yaml, int64_t seed,
             const fs::path& dir, bool& trained) {
  const fs::path summary_path = dir / "summary.json";
  const json recipe = sweep_recipe_json(c.recipe);
  if (fs::exists(summary_path)) {
    trained = false;
    json summary = read_json(summary_path);
    // A finished run of another recipe must not slip into this report.
    if (summary.contains("recipe") && summary["recipe"] != recipe) {
      // A key the finished run did not record (a field added since) counts as its default.
      const json defaults = sweep_recipe_json(pipelines::TrainConfig{});
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

}  // namespace

// The field list has no mark for the fields that only change speed or progress output, so they
// are named here.
json sweep_recipe_json(const pipelines::TrainConfig& recipe) {
  const std::set<std::string> speed_only = {"threads", "num_workers", "print_freq"};
  json j = json::object();
  pipelines::for_each_field(recipe, [&](const auto& value, const pipelines::FieldInfo& f) {
    if ((f.commands & pipelines::kFinetune) && f.group == pipelines::FieldGroup::recipe && !speed_only.count(f.name))
      j[f.name] = value;
  });
  return j;
}

fs::path sweep_run_dir(const SweepConfig& c, const std::string& stem, int64_t seed) {
  return fs::path(c.output_dir) / stem / ("seed" + std::to_string(seed));
}

void check_finished_runs(const SweepConfig& c, const std::string& stem, const std::string& attention_yaml) {
  for (int64_t seed : c.seeds) {
    const fs::path summary = sweep_run_dir(c, stem, seed) / "summary.json";
    if (!fs::exists(summary)) continue;
    const json s = read_json(summary);
    if (s.contains("attention_yaml") && s["attention_yaml"] != attention_yaml)
      throw UsageError(summary.parent_path().string() + " holds a run of another attention config (budget) than " +
                       "this sweep derives for " + stem + ": use another --output_dir or remove it");
  }
}

void run_sweep_plan(const SweepConfig& c, const SweepPlan& plan, SweepResult& result) {
  const std::vector<SweepItem>& items = plan.items;
  const std::string& baseline = plan.baseline;
  const std::size_t total = items.size() * c.seeds.size();
  std::size_t done = 0;
  fs::path first_train_run, first_eval_run;
  for (const SweepItem& item : items) {
    SweepRow row;
    row.name = item.stem;
    row.config = item.path;
    row.source_config = item.source_path;
    row.budget_knob = item.knob;
    row.same_pattern_as = item.same_pattern_as;
    row.mechanism = item.spec.backend + (item.spec.has_mask() ? " / " + item.spec.mask : "");
    row.dense = is_dense_attention(item.spec);
    row.baseline = item.stem == baseline;
    double ips = 0, div_median = 0, div_iqr = 0;
    int64_t div_runs = 0;
    std::vector<std::vector<double>> curves;
    const std::string attention_yaml = config::attention_spec_yaml(item.spec);
    for (int64_t seed : c.seeds) {
      ++done;
      spdlog::info("sweep: run {}/{}: {} seed {}", done, total, item.stem, seed);
      bool trained = false;
      const fs::path dir = sweep_run_dir(c, item.stem, seed);
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
}

}  // namespace sparsevit::experiments
