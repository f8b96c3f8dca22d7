#include "models/masked_autoencoder.h"

#include <ATen/ATen.h>
#include <torch/nn/init.h>

#include "models/pos_embed.h"
#include "patterns/pattern_stats.h"
#include "util/errors.h"
#include "util/linear.h"

namespace sparsevit::models {
namespace {

int64_t grid_of(const VitConfig& c) { return c.img_size / c.patch_size; }

double gflops(const std::vector<std::shared_ptr<Block>>& blocks, const AttentionGeometry& g) {
  double pairs = 0;
  for (const auto& b : blocks) pairs += b->attn().computed_pairs_per_head(g.num_tokens);
  return static_cast<double>(g.num_heads) * patterns::attention_gflops_for_pairs(pairs, g.head_dim);
}

std::vector<std::optional<patterns::Pattern>> patterns_of(const std::vector<std::shared_ptr<Block>>& blocks) {
  std::vector<std::optional<patterns::Pattern>> out;
  for (const auto& b : blocks) out.push_back(b->attn().static_pattern());
  return out;
}

}  // namespace

AttentionGeometry MaeConfig::encoder_geometry() const {
  AttentionGeometry g = encoder.attention_geometry();
  g.num_tokens = len_keep() + encoder.num_prefix_tokens;
  return g;
}

VitConfig MaeConfig::decoder() const {
  VitConfig d = encoder;
  d.embed_dim = decoder_embed_dim;
  d.depth = decoder_depth;
  d.num_heads = decoder_num_heads;
  d.drop_path_rate = 0;
  d.attention = decoder_attention;
  return d;
}

MaskedAutoencoder::MaskedAutoencoder(const MaeConfig& c) : config_(c) {
  const VitConfig& e = c.encoder;
  const VitConfig d = c.decoder();
  if (!(c.mask_ratio >= 0 && c.mask_ratio < 1)) throw UsageError("mask_ratio must be in [0, 1)");
  if (c.len_keep() < 1) throw UsageError("mask_ratio leaves no visible patch");
  if (e.num_heads < 1 || e.embed_dim % e.num_heads != 0 || d.num_heads < 1 || d.embed_dim % d.num_heads != 0)
    throw UsageError("embed_dim must be a multiple of num_heads (encoder and decoder)");
  if (e.num_prefix_tokens != 1) throw UsageError("MAE has exactly one prefix token (the class token)");
  const int64_t patches = e.num_patches(), patch_dim = e.patch_size * e.patch_size * e.in_chans;

  patch_embed_ = register_module("patch_embed", std::make_shared<PatchEmbed>(e.img_size, e.patch_size, e.in_chans, e.embed_dim, e.stem));
  cls_token_ = register_parameter("cls_token", at::zeros({1, 1, e.embed_dim}));
  pos_embed_ = register_parameter("pos_embed", at::zeros({1, patches + 1, e.embed_dim}), /*requires_grad=*/false);
  block_list_ = register_module("blocks", torch::nn::ModuleList());
  attn_shared_ = std::make_shared<attention::SharedAttentionParameters>();
  const AttentionGeometry eg = c.encoder_geometry();
  blocks_ = make_blocks(e, eg, config::build_layer_patterns(e.attention, eg), *block_list_, attn_shared_);
  if (!attn_shared_->empty()) register_module("attn_shared", attn_shared_);
  norm_ = register_module("norm", torch::nn::LayerNorm(torch::nn::LayerNormOptions({e.embed_dim}).eps(1e-6)));

  decoder_embed_ = register_module("decoder_embed", torch::nn::Linear(e.embed_dim, d.embed_dim));
  mask_token_ = register_parameter("mask_token", at::zeros({1, 1, d.embed_dim}));
  decoder_pos_embed_ = register_parameter("decoder_pos_embed", at::zeros({1, patches + 1, d.embed_dim}), false);
  decoder_block_list_ = register_module("decoder_blocks", torch::nn::ModuleList());
  decoder_attn_shared_ = std::make_shared<attention::SharedAttentionParameters>();
  const AttentionGeometry dg = d.attention_geometry();
  decoder_blocks_ = make_blocks(d, dg, config::build_layer_patterns(d.attention, dg), *decoder_block_list_,
                                decoder_attn_shared_);
  if (!decoder_attn_shared_->empty()) register_module("decoder_attn_shared", decoder_attn_shared_);
  decoder_norm_ = register_module("decoder_norm", torch::nn::LayerNorm(torch::nn::LayerNormOptions({d.embed_dim}).eps(1e-6)));
  decoder_pred_ = register_module("decoder_pred", torch::nn::Linear(d.embed_dim, patch_dim));
  initialize_weights();
}

void MaskedAutoencoder::initialize_weights() {
  torch::NoGradGuard no_grad;
  const VitConfig& e = config_.encoder;
  pos_embed_.copy_(sincos_2d_pos_embed(e.embed_dim, grid_of(e), true).unsqueeze(0));
  decoder_pos_embed_.copy_(sincos_2d_pos_embed(config_.decoder_embed_dim, grid_of(e), true).unsqueeze(0));
  // The patch projection like a Linear (xavier_uniform on the weight viewed as [out, -1]). The conv
  // stem keeps PyTorch's default conv init and BatchNorm weight 1 / bias 0, as timm leaves it.
  if (e.stem == "patch") {
    const at::Tensor w = patch_embed_->named_parameters()["proj.weight"];
    torch::nn::init::xavier_uniform_(w.view({w.size(0), -1}));
  }
  cls_token_.normal_(0.0, 0.02);
  mask_token_.normal_(0.0, 0.02);
  for (const auto& module : modules(/*include_self=*/false)) {
    if (auto* linear = module->as<torch::nn::Linear>()) {
      torch::nn::init::xavier_uniform_(linear->weight);
      if (linear->bias.defined()) linear->bias.zero_();
    } else if (auto* norm = module->as<torch::nn::LayerNorm>()) {
      norm->weight.fill_(1.0);
      norm->bias.zero_();
    }
  }
}

at::Tensor MaskedAutoencoder::patchify(const at::Tensor& imgs) const {
  const VitConfig& e = config_.encoder;
  const int64_t p = e.patch_size, h = imgs.size(2) / p, w = imgs.size(3) / p, c = imgs.size(1);
  if (imgs.dim() != 4 || imgs.size(2) % p != 0 || imgs.size(3) % p != 0)
    throw UsageError("patchify: images [B, C, H, W] with H and W multiples of " + std::to_string(p));
  return imgs.reshape({imgs.size(0), c, h, p, w, p}).permute({0, 2, 4, 3, 5, 1}).reshape({imgs.size(0), h * w, p * p * c});
}

at::Tensor MaskedAutoencoder::unpatchify(const at::Tensor& x) const {
  const VitConfig& e = config_.encoder;
  const int64_t p = e.patch_size, c = e.in_chans, h = grid_of(e);
  if (x.dim() != 3 || x.size(1) != h * h || x.size(2) != p * p * c)
    throw UsageError("unpatchify: expected [B, " + std::to_string(h * h) + ", " + std::to_string(p * p * c) + "]");
  return x.reshape({x.size(0), h, h, p, p, c}).permute({0, 5, 1, 3, 2, 4}).reshape({x.size(0), c, h * p, h * p});
}

std::pair<at::Tensor, at::Tensor> MaskedAutoencoder::forward_encoder(const at::Tensor& imgs, const at::Tensor& noise,
                                                                     at::Tensor& mask) {
  const int64_t batch = imgs.size(0), patches = config_.encoder.num_patches(), keep = config_.len_keep();
  at::Tensor x = patch_embed_->forward(imgs) + pos_embed_.narrow(1, 1, patches);
  // MAE's random_masking, with the kept ids sorted: the visible tokens stay in raster order.
  const at::Tensor ids_keep = std::get<0>(at::argsort(noise, /*dim=*/int64_t{1}, /*descending=*/false).narrow(1, 0, keep).sort(1));
  mask = at::ones({batch, patches}, x.options()).scatter(1, ids_keep, 0.0);
  x = x.gather(1, ids_keep.unsqueeze(-1).expand({-1, -1, x.size(2)}));
  const at::Tensor cls = (cls_token_ + pos_embed_.narrow(1, 0, 1)).expand({batch, -1, -1});
  x = at::cat({cls, x}, 1);
  for (const auto& block : blocks_) x = block->forward(x);
  return {norm_->forward(x), ids_keep};
}

at::Tensor MaskedAutoencoder::forward_decoder(const at::Tensor& latent, const at::Tensor& ids_keep) {
  const int64_t batch = latent.size(0), patches = config_.encoder.num_patches();
  const at::Tensor x = linear(decoder_embed_, latent);
  const int64_t dim = x.size(2);
  // Mask tokens everywhere, the encoded visible tokens scattered back to their grid positions
  // (MAE's gather with ids_restore, written as the inverse scatter).
  const at::Tensor full = mask_token_.expand({batch, patches, dim})
                              .scatter(1, ids_keep.unsqueeze(-1).expand({-1, -1, dim}), x.narrow(1, 1, x.size(1) - 1));
  at::Tensor y = at::cat({x.narrow(1, 0, 1), full}, 1) + decoder_pos_embed_;
  for (const auto& block : decoder_blocks_) y = block->forward(y);
  y = linear(decoder_pred_, decoder_norm_->forward(y));
  return y.narrow(1, 1, patches);
}

at::Tensor MaskedAutoencoder::forward_loss(const at::Tensor& imgs, const at::Tensor& pred, const at::Tensor& mask) const {
  at::Tensor target = patchify(imgs);
  if (config_.norm_pix_loss) {
    const at::Tensor mean = target.mean(-1, /*keepdim=*/true);
    const at::Tensor var = target.var(-1, /*unbiased=*/true, /*keepdim=*/true);
    target = (target - mean) / (var + 1e-6).sqrt();
  }
  const at::Tensor per_patch = (pred - target).pow(2).mean(-1);
  return (per_patch * mask).sum() / mask.sum();
}

MaeOutput MaskedAutoencoder::forward(const at::Tensor& imgs, const std::optional<at::Tensor>& noise) {
  const int64_t patches = config_.encoder.num_patches();
  const at::Tensor n = noise ? *noise : at::rand({imgs.size(0), patches}, imgs.options());
  if (n.dim() != 2 || n.size(0) != imgs.size(0) || n.size(1) != patches)
    throw UsageError("MAE noise must be [B, " + std::to_string(patches) + "]");
  MaeOutput out;
  auto [latent, ids_keep] = forward_encoder(imgs, n, out.mask);
  out.pred = forward_decoder(latent, ids_keep);
  out.loss = forward_loss(imgs, out.pred, out.mask);
  return out;
}

void MaskedAutoencoder::set_training_progress(double progress) {
  for (const auto& b : blocks_) b->attn().set_progress(progress);
  for (const auto& b : decoder_blocks_) b->attn().set_progress(progress);
}

double MaskedAutoencoder::attention_gflops_encoder() const { return gflops(blocks_, config_.encoder_geometry()); }
double MaskedAutoencoder::attention_gflops_decoder() const {
  return gflops(decoder_blocks_, config_.decoder().attention_geometry());
}
std::vector<std::optional<patterns::Pattern>> MaskedAutoencoder::encoder_layer_patterns() const { return patterns_of(blocks_); }
std::vector<std::optional<patterns::Pattern>> MaskedAutoencoder::decoder_layer_patterns() const {
  return patterns_of(decoder_blocks_);
}

}  // namespace sparsevit::models
