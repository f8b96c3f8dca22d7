// Static-pruning calibration (`sparsevit calibrate`): average a trained model's per-head
// attention maps over a calibration set, write them as the .npy score file that
// `mask: pruning` reads, and report the patterns the pruning config then builds.
#pragma once

#include <cstdint>
#include <string>

#include <nlohmann/json_fwd.hpp>

namespace sparsevit::experiments {

struct CalibrateConfig {
  std::string resume;              // checkpoint of the (dense) model to calibrate from
  std::string attn_cfg;            // the pruning config (mask: pruning) the scores are for
  std::string output;              // "" : the config's mask_kwargs.scores_file
  std::string dataset = "fashion_mnist";
  std::string data_path;           // "" : the dataset's standard location
  std::string split = "train";     // calibrate on train (default) or test images
  int64_t max_samples = 1024;      // 0: the whole split
  int64_t batch_size = 64;
  int64_t num_workers = 2;
  int64_t threads = 0;             // 0: every core
  int64_t seed = 0;
};

struct CalibrateSummary {
  std::string output;
  int64_t samples = 0;
  int64_t layers = 0, heads = 0, tokens = 0;
  // Of the pruned patterns the config builds from the new scores.
  double pruning_ratio = 0, density = 1, attention_gflops = 0;
  nlohmann::json to_json() const;
  std::string to_text() const;
};

CalibrateSummary run_calibrate(const CalibrateConfig& config);

}  // namespace sparsevit::experiments
