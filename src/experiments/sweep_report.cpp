#include "experiments/sweep_report.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <filesystem>

#include "analysis/raster_plot.h"
#include "experiments/sweep_runs.h"
#include "runtime/host_info.h"
#include "util/atomic_file.h"

namespace sparsevit::experiments {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

std::string pm(double mean, double std) { return fmt::format("{:.2f} ± {:.2f}", mean, std); }

}  // namespace

void write_sweep_report(const SweepConfig& c, SweepResult& result) {
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
  json report = {{"recipe", sweep_recipe_json(c.recipe)},
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
