#include "experiments/policy_report.h"

#include <fmt/format.h>

#include <cmath>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <regex>
#include <sstream>

#include "analysis/seed_statistics.h"
#include "util/errors.h"

namespace sparsevit::experiments {
namespace {

// A file holding one JSON object (summary.json: `policy train`'s last line, config.json).
nlohmann::json read_json_file(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw UsageError(path + ": cannot be read");
  std::stringstream text;
  text << in.rdbuf();
  const nlohmann::json j = nlohmann::json::parse(text.str(), nullptr, /*allow_exceptions=*/false);
  if (!j.is_object()) throw UsageError(path + ": not a JSON object");
  return j;
}

// The metrics reported per run, as (key, JSON pointer into summary.json).
const std::vector<std::pair<std::string, std::string>>& metric_paths() {
  static const std::vector<std::pair<std::string, std::string>> paths = {
      {"score", "/score"},
      {"success_rate", "/success_rate"},
      {"mean_max_coverage", "/mean_max_coverage"},
      {"train_seeds_score", "/train_seeds/score"},
      {"train_seeds_success_rate", "/train_seeds/success_rate"},
      {"do_nothing_score", "/do_nothing/score"},
      {"image_gap", "/probe/image_gap"},
      {"best_val_loss", "/best_val_loss"}};
  return paths;
}

nlohmann::json summary_json(const analysis::SeedSummary& s) {
  return {{"n", s.n}, {"mean", s.mean}, {"std", s.std}, {"ci_low", s.ci_low}, {"ci_high", s.ci_high}};
}

std::string cell(const nlohmann::json& s, int digits) {
  if (s.is_null()) return "–";
  const int n = s.at("n").get<int>();
  const double m = s.at("mean").get<double>();
  if (n < 2) return fmt::format("{:.{}f}", m, digits);
  return fmt::format("{:.{}f} [{:.{}f}, {:.{}f}]", m, digits, s.at("ci_low").get<double>(), digits,
                     s.at("ci_high").get<double>(), digits);
}

}  // namespace

nlohmann::json policy_report(const PolicyReportOptions& o) {
  nlohmann::json report = {{"groups", nlohmann::json::array()}, {"baseline", o.baseline}};
  // group -> metric -> seed -> value
  std::map<std::string, std::map<std::string, std::map<int64_t, double>>> values;
  bool baseline_found = o.baseline.empty();
  for (const PolicyReportGroup& g : o.groups) {
    if (g.runs.empty()) throw UsageError("policy report: group '" + g.name + "' has no run");
    baseline_found = baseline_found || g.name == o.baseline;
    nlohmann::json group = {{"name", g.name}, {"runs", nlohmann::json::array()}, {"metrics", nlohmann::json::object()}};
    for (const std::string& run : g.runs) {
      const nlohmann::json summary = read_json_file(run + "/summary.json");
      const nlohmann::json config = read_json_file(run + "/config.json");
      const int64_t seed = config.value("seed", int64_t{0});
      nlohmann::json r = {{"run", run}, {"seed", seed}};
      for (const auto& [key, pointer] : metric_paths()) {
        const nlohmann::json::json_pointer p(pointer);
        if (!summary.contains(p) || !summary.at(p).is_number()) continue;
        values[g.name][key][seed] = summary.at(p).get<double>();
        r[key] = summary.at(p);
      }
      group["runs"].push_back(r);
    }
    for (const auto& [key, pointer] : metric_paths()) {
      const auto it = values[g.name].find(key);
      if (it == values[g.name].end()) continue;
      std::vector<double> v;
      for (const auto& [seed, x] : it->second) v.push_back(x);
      group["metrics"][key] = summary_json(analysis::summarize_seeds(v));
    }
    report["groups"].push_back(group);
  }
  if (!baseline_found) throw UsageError("policy report: --baseline '" + o.baseline + "' is not a group");
  // Paired differences to the baseline on the seeds both groups have.
  for (nlohmann::json& group : report["groups"]) {
    const std::string name = group.at("name");
    if (o.baseline.empty() || name == o.baseline) continue;
    for (const std::string key : {"score", "success_rate", "mean_max_coverage"}) {
      std::vector<double> a, b;
      for (const auto& [seed, x] : values[name][key]) {
        const auto& base = values[o.baseline][key];
        if (const auto it = base.find(seed); it != base.end()) {
          a.push_back(x);
          b.push_back(it->second);
        }
      }
      if (a.empty()) continue;
      group["vs_baseline"][key] = summary_json(analysis::paired_difference(a, b));
    }
  }
  if (!o.expert_log.empty()) {
    std::ifstream in(o.expert_log);
    if (!in) throw UsageError(o.expert_log + ": cannot be read");
    const std::regex line(R"(expert success rate : ([0-9.]+)% \(([0-9]+) of ([0-9]+) episodes, seeds ([0-9]+)\.\.([0-9]+)\))");
    std::smatch m;
    for (std::string s; std::getline(in, s);)
      if (std::regex_search(s, m, line))
        report["expert"] = {{"success_rate", std::stod(m[1]) / 100}, {"episodes", std::stoll(m[3])},
                            {"first_seed", std::stoll(m[4])}, {"last_seed", std::stoll(m[5])}};
    if (!report.contains("expert")) throw UsageError(o.expert_log + ": no 'expert success rate' line");
  }
  return report;
}

std::string policy_report_markdown(const nlohmann::json& report) {
  std::string md =
      "Mean over training seeds with the 95% Student-t interval (one value: no interval). Score: Diffusion "
      "Policy's, the mean over episodes of min(max coverage / 0.95, 1). Held-out seeds 100000.., training "
      "seeds 0..; the do-nothing floor on the held-out seeds; image gap: the probe's loss with permuted images "
      "minus the true loss.\n\n"
      "| row | seeds | score | success | mean max coverage | score, training seeds | success, training seeds | "
      "do nothing | image gap | best val loss |\n|---|---|---|---|---|---|---|---|---|---|\n";
  for (const nlohmann::json& g : report.at("groups")) {
    const nlohmann::json& m = g.at("metrics");
    auto get = [&](const char* k) { return m.contains(k) ? m.at(k) : nlohmann::json(); };
    md += fmt::format("| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |\n", g.at("name").get<std::string>(),
                      g.at("runs").size(), cell(get("score"), 3), cell(get("success_rate"), 2),
                      cell(get("mean_max_coverage"), 3), cell(get("train_seeds_score"), 3),
                      cell(get("train_seeds_success_rate"), 2), cell(get("do_nothing_score"), 3),
                      cell(get("image_gap"), 4), cell(get("best_val_loss"), 4));
  }
  const std::string baseline = report.value("baseline", std::string());
  bool any = false;
  for (const nlohmann::json& g : report.at("groups")) {
    if (!g.contains("vs_baseline")) continue;
    if (!any) md += "\nPaired differences to " + baseline + " (same training seeds), 95% t interval:\n\n";
    any = true;
    const nlohmann::json& d = g.at("vs_baseline");
    auto separates = [](const nlohmann::json& s) {
      return s.at("n").get<int>() >= 2 && (s.at("ci_low").get<double>() > 0 || s.at("ci_high").get<double>() < 0);
    };
    for (const auto& [key, s] : d.items())
      md += fmt::format("- {} − {}, {}: {:+.3f}{}{}\n", g.at("name").get<std::string>(), baseline, key,
                        s.at("mean").get<double>(),
                        s.at("n").get<int>() >= 2
                            ? fmt::format(" [{:+.3f}, {:+.3f}]", s.at("ci_low").get<double>(), s.at("ci_high").get<double>())
                            : std::string(" (one seed: no interval)"),
                        separates(s) ? " (excludes 0)" : "");
  }
  if (report.contains("expert"))
    md += fmt::format("\nThe scripted expert on seeds {}..{}: success {:.1f}%.\n",
                      report["expert"].at("first_seed").get<int64_t>(), report["expert"].at("last_seed").get<int64_t>(),
                      100 * report["expert"].at("success_rate").get<double>());
  return md;
}

}  // namespace sparsevit::experiments
