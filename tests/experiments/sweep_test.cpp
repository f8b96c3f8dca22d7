// `sweep` end to end on a tiny synthetic IDX set (3 configs x 2 seeds x 1 epoch), resume, the
// report's matched GFLOPs; `diversity` against an independent float64 computation from the
// checkpoint's qkv weights; `attention-map` PNG files and sizes.
#include "experiments/sweep.h"

#include <gtest/gtest.h>
#include <torch/torch.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "analysis/attention_report.h"
#include "config/attention_spec.h"
#include "data/dataset.h"
#include "data/image_codec.h"
#include "data/transforms.h"
#include "experiments/attention_map.h"
#include "experiments/head_diversity.h"
#include "models/model_shapes.h"
#include "models/vision_transformer.h"
#include "pipelines/checkpoint_model.h"
#include "support/synthetic_idx.h"
#include "train/checkpoint.h"
#include "util/errors.h"

namespace sparsevit::experiments {
namespace {

namespace fs = std::filesystem;

std::string read_text(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

std::string config_path(const std::string& name) {
  return std::string(SPARSEVIT_SOURCE_DIR) + "/configs/attention/" + name + ".yaml";
}

class SweepTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    root_ = fs::temp_directory_path() / ("sparsevit_sweep_" + std::to_string(::getpid()));
    fs::remove_all(root_);
    fs::create_directories(root_ / "data");
    testing::write_synthetic_idx(root_ / "data", "train", 64, 1);
    testing::write_synthetic_idx(root_ / "data", "t10k", 24, 2);
    first_ = run_sweep(config());
  }
  static void TearDownTestSuite() { fs::remove_all(root_); }

  static SweepConfig config() {
    SweepConfig c;
    // Dense listed last: the report puts the baseline first anyway. The pruning config has no
    // scores file here and is skipped.
    c.configs = {config_path("vit_fibottention_small"), config_path("vit_linformer"), config_path("vit_pruning"),
                 config_path("vit_dense")};
    c.seeds = {0, 1};
    c.output_dir = (root_ / "sweep").string();
    c.recipe.dataset = "mnist";
    c.recipe.data_path = (root_ / "data").string();
    c.recipe.model = "vit_nano_patch4_28";
    c.recipe.epochs = 1;
    c.recipe.batch_size = 32;
    c.recipe.lr = 1e-3;
    c.recipe.threads = 2;
    c.recipe.num_workers = 0;
    c.diversity_limit = 16;
    return c;
  }

  static fs::path root_;
  static SweepResult first_;
};
fs::path SweepTest::root_;
SweepResult SweepTest::first_;

TEST_F(SweepTest, ReportHasOneRowPerConfigDenseFirst) {
  EXPECT_EQ(first_.runs_trained, 6);
  EXPECT_EQ(first_.runs_reused, 0);
  ASSERT_EQ(first_.skipped.size(), 1u);
  EXPECT_NE(first_.skipped[0].find("vit_pruning"), std::string::npos);
  const fs::path out = root_ / "sweep";
  for (const char* f : {"report.md", "report.json", "report_accuracy_vs_gflops.png", "report_training_curves.png"})
    EXPECT_TRUE(fs::exists(out / f)) << f;
  const nlohmann::json report = nlohmann::json::parse(read_text(out / "report.json"));
  const auto& rows = report.at("rows");
  ASSERT_EQ(rows.size(), 3u);
  EXPECT_EQ(rows[0]["method"], "vit_dense");
  EXPECT_TRUE(rows[0]["baseline"].get<bool>());
  EXPECT_TRUE(rows[0]["dense"].get<bool>());
  EXPECT_EQ(report["baseline"], "vit_dense");
  EXPECT_EQ(rows[1]["method"], "vit_fibottention_small");
  EXPECT_EQ(rows[2]["method"], "vit_linformer");
  for (const auto& row : rows) {
    EXPECT_EQ(row["test_acc1"].size(), 2u);
    EXPECT_EQ(row["curve_test_acc1"].size(), 1u);
    EXPECT_GT(row["train_images_per_second"].get<double>(), 0);
    EXPECT_TRUE(row["head_diversity_median"].is_number()) << row["method"];  // linformer has head outputs too
  }
  // The table: one line per config, dense first, each column's best in bold.
  const std::string md = read_text(out / "report.md");
  const auto dense = md.find("| vit_dense (baseline)"), fibo = md.find("| vit_fibottention_small"),
             lin = md.find("| vit_linformer");
  ASSERT_NE(dense, std::string::npos);
  EXPECT_LT(dense, fibo);
  EXPECT_LT(fibo, lin);
  EXPECT_NE(md.find("**"), std::string::npos);
  // The runs are where the layout says, each marked finished.
  EXPECT_TRUE(fs::exists(out / "vit_linformer" / "seed1" / "summary.json"));
  EXPECT_TRUE(fs::exists(out / "vit_dense" / "seed0" / "checkpoint.pt"));
  // ... and record where they finished: the thread count is not part of the recipe, yet a run
  // repeats to the last digit only on the same CPU model at the same thread count.
  const nlohmann::json summary = nlohmann::json::parse(read_text(out / "vit_linformer" / "seed1" / "summary.json"));
  ASSERT_TRUE(summary.contains("finished_on"));
  EXPECT_EQ(summary["finished_on"]["threads"], 2);
  EXPECT_GT(summary["finished_on"]["cores"].get<int64_t>(), 0);
  EXPECT_FALSE(summary["finished_on"]["cpu"].get<std::string>().empty());
  EXPECT_NE(summary["finished_on"]["utc"].get<std::string>().find(" UTC"), std::string::npos);
}

TEST_F(SweepTest, IntervalsAndPairedDifferencesFollowFromThePerSeedValues) {
  // Recomputed by hand from report.json's per-seed top-1: t(0.975, 1 dof) = 12.7062047.
  const nlohmann::json report = nlohmann::json::parse(read_text(root_ / "sweep" / "report.json"));
  const double t = 12.706204736174698;
  const auto& rows = report.at("rows");
  const std::vector<double> dense = rows[0]["test_acc1"].get<std::vector<double>>();
  for (const auto& row : rows) {
    const std::vector<double> a = row["test_acc1"].get<std::vector<double>>();
    const double mean = (a[0] + a[1]) / 2, sd = std::abs(a[0] - a[1]) / std::sqrt(2.0);
    EXPECT_NEAR(row["test_acc1_mean"].get<double>(), mean, 1e-9);
    EXPECT_NEAR(row["test_acc1_std"].get<double>(), sd, 1e-9);
    EXPECT_NEAR(row["test_acc1_ci"][0].get<double>(), mean - t * sd / std::sqrt(2.0), 1e-6);
    EXPECT_NEAR(row["test_acc1_ci"][1].get<double>(), mean + t * sd / std::sqrt(2.0), 1e-6);
    if (row["baseline"].get<bool>()) {
      EXPECT_TRUE(row["paired_difference_to_baseline"].is_null());
      continue;
    }
    const double d0 = a[0] - dense[0], d1 = a[1] - dense[1];
    const double dm = (d0 + d1) / 2, dsd = std::abs(d0 - d1) / std::sqrt(2.0);
    const auto& pd = row["paired_difference_to_baseline"];
    EXPECT_NEAR(pd["mean"].get<double>(), dm, 1e-9);
    EXPECT_NEAR(pd["ci"][0].get<double>(), dm - t * dsd / std::sqrt(2.0), 1e-6);
    EXPECT_NEAR(pd["ci"][1].get<double>(), dm + t * dsd / std::sqrt(2.0), 1e-6);
    // Per-epoch curve with its interval (one epoch here).
    EXPECT_EQ(row["curve_test_acc1_ci_low"].size(), 1u);
    EXPECT_LE(row["curve_test_acc1_ci_low"][0].get<double>(), row["curve_test_acc1"][0].get<double>());
  }
  const std::string md = read_text(root_ / "sweep" / "report.md");
  EXPECT_NE(md.find("95% CI"), std::string::npos);
  EXPECT_NE(md.find("Δ vs vit_dense (paired)"), std::string::npos);
}

TEST_F(SweepTest, PlanSaysWhenTwoConfigsGiveTheSamePairs) {
  // At N = 50 and Fibottention's budget the Fibonacci schedule and the local window coincide.
  SweepConfig c = config();
  c.configs = {config_path("vit_structured_local"), config_path("vit_fibonacci"),
               config_path("vit_fibottention_small"), config_path("vit_linformer")};
  c.seeds = {0};
  c.output_dir = (root_ / "same_pairs").string();
  c.match_to = config_path("vit_fibottention_small");
  c.plan_only = true;
  const SweepResult plan = run_sweep(c);
  ASSERT_EQ(plan.plan.size(), 4u);
  EXPECT_EQ(plan.plan[0].find("same pairs as"), std::string::npos) << plan.plan[0];
  EXPECT_NE(plan.plan[1].find("same pairs as vit_structured_local"), std::string::npos) << plan.plan[1];
  EXPECT_EQ(plan.plan[2].find("same pairs as"), std::string::npos) << plan.plan[2];
  EXPECT_EQ(plan.plan[3].find("same pairs as"), std::string::npos) << plan.plan[3];  // no pattern
  // The report carries it in both files.
  SweepResult result;
  SweepRow local, fibonacci;
  local.name = "vit_structured_local";
  fibonacci.name = "vit_fibonacci";
  fibonacci.same_pattern_as = "vit_structured_local";
  result.rows = {local, fibonacci};
  EXPECT_NE(sweep_report_markdown(c, result).find("`vit_fibonacci` computes exactly the pairs of `vit_structured_local`"),
            std::string::npos);
  const nlohmann::json j = sweep_report_json(c, result);
  EXPECT_TRUE(j["rows"][0]["same_pattern_as"].is_null());
  EXPECT_EQ(j["rows"][1]["same_pattern_as"], "vit_structured_local");
}

TEST_F(SweepTest, MatchedBudgetsDeriveConfigsAndRefuseStaleRuns) {
  SweepConfig c = config();
  c.configs = {config_path("vit_fibottention_small"), config_path("vit_random"), config_path("vit_linformer")};
  c.seeds = {0};
  c.output_dir = (root_ / "matched").string();
  c.match_to = config_path("vit_fibottention_small");
  c.baseline = "vit_fibottention_small";
  c.report_name = "matched";
  // --plan: derived configs and the plan, no training.
  c.plan_only = true;
  const SweepResult plan = run_sweep(c);
  EXPECT_EQ(plan.runs_trained, 0);
  ASSERT_EQ(plan.plan.size(), 3u);
  EXPECT_NE(plan.plan[1].find("keys_per_query="), std::string::npos) << plan.plan[1];
  EXPECT_NE(plan.plan[1].find("0/1 runs finished"), std::string::npos) << plan.plan[1];
  EXPECT_FALSE(fs::exists(root_ / "matched" / "matched.md"));
  c.plan_only = false;
  const SweepResult r = run_sweep(c);
  EXPECT_EQ(r.runs_trained, 3);
  EXPECT_NEAR(r.target_pruning_ratio, 0.92003, 1e-5);
  const nlohmann::json report = nlohmann::json::parse(read_text(root_ / "matched" / "matched.json"));
  EXPECT_EQ(report["budget_matching"]["num_tokens"], 50);
  EXPECT_EQ(report["baseline"], "vit_fibottention_small");
  const auto& rows = report.at("rows");
  ASSERT_EQ(rows.size(), 3u);
  EXPECT_EQ(rows[0]["method"], "vit_fibottention_small");  // the reference runs as written
  EXPECT_EQ(rows[0]["budget_knob"], "");
  for (std::size_t i = 1; i < rows.size(); ++i) {
    // The derived config is the one the run used, and its budget is what the model ran.
    const std::string derived = rows[i]["config"].get<std::string>();
    EXPECT_EQ(fs::path(derived).parent_path(), root_ / "matched" / "configs");
    const analysis::AttentionReport rep = analysis::attention_report(
        config::load_attention_spec(derived), models::find_model_shape("vit_nano_patch4_28").attention_geometry());
    EXPECT_DOUBLE_EQ(rows[i]["pruning_ratio"].get<double>(), rep.pruning_ratio);
    EXPECT_NEAR(rows[i]["pruning_ratio"].get<double>(), 0.92, 0.01) << rows[i]["method"];
    EXPECT_FALSE(rows[i]["budget_knob"].get<std::string>().empty());
  }
  EXPECT_TRUE(fs::exists(root_ / "matched" / "matched.md"));
  EXPECT_TRUE(fs::exists(root_ / "matched" / "matched_training_curves.png"));
  // Another budget derives other configs: the finished runs of the old ones are refused.
  c.match_to.clear();
  c.match_pruning_ratio = 0.8;
  EXPECT_THROW(run_sweep(c), UsageError);
  c.match_to = config_path("vit_fibottention_small");
  EXPECT_THROW(run_sweep(c), UsageError);  // both given
  c.match_pruning_ratio = -1;
  c.baseline = "no_such_config";
  EXPECT_THROW(run_sweep(c), UsageError);
}

// Video models: budgets are matched on the spatial attention, what the attention config runs on
// and whose pruning ratio training reports: one frame's 50 tokens in divided space-time (the
// image model's geometry, so the same knob as at vit_nano_patch4_28 with 4 blocks), the whole
// clip's 1 + 49 T tokens in joint space-time.
TEST_F(SweepTest, VideoModelsMatchBudgetsOnTheSpatialAttention) {
  SweepConfig c = config();
  c.configs = {config_path("video/timesformer_fibottention_modified_n50"), config_path("vit_bigbird")};
  c.seeds = {0};
  c.match_to = config_path("video/timesformer_fibottention_modified_n50");
  c.recipe.model = "timesformer_nano_patch4_28";
  c.recipe.dataset = "moving_fashion_mnist";
  c.recipe.num_frames = 4;
  c.plan_only = true;
  AttentionGeometry frame = models::find_model_shape("vit_nano_patch4_28").attention_geometry();
  frame.num_layers = 4;
  const double fibo = analysis::attention_report(config::load_attention_spec(c.match_to), frame).pruning_ratio;
  for (const char* type : {"divided_space_time", "joint_space_time"}) {
    c.recipe.attention_type = type;
    c.output_dir = (root_ / "video_plan" / type).string();
    const SweepResult plan = run_sweep(c);
    const bool joint = std::string(type) == "joint_space_time";
    AttentionGeometry g = frame;
    if (joint) g.num_tokens = 1 + 49 * 4;
    EXPECT_EQ(plan.runs_trained, 0);
    EXPECT_DOUBLE_EQ(plan.target_pruning_ratio,
                     analysis::attention_report(config::load_attention_spec(c.match_to), g).pruning_ratio) << type;
    if (!joint) EXPECT_DOUBLE_EQ(plan.target_pruning_ratio, fibo);
    const std::string derived = (fs::path(c.output_dir) / "configs" / "vit_bigbird.yaml").string();
    ASSERT_TRUE(fs::exists(derived)) << type;
    EXPECT_NEAR(analysis::attention_report(config::load_attention_spec(derived), g).pruning_ratio,
                plan.target_pruning_ratio, 0.01) << type;
  }
}

TEST_F(SweepTest, AttentionGflopsAreTheFlopsCommandNumbers) {
  const nlohmann::json report = nlohmann::json::parse(read_text(root_ / "sweep" / "report.json"));
  const models::ModelShape& m = models::find_model_shape("vit_nano_patch4_28");
  const AttentionGeometry shape = m.attention_geometry();
  for (const auto& row : report.at("rows")) {
    const analysis::AttentionReport r =
        analysis::attention_report(config::load_attention_spec(row["config"].get<std::string>()), shape);
    EXPECT_DOUBLE_EQ(row["attention_gflops"].get<double>(), r.attention_gflops) << row["method"];
    EXPECT_DOUBLE_EQ(row["pruning_ratio"].get<double>(), r.pruning_ratio) << row["method"];
  }
  // Fibottention and Linformer are far below dense at N = 50.
  const auto& rows = report.at("rows");
  EXPECT_LT(rows[1]["attention_gflops"].get<double>(), 0.5 * rows[0]["attention_gflops"].get<double>());
}

TEST_F(SweepTest, RerunReusesFinishedRunsAndGivesTheSameReport) {
  const fs::path out = root_ / "sweep";
  const std::string before = read_text(out / "report.json");
  const auto stamp = fs::last_write_time(out / "vit_dense" / "seed0" / "checkpoint.pt");
  const SweepResult again = run_sweep(config());
  EXPECT_EQ(again.runs_trained, 0);
  EXPECT_EQ(again.runs_reused, 6);
  EXPECT_EQ(read_text(out / "report.json"), before);
  EXPECT_EQ(fs::last_write_time(out / "vit_dense" / "seed0" / "checkpoint.pt"), stamp);

  // A run finished before a recipe field existed (no accum_iter recorded) is the default recipe:
  // reused, not refused.
  const fs::path summary_path = out / "vit_dense" / "seed0" / "summary.json";
  nlohmann::json summary = nlohmann::json::parse(read_text(summary_path));
  ASSERT_EQ(summary["recipe"].erase("accum_iter"), 1u);
  std::ofstream(summary_path) << summary.dump(2);
  EXPECT_EQ(run_sweep(config()).runs_reused, 6);

  // An unfinished run (no summary.json) is redone from its checkpoint: the finished epoch is not
  // trained again, so the result is the same but for the wall time the redo took.
  fs::remove(out / "vit_fibottention_small" / "seed1" / "summary.json");
  const SweepResult resumed = run_sweep(config());
  EXPECT_EQ(resumed.runs_trained, 1);
  EXPECT_EQ(resumed.runs_reused, 5);
  auto without_wall_time = [](const std::string& text) {
    nlohmann::json j = nlohmann::json::parse(text);
    for (auto& row : j["rows"]) row.erase("run_seconds");
    return j;
  };
  EXPECT_EQ(without_wall_time(read_text(out / "report.json")), without_wall_time(before));
}

// --finetune is a recipe field: every run of the sweep starts from the same weights (the video
// demo starts TimeSformers from an image ViT this way), and the summaries record it.
TEST_F(SweepTest, FinetuneStartsEveryRunFromTheSameWeights) {
  SweepConfig c = config();
  c.configs = {config_path("vit_dense")};
  c.seeds = {0};
  c.output_dir = (root_ / "sweep_finetune").string();
  c.recipe.finetune = (root_ / "sweep" / "vit_dense" / "seed0" / "checkpoint.pt").string();
  c.recipe.lr = 1e-12;  // the weights barely move: the run evaluates the checkpoint it started from
  c.diversity_limit = -1;
  run_sweep(c);
  const auto summary = [](const fs::path& p) { return nlohmann::json::parse(read_text(p / "summary.json")); };
  const nlohmann::json from = summary(root_ / "sweep" / "vit_dense" / "seed0");
  const nlohmann::json tuned = summary(root_ / "sweep_finetune" / "vit_dense" / "seed0");
  EXPECT_EQ(tuned["recipe"]["finetune"], c.recipe.finetune);
  EXPECT_EQ(tuned["test_acc1"], from["test_acc1"]);
  EXPECT_NEAR(tuned["test_loss"].get<double>(), from["test_loss"].get<double>(), 1e-5);
  // A rerun without it is another recipe: refused, not mixed in.
  c.recipe.finetune.clear();
  c.recipe.lr = 1e-3;
  try {
    run_sweep(c);
    ADD_FAILURE() << "a finished run of another finetune source was reused";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("finetune"), std::string::npos) << e.what();
  }
}

TEST_F(SweepTest, RunsOfAReportMustSeeTheSameData) {
  // The report says what the runs saw ...
  const nlohmann::json report = nlohmann::json::parse(read_text(root_ / "sweep" / "report.json"));
  EXPECT_EQ(report["train_samples"], 64);
  EXPECT_EQ(report["eval_samples"], 24);
  EXPECT_NE(read_text(root_ / "sweep" / "report.md").find("(64 training / 24 test images)"), std::string::npos);
  // ... and refuses a finished run that saw other data under the same recipe (a truncated copy of
  // the dataset), while a run from before the count was recorded is taken as it is.
  const fs::path copy = root_ / "sweep_other_data";
  fs::remove_all(copy);
  fs::copy(root_ / "sweep", copy, fs::copy_options::recursive);
  SweepConfig c = config();
  c.output_dir = copy.string();
  const fs::path old_run = copy / "vit_dense" / "seed1" / "summary.json";
  nlohmann::json summary = nlohmann::json::parse(read_text(old_run));
  ASSERT_EQ(summary.erase("train_samples"), 1u);
  std::ofstream(old_run) << summary.dump(2);
  EXPECT_EQ(run_sweep(c).runs_reused, 6);
  const fs::path other = copy / "vit_linformer" / "seed1" / "summary.json";
  summary = nlohmann::json::parse(read_text(other));
  summary["train_samples"] = 60000;
  std::ofstream(other) << summary.dump(2);
  try {
    run_sweep(c);
    ADD_FAILURE() << "a run on other data was reused";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("60000 train_samples"), std::string::npos) << e.what();
  }
}

TEST_F(SweepTest, OneSeedReportsNoSpread) {
  // A subset rerun (--seeds 0) reuses the finished runs; one seed has no std or interval, and the
  // table says so rather than printing a zero-width interval.
  SweepConfig c = config();
  c.seeds = {0};
  c.report_name = "one_seed";
  const SweepResult one = run_sweep(c);
  EXPECT_EQ(one.runs_trained, 0);
  const std::string md = read_text(root_ / "sweep" / "one_seed.md");
  EXPECT_NE(md.find("n/a (one seed)"), std::string::npos) << md;
  EXPECT_NE(md.find(" (one seed) |"), std::string::npos) << md;  // the paired difference, no interval
  EXPECT_EQ(md.find("± 0.00"), std::string::npos) << md;
  EXPECT_EQ(md.find("**+"), std::string::npos) << md;  // no difference marked as separating
}

TEST_F(SweepTest, RunsShareTheRecipeButTheAttention) {
  // Dense and Fibottention share the recipe: their first epoch saw the same batches, so the
  // train loss of one differs from the other only through the model, while two seeds differ
  // in data order. Checked through the resolved configs: identical but for attn_cfg.
  const fs::path out = root_ / "sweep";
  nlohmann::json a = nlohmann::json::parse(read_text(out / "vit_dense" / "seed0" / "config.json"));
  nlohmann::json b = nlohmann::json::parse(read_text(out / "vit_fibottention_small" / "seed0" / "config.json"));
  for (auto* j : {&a, &b})
    for (const char* k : {"attn_cfg", "output_dir", "log_dir", "resume"}) j->erase(k);
  EXPECT_EQ(a, b);
  EXPECT_EQ(a["seed"], 0);
}

TEST_F(SweepTest, RejectsBadInput) {
  EXPECT_THROW(parse_seed_list("0,x"), UsageError);
  EXPECT_THROW(parse_seed_list(""), UsageError);
  EXPECT_EQ(parse_seed_list("2,0,2"), (std::vector<int64_t>{2, 0}));
  SweepConfig c = config();
  c.recipe.epochs = 2;  // the finished runs are of another recipe: refused, not mixed in
  EXPECT_THROW(run_sweep(c), UsageError);
  c = config();
  c.configs = {(root_ / "missing.yaml").string()};
  EXPECT_THROW(run_sweep(c), UsageError);
  c.configs = {};
  EXPECT_THROW(run_sweep(c), UsageError);
}

TEST(FiveNumbers, LinearInterpolationLikeNumpy) {
  // numpy.percentile([4, 1, 3, 2], [0, 25, 50, 75, 100]) = 1, 1.75, 2.5, 3.25, 4
  const FiveNumbers f = five_numbers({4, 1, 3, 2});
  EXPECT_DOUBLE_EQ(f.min, 1);
  EXPECT_DOUBLE_EQ(f.q1, 1.75);
  EXPECT_DOUBLE_EQ(f.median, 2.5);
  EXPECT_DOUBLE_EQ(f.q3, 3.25);
  EXPECT_DOUBLE_EQ(f.max, 4);
  EXPECT_DOUBLE_EQ(five_numbers({7}).q1, 7);
  EXPECT_THROW(five_numbers({}), UsageError);
}

TEST_F(SweepTest, DiversityMatchesAnIndependentComputation) {
  DiversityConfig d;
  d.resume = (root_ / "sweep" / "vit_dense" / "seed0" / "checkpoint.pt").string();
  d.dataset = "mnist";
  d.data_path = (root_ / "data").string();
  d.limit = 20;
  d.batch_size = 8;  // 20 = 8 + 8 + 4: a partial last batch
  d.threads = 2;
  d.num_workers = 0;
  d.progress = false;
  const DiversitySummary s = run_diversity(d);
  EXPECT_EQ(s.samples, 20);
  EXPECT_EQ(s.layer, 5);
  EXPECT_EQ(s.heads, 4);

  // By hand: Y_h = softmax(q_h k_h^T / sqrt(16)) v_h from the last block's qkv weights, float64.
  const train::LoadedCheckpoint ckpt(d.resume);
  auto model = pipelines::load_checkpoint_vit(ckpt, "test");
  model->eval();
  torch::NoGradGuard no_grad;
  auto set = data::max_samples(data::make_dataset("mnist", d.data_path, false), 20);
  const auto transform = data::build_eval_transform(data::transform_config_for("mnist", 28, 1));
  std::vector<at::Tensor> images;
  data::Rng rng(0);
  for (int64_t i = 0; i < 20; ++i) images.push_back(transform(set->get(i).image, rng));
  const at::Tensor x = model->attention_inputs(at::stack(images))[5].to(at::kDouble);
  const auto params = model->named_parameters();
  const at::Tensor w = params["blocks.5.attn.qkv.weight"].to(at::kDouble);
  const at::Tensor b = params["blocks.5.attn.qkv.bias"].to(at::kDouble);
  const at::Tensor qkv = at::linear(x, w, b).reshape({20, 50, 3, 4, 16}).permute({2, 0, 3, 1, 4});
  const at::Tensor y = at::matmul(at::softmax(at::matmul(qkv[0], qkv[1].transpose(-2, -1)) / 4.0, -1), qkv[2]);
  std::vector<double> values;
  for (int64_t n = 0; n < 20; ++n) {
    double sum = 0;
    int pairs = 0;
    for (int64_t i = 0; i < 4; ++i)
      for (int64_t j = i + 1; j < 4; ++j, ++pairs) {
        const at::Tensor yi = y[n][i], yj = y[n][j];
        sum += (yi - yj).norm().item<double>() / (yi.norm().item<double>() + yj.norm().item<double>());
      }
    values.push_back(sum / pairs);
  }
  std::sort(values.begin(), values.end());
  auto q = [&](double p) {  // numpy's linear method
    const double pos = p * 19;
    const auto lo = static_cast<std::size_t>(pos);
    return values[lo] + (pos - lo) * (values[std::min<std::size_t>(lo + 1, 19)] - values[lo]);
  };
  EXPECT_NEAR(s.stats.min, values.front(), 1e-5);
  EXPECT_NEAR(s.stats.q1, q(0.25), 1e-5);
  EXPECT_NEAR(s.stats.median, q(0.5), 1e-5);
  EXPECT_NEAR(s.stats.q3, q(0.75), 1e-5);
  EXPECT_NEAR(s.stats.max, values.back(), 1e-5);
  EXPECT_GT(s.stats.min, 0);
  EXPECT_LT(s.stats.max, 1);
}

// A sweep without --dataset hands the recipe's `auto` to the diversity step, which resolves it as
// training does (here: idx files in a folder are Fashion-MNIST) instead of losing the column.
TEST_F(SweepTest, DiversityResolvesAutoAsTrainingDoes) {
  DiversityConfig d;
  d.resume = (root_ / "sweep" / "vit_dense" / "seed0" / "checkpoint.pt").string();
  d.data_path = (root_ / "data").string();
  d.limit = 12;
  d.threads = 2;
  d.num_workers = 0;
  d.progress = false;
  d.dataset = "auto";
  const DiversitySummary automatic = run_diversity(d);
  d.dataset = "fashion_mnist";
  const DiversitySummary explicit_name = run_diversity(d);
  EXPECT_EQ(automatic.samples, 12);
  EXPECT_DOUBLE_EQ(automatic.stats.median, explicit_name.stats.median);
  EXPECT_DOUBLE_EQ(automatic.stats.max, explicit_name.stats.max);
}

TEST_F(SweepTest, AttentionMapWritesPerHeadPngs) {
  AttentionMapConfig c;
  c.resume = (root_ / "sweep" / "vit_dense" / "seed0" / "checkpoint.pt").string();
  c.image = (root_ / "data" / "t10k-images-idx3-ubyte").string();
  c.index = 3;
  c.output_dir = (root_ / "maps").string();
  c.threads = 2;
  const AttentionMapSummary s = run_attention_map(c);
  EXPECT_EQ(s.layer, 5);
  EXPECT_EQ(s.grid, 7);
  ASSERT_EQ(s.files.size(), 1u + 2 * 4);
  for (int h = 0; h < 4; ++h) {
    const std::string stem = (root_ / "maps" / ("layer5_head" + std::to_string(h))).string();
    const data::Image cls = data::read_image(stem + "_cls.png", 3);
    EXPECT_EQ(cls.width, 7 * 32);  // 224 / 7 pixels per patch
    EXPECT_EQ(cls.height, 7 * 32);
    const data::Image full = data::read_image(stem + "_full.png", 3);
    EXPECT_EQ(full.width, 50 * 12);  // 600 / 50 pixels per token
    EXPECT_EQ(full.height, 50 * 12);
  }
  EXPECT_EQ(data::read_image((root_ / "maps" / "input.png").string(), 1).width, 28 * 8);

  // A PNG file as input, layer 0, explicit sizes.
  data::Image img{28, 28, 1, std::vector<uint8_t>(28 * 28, 90)};
  for (int i = 0; i < 28 * 14; ++i) img.pixels[i] = 200;
  data::write_png((root_ / "img.png").string(), img);
  c.image = (root_ / "img.png").string();
  c.index = -1;
  c.layer = 0;
  c.cls_size = 70;
  c.matrix_scale = 2;
  c.output_dir = (root_ / "maps_png").string();
  run_attention_map(c);
  EXPECT_EQ(data::read_image((root_ / "maps_png" / "layer0_head2_cls.png").string(), 3).width, 70);
  EXPECT_EQ(data::read_image((root_ / "maps_png" / "layer0_head2_full.png").string(), 3).width, 100);

  // Backends without probabilities: a clear usage error.
  c.resume = (root_ / "sweep" / "vit_linformer" / "seed0" / "checkpoint.pt").string();
  EXPECT_THROW(run_attention_map(c), UsageError);
  c.layer = 6;
  c.resume = (root_ / "sweep" / "vit_dense" / "seed0" / "checkpoint.pt").string();
  EXPECT_THROW(run_attention_map(c), UsageError);
}

}  // namespace
}  // namespace sparsevit::experiments
