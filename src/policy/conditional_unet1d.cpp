#include "policy/conditional_unet1d.h"

#include <torch/nn/modules/activation.h>
#include <torch/nn/modules/linear.h>

#include <string>
#include <utility>

#include "util/errors.h"

namespace sparsevit::policy {

ConditionalUnet1D::ConditionalUnet1D(int64_t input_dim, int64_t global_cond_dim, int64_t diffusion_step_embed_dim,
                                     std::vector<int64_t> down_dims, int64_t kernel_size, int64_t n_groups,
                                     bool cond_predict_scale)
    : input_dim_(input_dim), global_cond_dim_(global_cond_dim), down_dims_(std::move(down_dims)) {
  if (input_dim < 1) throw UsageError("ConditionalUnet1D: input_dim must be positive, got " + std::to_string(input_dim));
  if (global_cond_dim < 0) throw UsageError("ConditionalUnet1D: global_cond_dim must be >= 0");
  if (down_dims_.empty()) throw UsageError("ConditionalUnet1D: down_dims must not be empty");
  const int64_t dsed = diffusion_step_embed_dim;
  step_embedding_ = SinusoidalPosEmb(dsed);
  step_fc1_ = torch::nn::Linear(dsed, dsed * 4);
  step_fc2_ = torch::nn::Linear(dsed * 4, dsed);
  diffusion_step_encoder_ = register_module(
      "diffusion_step_encoder", torch::nn::Sequential(step_embedding_, step_fc1_, torch::nn::Mish(), step_fc2_));
  const int64_t cond_dim = dsed + global_cond_dim;

  std::vector<int64_t> all_dims{input_dim};
  all_dims.insert(all_dims.end(), down_dims_.begin(), down_dims_.end());
  const size_t levels = down_dims_.size();  // (dim_in, dim_out) pairs of all_dims
  auto block = [&](int64_t in, int64_t out) {
    return std::make_shared<ConditionalResidualBlock1D>(in, out, cond_dim, kernel_size, n_groups, cond_predict_scale);
  };

  down_modules_ = register_module("down_modules", torch::nn::ModuleList());
  for (size_t i = 0; i < levels; ++i) {
    const int64_t dim_in = all_dims[i], dim_out = all_dims[i + 1];
    Level level{block(dim_in, dim_out), block(dim_out, dim_out), nullptr, nullptr};
    torch::nn::ModuleList entry(level.resnet, level.resnet2);
    if (i + 1 < levels) {
      level.down = Downsample1d(dim_out);
      entry->push_back(level.down);
    } else {
      entry->push_back(torch::nn::Identity());  // the original's nn.Identity: keeps the index layout
    }
    down_modules_->push_back(entry);
    down_.push_back(level);
  }

  const int64_t mid_dim = all_dims.back();
  mid_ = {block(mid_dim, mid_dim), block(mid_dim, mid_dim)};
  mid_modules_ = register_module("mid_modules", torch::nn::ModuleList(mid_[0], mid_[1]));

  // reversed(in_out[1:]): every up level upsamples (the original's is_last is never true here).
  up_modules_ = register_module("up_modules", torch::nn::ModuleList());
  for (size_t i = levels - 1; i >= 1; --i) {
    const int64_t dim_in = all_dims[i], dim_out = all_dims[i + 1];
    Level level{block(dim_out * 2, dim_in), block(dim_in, dim_in), nullptr, Upsample1d(dim_in)};
    up_modules_->push_back(torch::nn::ModuleList(level.resnet, level.resnet2, level.up));
    up_.push_back(level);
  }

  const int64_t start_dim = down_dims_.front();
  // The original builds this Conv1dBlock without n_groups: always 8 groups.
  final_block_ = Conv1dBlock(start_dim, start_dim, kernel_size, /*n_groups=*/8);
  final_proj_ = torch::nn::Conv1d(torch::nn::Conv1dOptions(start_dim, input_dim, 1));
  final_conv_ = register_module("final_conv", torch::nn::Sequential(final_block_, final_proj_));
}

int64_t ConditionalUnet1D::mid_horizon(int64_t horizon) const {
  for (size_t i = 0; i + 1 < down_dims_.size(); ++i) horizon = (horizon + 1) / 2;
  return horizon;
}

at::Tensor ConditionalUnet1D::condition(const at::Tensor& timestep, const at::Tensor& global_cond, int64_t batch,
                                        at::ScalarType dtype) {
  at::Tensor steps = timestep.dim() == 0 ? timestep.reshape({1}) : timestep;
  if (steps.dim() != 1 || (steps.size(0) != batch && steps.size(0) != 1))
    throw UsageError("ConditionalUnet1D: timestep must be a scalar or [B] with B = " + std::to_string(batch) +
                     ", got " + c10::str(timestep.sizes()));
  steps = steps.expand({batch});
  at::Tensor feature = step_fc2_->forward(at::mish(step_fc1_->forward(step_embedding_->forward(steps, dtype))));
  if (global_cond_dim_ == 0) {
    if (global_cond.defined()) throw UsageError("ConditionalUnet1D: built without global_cond, but one was given");
    return feature;
  }
  if (!global_cond.defined() || global_cond.dim() != 2 || global_cond.size(0) != batch ||
      global_cond.size(1) != global_cond_dim_)
    throw UsageError("ConditionalUnet1D: global_cond must be [" + std::to_string(batch) + ", " +
                     std::to_string(global_cond_dim_) + "], got " +
                     (global_cond.defined() ? c10::str(global_cond.sizes()) : std::string("none")));
  return at::cat({feature, global_cond}, -1);
}

at::Tensor ConditionalUnet1D::resample(const Level& level, const at::Tensor& x) {
  if (level.down) return level.down.ptr()->forward(x);
  if (level.up) return level.up.ptr()->forward(x);
  return x;
}

UnetOutput ConditionalUnet1D::forward_with_mid(const at::Tensor& sample, const at::Tensor& timestep,
                                               const at::Tensor& global_cond) {
  if (sample.dim() != 3 || sample.size(2) != input_dim_)
    throw UsageError("ConditionalUnet1D: sample must be [B, T, " + std::to_string(input_dim_) + "], got " +
                     c10::str(sample.sizes()));
  const int64_t horizon = sample.size(1);
  const int64_t multiple = int64_t{1} << (down_dims_.size() - 1);
  if (horizon < 1 || horizon % multiple != 0)
    throw UsageError("ConditionalUnet1D: horizon " + std::to_string(horizon) + " is not a multiple of " +
                     std::to_string(multiple) + " (2^(number of down_dims - 1))");
  const at::Tensor cond = condition(timestep, global_cond, sample.size(0), sample.scalar_type());

  at::Tensor x = sample.transpose(1, 2);  // [B, input_dim, T]: channels first for the convs
  std::vector<at::Tensor> skips;
  for (const Level& level : down_) {
    x = level.resnet2->forward(level.resnet->forward(x, cond), cond);
    skips.push_back(x);
    x = resample(level, x);
  }
  for (const auto& block : mid_) x = block->forward(x, cond);
  const at::Tensor mid = x;
  for (const Level& level : up_) {
    x = at::cat({x, skips.back()}, 1);
    skips.pop_back();
    x = resample(level, level.resnet2->forward(level.resnet->forward(x, cond), cond));
  }
  x = final_proj_->forward(final_block_->forward(x));
  return {x.transpose(1, 2), mid};
}

at::Tensor ConditionalUnet1D::forward(const at::Tensor& sample, const at::Tensor& timestep,
                                      const at::Tensor& global_cond) {
  return forward_with_mid(sample, timestep, global_cond).prediction;
}

}  // namespace sparsevit::policy
