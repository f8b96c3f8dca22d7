// Progress bar formatting and the metrics.jsonl writer.
#include "train/progress_bar.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <vector>

#include <nlohmann/json.hpp>

#include "train/metrics_log.h"
#include "util/errors.h"

namespace sparsevit::train {
namespace {

namespace fs = std::filesystem;

TEST(ProgressBar, FormatDuration) {
  EXPECT_EQ(format_duration(0), "0:00");
  EXPECT_EQ(format_duration(7.4), "0:07");
  EXPECT_EQ(format_duration(754), "12:34");
  EXPECT_EQ(format_duration(3723), "1:02:03");
  EXPECT_EQ(format_duration(-1), "--:--");
  EXPECT_EQ(format_duration(std::nan("")), "--:--");
  EXPECT_EQ(format_duration(INFINITY), "--:--");
}

TEST(ProgressBar, FormatLineWithEverything) {
  ProgressSnapshot s;
  s.label = "Epoch 3/50";
  s.done = 117;
  s.total = 469;
  s.elapsed_seconds = 9.75;  // 12 it/s
  s.batch_size = 64;
  s.loss = 1.23456;
  s.avg_loss = 1.5;
  s.lr = 0.001;
  EXPECT_EQ(format_progress_line(s, 0),
            "Epoch 3/50 [117/469]  24% 12.00 it/s 768 img/s ETA 0:29 loss 1.2346 (1.5000) lr 1.000e-03");
  EXPECT_EQ(format_progress_line(s, 10),
            "Epoch 3/50 [117/469]  24% |##        | 12.00 it/s 768 img/s ETA 0:29 loss 1.2346 (1.5000) lr 1.000e-03");
}

TEST(ProgressBar, FormatLineBeforeAnyTimeAndAtTheEnd) {
  ProgressSnapshot s;
  s.label = "Test";
  s.total = 20;
  EXPECT_EQ(format_progress_line(s, 4), "Test [ 0/20]   0% |    | - it/s ETA --:--");
  s.done = 20;
  s.elapsed_seconds = 65;
  s.loss = 0.5;
  EXPECT_EQ(format_progress_line(s, 4), "Test [20/20] 100% |####| 0.31 it/s in 1:05 loss 0.5000");
}

TEST(ProgressBar, PlainLinesEveryTenPercentAndAtTheEnd) {
  std::vector<int64_t> due;
  for (int64_t d = 1; d <= 469; ++d) {
    if (plain_line_due(d, 469, 10)) due.push_back(d);
  }
  EXPECT_EQ(due, (std::vector<int64_t>{47, 94, 141, 188, 235, 282, 329, 376, 423, 469}));
  due.clear();
  for (int64_t d = 1; d <= 3; ++d) {
    if (plain_line_due(d, 3, 10)) due.push_back(d);
  }
  EXPECT_EQ(due, (std::vector<int64_t>{1, 2, 3}));
  EXPECT_FALSE(plain_line_due(0, 10, 10));
  EXPECT_FALSE(plain_line_due(1, 0, 10));
}

TEST(ProgressBar, PlainModePrintsTenLines) {
  std::ostringstream out;
  double now = 100.0;
  {
    ProgressBar bar("Epoch 1/2", 20, 8, out, /*redraw=*/false, 10, [&] { return now; });
    for (int i = 1; i <= 20; ++i) {
      now += 0.5;
      bar.update(i, 1.0 / i, 1e-3);
    }
    bar.finish();
    EXPECT_DOUBLE_EQ(bar.snapshot().avg_loss, [] {
      double s = 0;
      for (int i = 1; i <= 20; ++i) s += 1.0 / i;
      return s / 20;
    }());
  }
  const std::string text = out.str();
  EXPECT_EQ(std::count(text.begin(), text.end(), '\n'), 10);
  EXPECT_EQ(text.find('\r'), std::string::npos);
  EXPECT_NE(text.find("Epoch 1/2 [ 2/20]  10% 2.00 it/s 16 img/s ETA 0:09 loss 0.5000 (0.7500) lr 1.000e-03\n"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("[20/20] 100% 2.00 it/s 16 img/s in 0:10"), std::string::npos) << text;
}

TEST(ProgressBar, RedrawModeUsesCarriageReturnsAndOneNewline) {
  std::ostringstream out;
  double now = 0.0;
  ProgressBar bar("Epoch 1/1", 5, 0, out, /*redraw=*/true, 10, [&] { return now; });
  for (int i = 1; i <= 5; ++i) {
    now += 1.0;
    bar.update(i, 0.25);
  }
  bar.finish();
  bar.finish();  // idempotent
  const std::string text = out.str();
  EXPECT_EQ(std::count(text.begin(), text.end(), '\n'), 1);
  EXPECT_EQ(std::count(text.begin(), text.end(), '\r'), 6);  // 5 updates + the final redraw
  EXPECT_EQ(text.back(), '\n');
}

TEST(ProgressBar, FinishPrintsTheLastPlainLineOnce) {
  std::ostringstream out;
  double now = 0.0;
  {
    ProgressBar bar("Test", 100, 0, out, false, 50, [&] { return now; });
    bar.update(10, 1.0);  // not due
  }  // destructor finishes
  EXPECT_EQ(out.str(), "Test [ 10/100]  10% - it/s ETA --:-- loss 1.0000 (1.0000)\n");
}

class MetricsLogTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("sparsevit_metrics_" + std::to_string(::getpid()));
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  fs::path dir_;
};

std::vector<std::string> lines_of(const fs::path& p) {
  std::ifstream in(p);
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

TEST_F(MetricsLogTest, OneObjectPerLineFlushedAndAppended) {
  const auto path = (dir_ / "metrics.jsonl").string();
  {
    MetricsLog log(path);
    log.append({{"epoch", 0}, {"train_loss", 2.5}});
    // Flushed: visible before the writer closes.
    EXPECT_EQ(lines_of(path).size(), 1u);
    log.append({{"epoch", 1}, {"train_loss", 1.25}, {"note", "a\nb"}});
  }
  {
    MetricsLog again(path);  // appends, never truncates
    again.append({{"epoch", 2}});
  }
  const auto lines = lines_of(path);
  ASSERT_EQ(lines.size(), 3u);
  EXPECT_EQ(lines[0], R"({"epoch":0,"train_loss":2.5})");
  EXPECT_EQ(nlohmann::json::parse(lines[1])["note"], "a\nb");
  EXPECT_EQ(nlohmann::json::parse(lines[2])["epoch"], 2);
}

TEST_F(MetricsLogTest, Errors) {
  EXPECT_THROW(MetricsLog((dir_ / "missing" / "metrics.jsonl").string()), RuntimeError);
  MetricsLog log((dir_ / "m.jsonl").string());
  EXPECT_THROW(log.append(nlohmann::json::array({1, 2})), UsageError);
}

}  // namespace
}  // namespace sparsevit::train
