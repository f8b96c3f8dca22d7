#include "experiments/head_diversity.h"

#include <ATen/ATen.h>
#include <fmt/format.h>
#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <iostream>
#include <limits>
#include <nlohmann/json.hpp>
#include <thread>

#include "data/data_loader.h"
#include "data/dataset.h"
#include "data/transforms.h"
#include "models/vision_transformer.h"
#include "pipelines/checkpoint_model.h"
#include "runtime/cpu_threads.h"
#include "train/checkpoint.h"
#include "train/progress_bar.h"
#include "util/errors.h"

namespace sparsevit::experiments {

double quantile_linear(const std::vector<double>& sorted, double q) {
  if (sorted.empty()) throw UsageError("quantile of an empty set");
  const double pos = q * static_cast<double>(sorted.size() - 1);
  const auto lo = static_cast<std::size_t>(std::floor(pos));
  const std::size_t hi = std::min(lo + 1, sorted.size() - 1);
  return sorted[lo] + (pos - static_cast<double>(lo)) * (sorted[hi] - sorted[lo]);
}

FiveNumbers five_numbers(std::vector<double> values) {
  if (values.empty()) throw UsageError("five-number summary of an empty set");
  std::sort(values.begin(), values.end());
  return {values.front(), quantile_linear(values, 0.25), quantile_linear(values, 0.5), quantile_linear(values, 0.75),
          values.back()};
}

nlohmann::json FiveNumbers::to_json() const {
  return {{"min", min}, {"q1", q1}, {"median", median}, {"q3", q3}, {"max", max}};
}

std::vector<double> head_diversity_per_image(const at::Tensor& head_outputs) {
  if (head_outputs.dim() != 4) throw UsageError("head outputs must be [B, H, N, D]");
  const int64_t B = head_outputs.size(0), H = head_outputs.size(1);
  if (H < 2) throw UsageError("head diversity needs at least 2 heads, the layer has " + std::to_string(H));
  const at::Tensor y = head_outputs.detach().to(at::kDouble).reshape({B, H, -1});
  const at::Tensor norms = y.norm(2, {2});  // [B, H]
  at::Tensor sum = at::zeros({B}, y.options());
  for (int64_t i = 0; i < H; ++i)
    for (int64_t j = i + 1; j < H; ++j) {
      const at::Tensor dist = (y.select(1, i) - y.select(1, j)).norm(2, {1});
      const at::Tensor denom = norms.select(1, i) + norms.select(1, j);
      // Two all-zero heads are identical: distance 0.
      sum += at::where(denom > 0, dist / denom.clamp_min(std::numeric_limits<double>::min()), at::zeros_like(dist));
    }
  const at::Tensor mean = (sum / static_cast<double>(H * (H - 1) / 2)).contiguous();
  return std::vector<double>(mean.data_ptr<double>(), mean.data_ptr<double>() + B);
}

nlohmann::json DiversitySummary::to_json() const {
  return {{"checkpoint", checkpoint}, {"samples", samples}, {"layer", layer},       {"heads", heads},
          {"tokens", tokens},         {"quantiles", "linear"}, {"diversity", stats.to_json()}};
}

std::string DiversitySummary::to_text() const {
  return fmt::format(
      "head diversity (layer {}, {} heads, {} images): min {:.4f}  Q1 {:.4f}  median {:.4f}  Q3 {:.4f}  max {:.4f}",
      layer, heads, samples, stats.min, stats.q1, stats.median, stats.q3, stats.max);
}

DiversitySummary run_diversity(const DiversityConfig& c) {
  if (c.resume.empty()) throw UsageError("diversity needs --resume CKPT");
  if (c.split != "train" && c.split != "test") throw UsageError("--split must be train or test, got '" + c.split + "'");
  if (c.batch_size < 1) throw UsageError("--batch_size must be >= 1");
  if (c.limit < 0) throw UsageError("--limit must be >= 0");
  runtime::configure_cpu_threads(c.threads);

  const train::LoadedCheckpoint ckpt(c.resume);
  auto model = pipelines::load_checkpoint_vit(ckpt, "diversity");
  const models::VitConfig& vc = model->config();
  data::LoaderOptions options;
  options.batch_size = c.batch_size;
  options.num_workers = c.num_workers;
  // `auto` as training resolves it: a sweep hands its recipe's dataset on unchanged.
  const std::string dataset = data::resolve_dataset_name(c.dataset, c.data_path);
  const auto loader = pipelines::model_eval_loader(vc, dataset, c.data_path, c.split == "train", c.limit, options);

  torch::NoGradGuard no_grad;
  model->eval();
  auto& last = model->blocks().back()->attn();
  std::vector<double> values;
  values.reserve(static_cast<std::size_t>(loader->dataset().size()));
  std::ostream discard(nullptr);  // no progress output: a stream without a buffer drops it
  train::ProgressBar bar("Diversity", loader->num_batches(), c.batch_size, c.progress ? std::cout : discard,
                         c.progress && train::stdout_is_tty());
  int64_t done = 0;
  data::Batch batch;
  while (loader->next(batch)) {
    const std::vector<at::Tensor> inputs = model->attention_inputs(batch.images);
    const std::vector<double> v = head_diversity_per_image(last.head_outputs(inputs.back()));
    values.insert(values.end(), v.begin(), v.end());
    bar.update(++done, std::numeric_limits<double>::quiet_NaN());
  }
  bar.finish();
  if (values.empty()) throw UsageError("the diversity set is empty");

  DiversitySummary s;
  s.checkpoint = c.resume;
  s.samples = static_cast<int64_t>(values.size());
  s.layer = vc.depth - 1;
  s.heads = vc.num_heads;
  s.tokens = vc.num_tokens();
  s.stats = five_numbers(std::move(values));
  return s;
}

}  // namespace sparsevit::experiments
