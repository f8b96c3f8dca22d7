#include "models/pretrained_weights.h"

#include <ATen/ATen.h>
#include <fmt/format.h>
#include <torch/nn/init.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <set>

#include "models/classifier.h"
#include "models/pos_embed.h"
#include "models/vision_transformer.h"
#include "util/errors.h"
#include "weights/weight_file.h"

namespace sparsevit::models {
namespace {

std::string join(const std::vector<std::string>& names) {
  std::string out;
  for (const auto& n : names) out += (out.empty() ? "" : ", ") + n;
  return out;
}

bool is_head(const std::string& name) { return name == "head.weight" || name == "head.bias"; }

// Drops `prefix` when every key carries it.
void strip_common_prefix(weights::NamedTensors& weights, const std::string& prefix) {
  const bool all = !weights.empty() && std::all_of(weights.begin(), weights.end(), [&](const auto& w) {
    return w.first.rfind(prefix, 0) == 0;
  });
  if (all)
    for (auto& w : weights) w.first = w.first.substr(prefix.size());
}

bool has_key(const weights::NamedTensors& weights, const std::string& name) {
  return std::any_of(weights.begin(), weights.end(), [&](const auto& w) { return w.first == name; });
}

// TimeSformer's load_pretrained for divided space-time models: where the file (image weights)
// has no temporal attention, blocks.i.temporal_attn.* start as blocks.i.attn.* and
// blocks.i.temporal_norm1.* as blocks.i.norm1.*.
int64_t add_temporal_from_spatial(weights::NamedTensors& weights, const torch::OrderedDict<std::string, at::Tensor>& params) {
  weights::NamedTensors added;
  for (const auto& [name, tensor] : weights) {
    if (name.rfind("blocks.", 0) != 0) continue;
    for (const auto& [from, to] : {std::pair<std::string, std::string>{".attn.", ".temporal_attn."}, {".norm1.", ".temporal_norm1."}}) {
      const std::size_t at = name.find(from);
      if (at == std::string::npos) continue;
      const std::string target = name.substr(0, at) + to + name.substr(at + from.size());
      if (params.contains(target) && !has_key(weights, target)) added.emplace_back(target, tensor);
    }
  }
  weights.insert(weights.end(), added.begin(), added.end());
  return static_cast<int64_t>(added.size());
}

}  // namespace

namespace {
bool is_batch_norm_statistic(const std::string& name) {
  for (const char* suffix : {"running_mean", "running_var", "num_batches_tracked"}) {
    const std::string s = std::string(".") + suffix;
    if (name.size() > s.size() && name.compare(name.size() - s.size(), s.size(), s) == 0) return true;
  }
  return false;
}
}  // namespace

PretrainedLoad load_pretrained(models::Classifier& model, const weights::NamedTensors& file_weights, const std::string& source) {
  PretrainedLoad report;
  weights::NamedTensors weights = without_wrapper_prefixes(file_weights);
  auto params = model.named_parameters(/*recurse=*/true);
  if (model.num_frames() > 0) report.temporal_from_spatial = add_temporal_from_spatial(weights, params);
  std::set<std::string> buffers;
  for (const auto& b : model.named_buffers(/*recurse=*/true)) buffers.insert(b.key());
  // BatchNorm statistics (the conv stem's) are learned state, loaded like parameters; every
  // other buffer (the sparse patterns) is derived from the attention config.
  torch::OrderedDict<std::string, at::Tensor> statistics;
  for (const auto& b : model.named_buffers(/*recurse=*/true))
    if (is_batch_norm_statistic(b.key())) statistics.insert(b.key(), b.value());
  const models::VitConfig& vc = model.config();

  // Check every shape before copying anything, so a refused file leaves the model untouched.
  std::vector<std::pair<std::string, at::Tensor>> to_copy;
  std::set<std::string> seen;
  for (const auto& [name, tensor] : weights) {
    if (!seen.insert(name).second) throw UsageError(source + ": key '" + name + "' appears twice");
    if (statistics.contains(name)) {
      if (tensor.sizes() != statistics[name].sizes())
        throw UsageError(fmt::format("{}: {} has shape {} in the file, the model expects {}", source, name,
                                     weights::shape_string(tensor), weights::shape_string(statistics[name])));
      to_copy.emplace_back(name, tensor);
      continue;
    }
    if (buffers.count(name)) continue;  // derived from the attention config
    if (!params.contains(name)) {
      report.unexpected.push_back(name);
      continue;
    }
    const at::Tensor& target = params[name];
    at::Tensor value = tensor;
    if (is_head(name) && value.sizes() != target.sizes()) {
      report.removed.push_back(name);  // MAE: "Removing key head.weight from pretrained checkpoint"
      continue;
    }
    if (name == "pos_embed" && value.dim() == 3 && value.sizes() != target.sizes() && value.size(2) == target.size(2)) {
      const int64_t grid = static_cast<int64_t>(std::lround(std::sqrt(static_cast<double>(vc.num_patches()))));
      value = models::interpolate_pos_embed(value.to(at::kFloat), vc.num_prefix_tokens, grid);
      report.pos_embed_interpolated = true;
    }
    if (name == "time_embed" && value.dim() == 3 && value.sizes() != target.sizes() && value.size(2) == target.size(2)) {
      // TimeSformer: F.interpolate(time_embed, size=T, mode='nearest') over the frame axis.
      value = at::upsample_nearest1d(value.to(at::kFloat).transpose(1, 2), {target.size(1)}).transpose(1, 2);
      report.time_embed_resized = true;
    }
    if (value.sizes() != target.sizes())
      throw UsageError(fmt::format("{}: {} has shape {} in the file, the model expects {}", source, name,
                                   weights::shape_string(value), weights::shape_string(target)));
    if (!value.is_floating_point())
      throw UsageError(fmt::format("{}: {} is not a floating-point tensor", source, name));
    to_copy.emplace_back(name, value);
  }
  {
    torch::NoGradGuard no_grad;
    for (const auto& [name, value] : to_copy) {
      at::Tensor& target = params.contains(name) ? params[name] : statistics[name];
      target.copy_(value.to(target.scalar_type()));
      report.loaded.push_back(name);
    }
  }
  const std::set<std::string> loaded(report.loaded.begin(), report.loaded.end());
  for (const auto& p : params)
    if (!loaded.count(p.key())) report.missing.push_back(p.key());
  if (!loaded.count("head.weight") && params.contains("head.weight")) {
    // MAE main_finetune: trunc_normal_(model.head.weight, std=2e-5) for the new head.
    torch::NoGradGuard no_grad;
    params["head.weight"].normal_(0.0, 2e-5).clamp_(-2.0, 2.0);
    if (params.contains("head.bias") && !loaded.count("head.bias")) params["head.bias"].zero_();
    report.head_reinitialised = true;
  }
  if (report.loaded.empty())
    throw UsageError(source + ": no key matches the model's parameters (file keys: " +
                     join(std::vector<std::string>(report.unexpected.begin(),
                                                   report.unexpected.begin() + std::min<std::size_t>(5, report.unexpected.size()))) +
                     ", ...)");
  return report;
}

weights::NamedTensors without_wrapper_prefixes(weights::NamedTensors weights) {
  strip_common_prefix(weights, "module.");
  strip_common_prefix(weights, "model.");
  return weights;
}

PretrainedLoad load_pretrained_file(models::Classifier& model, const std::string& path) {
  return load_pretrained(model, weights::read_weight_file(path), path);
}

std::string describe(const PretrainedLoad& r) {
  std::string out = fmt::format("loaded {} tensors", r.loaded.size());
  if (r.pos_embed_interpolated) out += "; pos_embed interpolated (bicubic) to the model's grid";
  if (r.time_embed_resized) out += "; time_embed resized (nearest) to the model's frames";
  if (r.temporal_from_spatial > 0)
    out += fmt::format("; temporal attention initialised from the spatial attention ({} tensors)", r.temporal_from_spatial);
  if (!r.removed.empty()) out += "; removed (class count differs): " + join(r.removed);
  if (!r.missing.empty()) out += "; missing: " + join(r.missing);
  if (!r.unexpected.empty()) {
    std::vector<std::string> shown(r.unexpected.begin(), r.unexpected.begin() + std::min<std::size_t>(8, r.unexpected.size()));
    out += fmt::format("; unexpected ({}): {}{}", r.unexpected.size(), join(shown), r.unexpected.size() > 8 ? ", ..." : "");
  }
  if (r.head_reinitialised) out += "; head re-initialised (trunc_normal std 2e-5)";
  return out;
}

weights::NamedTensors exported_parameters(const torch::nn::Module& model) {
  weights::NamedTensors out;
  for (const auto& p : model.named_parameters(/*recurse=*/true)) out.emplace_back(p.key(), p.value().detach().contiguous());
  for (const auto& b : model.named_buffers(/*recurse=*/true))
    if (is_batch_norm_statistic(b.key())) out.emplace_back(b.key(), b.value().detach().contiguous());
  return out;
}

}  // namespace sparsevit::models
