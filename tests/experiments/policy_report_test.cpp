// The policy experiment's report: means, t intervals and paired differences over training seeds,
// checked against values computed by hand.
#include "experiments/policy_report.h"

#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include <unistd.h>

#include "util/errors.h"

namespace sparsevit::experiments {
namespace {

namespace fs = std::filesystem;

struct Runs {
  fs::path root = fs::temp_directory_path() / ("sparsevit_policy_report_" + std::to_string(::getpid()));
  Runs() { fs::create_directories(root); }
  ~Runs() { fs::remove_all(root); }
  std::string add(const std::string& name, int seed, double score, double success, double floor) {
    const fs::path dir = root / (name + std::to_string(seed));
    fs::create_directories(dir);
    std::ofstream(dir / "config.json") << nlohmann::json{{"seed", seed}}.dump();
    std::ofstream(dir / "summary.json")
        << nlohmann::json{{"score", score}, {"success_rate", success}, {"mean_max_coverage", score * 0.9},
                          {"do_nothing", {{"score", floor}}}}
               .dump();
    return dir.string();
  }
};

TEST(PolicyReport, MeansIntervalsAndPairedDifferencesOverSeeds) {
  Runs runs;
  PolicyReportOptions o;
  o.baseline = "dense";
  o.groups = {{"dense", {runs.add("d", 0, 0.5, 0.2, 0.07), runs.add("d", 1, 0.6, 0.3, 0.07), runs.add("d", 2, 0.7, 0.4, 0.07)}},
              {"fibo", {runs.add("f", 2, 0.8, 0.4, 0.07), runs.add("f", 0, 0.6, 0.2, 0.07), runs.add("f", 1, 0.7, 0.3, 0.07)}}};
  const nlohmann::json r = policy_report(o);
  const nlohmann::json& dense = r["groups"][0]["metrics"]["score"];
  EXPECT_NEAR(dense["mean"].get<double>(), 0.6, 1e-12);
  EXPECT_NEAR(dense["std"].get<double>(), 0.1, 1e-12);
  // t(0.975, 2 dof) = 4.3027; half width 4.3027 * 0.1 / sqrt(3).
  EXPECT_NEAR(dense["ci_high"].get<double>() - 0.6, 4.302653 * 0.1 / std::sqrt(3.0), 1e-5);
  // Paired by seed, not by order: fibo - dense = +0.1 on every seed, so the interval is a point.
  const nlohmann::json& diff = r["groups"][1]["vs_baseline"]["score"];
  EXPECT_NEAR(diff["mean"].get<double>(), 0.1, 1e-12);
  EXPECT_NEAR(diff["ci_low"].get<double>(), 0.1, 1e-9);
  EXPECT_NEAR(r["groups"][1]["metrics"]["do_nothing_score"]["mean"].get<double>(), 0.07, 1e-12);
  const std::string md = policy_report_markdown(r);
  EXPECT_NE(md.find("| fibo | 3 | 0.700 ["), std::string::npos) << md;
  EXPECT_NE(md.find("fibo − dense, score: +0.100 [+0.100, +0.100] (excludes 0)"), std::string::npos) << md;
}

TEST(PolicyReport, BadInputsAreUsageErrors) {
  Runs runs;
  PolicyReportOptions o;
  o.groups = {{"dense", {runs.add("d", 0, 0.5, 0.2, 0.07)}}};
  o.baseline = "nope";
  EXPECT_THROW(policy_report(o), UsageError);
  o.baseline = "";
  o.groups[0].runs.push_back((runs.root / "missing").string());
  EXPECT_THROW(policy_report(o), UsageError);
}

}  // namespace
}  // namespace sparsevit::experiments
