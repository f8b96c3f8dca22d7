#include "policy/conditional_residual_block1d.h"

#include <torch/nn/modules/activation.h>
#include <torch/nn/modules/linear.h>

#include <string>

#include "util/errors.h"

namespace sparsevit::policy {

ConditionalResidualBlock1D::ConditionalResidualBlock1D(int64_t in_channels, int64_t out_channels, int64_t cond_dim,
                                                       int64_t kernel_size, int64_t n_groups, bool cond_predict_scale)
    : out_channels_(out_channels), cond_predict_scale_(cond_predict_scale) {
  block0_ = Conv1dBlock(in_channels, out_channels, kernel_size, n_groups);
  block1_ = Conv1dBlock(out_channels, out_channels, kernel_size, n_groups);
  blocks_ = register_module("blocks", torch::nn::ModuleList(block0_, block1_));
  const int64_t cond_channels = cond_predict_scale ? 2 * out_channels : out_channels;
  // The original's third stage (Rearrange 'batch t -> batch t 1') has no parameters: forward unsqueezes.
  cond_encoder_ = register_module("cond_encoder",
                                  torch::nn::Sequential(torch::nn::Mish(), torch::nn::Linear(cond_dim, cond_channels)));
  if (in_channels != out_channels)
    residual_conv_ = register_module("residual_conv",
                                     torch::nn::Conv1d(torch::nn::Conv1dOptions(in_channels, out_channels, 1)));
}

at::Tensor ConditionalResidualBlock1D::forward(const at::Tensor& x, const at::Tensor& cond) {
  at::Tensor out = block0_->forward(x);
  const at::Tensor embed = cond_encoder_->forward(cond).unsqueeze(-1);  // [B, cond_channels, 1]
  if (cond_predict_scale_) {
    const at::Tensor film = embed.reshape({embed.size(0), 2, out_channels_, 1});
    out = film.select(1, 0) * out + film.select(1, 1);
  } else {
    out = out + embed;
  }
  out = block1_->forward(out);
  return out + (residual_conv_ ? residual_conv_->forward(x) : x);
}

}  // namespace sparsevit::policy
