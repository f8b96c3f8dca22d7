#include "experiments/calibration.h"

#include <ATen/ATen.h>
#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <torch/torch.h>

#include <algorithm>
#include <limits>
#include <nlohmann/json.hpp>
#include <thread>

#include "analysis/attention_report.h"
#include "config/attention_spec.h"
#include "data/data_loader.h"
#include "data/dataset.h"
#include "data/transforms.h"
#include "models/vision_transformer.h"
#include "pipelines/checkpoint_model.h"
#include "runtime/cpu_threads.h"
#include "train/checkpoint.h"
#include "train/progress_bar.h"
#include "util/errors.h"
#include "util/npy_file.h"

namespace sparsevit::experiments {

nlohmann::json CalibrateSummary::to_json() const {
  return {{"output", output},   {"samples", samples},           {"layers", layers},
          {"heads", heads},     {"tokens", tokens},             {"pruning_ratio", pruning_ratio},
          {"density", density}, {"attention_gflops", attention_gflops}};
}

std::string CalibrateSummary::to_text() const {
  return fmt::format(
      "wrote {} ([{}, {}, {}, {}] mean attention over {} images) | pruned patterns: pruning ratio {:.4f}, density "
      "{:.4f}, attention GFLOPs {:.6f}",
      output, layers, heads, tokens, tokens, samples, pruning_ratio, density, attention_gflops);
}

CalibrateSummary run_calibrate(const CalibrateConfig& c) {
  if (c.resume.empty()) throw UsageError("calibrate needs --resume CKPT: the trained model to calibrate from");
  if (c.attn_cfg.empty()) throw UsageError("calibrate needs --attn-cfg: the pruning config the scores are for");
  if (c.split != "train" && c.split != "test") throw UsageError("--split must be train or test, got '" + c.split + "'");
  if (c.batch_size < 1) throw UsageError("--batch_size must be >= 1");
  if (c.max_samples < 0) throw UsageError("--max_samples must be >= 0");
  runtime::configure_cpu_threads(c.threads);

  // The config the scores are for: checked before any work.
  config::AttentionSpec target = config::load_attention_spec(c.attn_cfg);
  if (target.mask != "pruning")
    throw UsageError(c.attn_cfg + ": calibrate writes scores for `mask: pruning`, this config has mask '" +
                     (target.mask.empty() ? std::string("none") : target.mask) + "'");
  std::string output = c.output;
  if (output.empty()) {
    if (!target.mask_kwargs.has("scores_file"))
      throw UsageError(c.attn_cfg + ": give --output or mask_kwargs.scores_file for the scores");
    output = target.mask_kwargs.values().at("scores_file").items.at(0);
  }

  const train::LoadedCheckpoint ckpt(c.resume);
  auto model = pipelines::load_checkpoint_vit(ckpt, "calibrate");
  const models::VitConfig& vc = model->config();
  if (vc.attention.has_mask())
    spdlog::warn("{} was trained with mask '{}': its attention maps are zero outside that pattern", c.resume,
                 vc.attention.mask);

  data::LoaderOptions options;
  options.batch_size = c.batch_size;
  options.num_workers = c.num_workers;
  options.seed = static_cast<uint64_t>(c.seed);
  // `auto` as training resolves it: --dataset accepts what finetune's does.
  const std::string dataset = data::resolve_dataset_name(c.dataset, c.data_path);
  const auto loader = pipelines::model_eval_loader(vc, dataset, c.data_path, c.split == "train", c.max_samples, options);

  // Sum of the probabilities in float64 (many small terms), one [H, N, N] per layer.
  const int64_t L = vc.depth, H = vc.num_heads, N = vc.num_tokens();
  std::vector<at::Tensor> sums;  // one zeros() each: copies of a Tensor would share storage
  for (int64_t l = 0; l < L; ++l) sums.push_back(at::zeros({H, N, N}, at::kDouble));
  torch::NoGradGuard no_grad;
  model->eval();
  train::ProgressBar bar("Calibrate", loader->num_batches(), c.batch_size, std::cout, train::stdout_is_tty());
  int64_t seen = 0, done = 0;
  data::Batch batch;
  while (loader->next(batch)) {
    const std::vector<at::Tensor> inputs = model->attention_inputs(batch.images);
    for (int64_t l = 0; l < L; ++l)
      sums[l] += model->blocks()[l]->attn().attention_probs(inputs[l]).sum(0).to(at::kDouble);
    seen += batch.images.size(0);
    bar.update(++done, std::numeric_limits<double>::quiet_NaN());
  }
  bar.finish();
  if (seen == 0) throw UsageError("the calibration set is empty");

  const at::Tensor mean = (at::stack(sums) / static_cast<double>(seen)).to(at::kFloat).contiguous();
  std::vector<float> values(mean.data_ptr<float>(), mean.data_ptr<float>() + mean.numel());
  write_npy_float32(output, {L, H, N, N}, values);

  // The patterns the config now builds for this model, from the scores just written.
  target.mask_kwargs.set_scalar("scores_file", output);
  const analysis::AttentionReport report = analysis::attention_report(target, vc.attention_geometry());

  CalibrateSummary s;
  s.output = output;
  s.samples = seen;
  s.layers = L;
  s.heads = H;
  s.tokens = N;
  s.pruning_ratio = report.pruning_ratio;
  s.density = report.density;
  s.attention_gflops = report.attention_gflops;
  return s;
}

}  // namespace sparsevit::experiments
