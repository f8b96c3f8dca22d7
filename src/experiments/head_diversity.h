// Head diversity (`sparsevit diversity`): for each image, the mean over head pairs i < j of
// ||Y_i - Y_j||_F / (||Y_i||_F + ||Y_j||_F) on the last layer's per-head outputs Y_h [N, D]
// (before the output projection); 0 when heads are identical, 1 when they are opposite.
// Summarised over a set of images as min, Q1, median, Q3, max.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace sparsevit::experiments {

// Quartiles by linear interpolation between order statistics (numpy's default `linear`:
// position q * (n - 1) of the sorted values). UsageError for an empty set.
struct FiveNumbers {
  double min = 0, q1 = 0, median = 0, q3 = 0, max = 0;
  double iqr() const { return q3 - q1; }
  nlohmann::json to_json() const;
};
FiveNumbers five_numbers(std::vector<double> values);
double quantile_linear(const std::vector<double>& sorted, double q);

// One value per image for head outputs [B, H, N, D] (computed in float64); UsageError for H < 2.
std::vector<double> head_diversity_per_image(const at::Tensor& head_outputs);

struct DiversityConfig {
  std::string resume;                  // the checkpoint to analyse
  std::string dataset = "fashion_mnist";
  std::string data_path;               // "" : the dataset's standard location
  std::string split = "test";          // train | test
  int64_t limit = 10000;               // first (class-balanced) N images; 0: all
  int64_t batch_size = 64;
  int64_t num_workers = 2;
  int64_t threads = 0;                 // 0: every core
  bool progress = true;                // draw a progress bar on stdout
};

struct DiversitySummary {
  std::string checkpoint;
  int64_t samples = 0, layer = 0, heads = 0, tokens = 0;
  FiveNumbers stats;
  nlohmann::json to_json() const;
  std::string to_text() const;
};

DiversitySummary run_diversity(const DiversityConfig& config);

}  // namespace sparsevit::experiments
