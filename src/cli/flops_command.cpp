// `sparsevit flops`: attention GFLOPs, pruning ratio and density of a model + attention config
// (video models: spatial, temporal and total GFLOPs per clip).
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>

#include "analysis/attention_report.h"
#include "analysis/video_attention_report.h"
#include "cli/commands.h"
#include "config/attention_spec.h"
#include "models/model_shapes.h"
#include "models/video_attention_layout.h"

namespace sparsevit::cli {
namespace {

struct FlopsOptions {
  std::string model = "vit_base_patch16_224";
  std::string attn_cfg;
  std::vector<std::string> overrides;
  bool json = false;
  // Video models.
  int64_t num_frames = 0;  // 0: the model's
  std::string attention_type = "divided_space_time";
  std::string temporal_attn_cfg;
};

// A TimeSformer clip: the attention config on the spatial attention, the temporal attention
// dense unless --temporal-attn-cfg, GFLOPs per clip.
void run_video_flops(const FlopsOptions& o, const models::ModelShape& m, const config::AttentionSpec& spec) {
  const config::AttentionSpec temporal =
      o.temporal_attn_cfg.empty() ? config::AttentionSpec{} : config::load_attention_spec(o.temporal_attn_cfg);
  const models::VideoAttentionLayout layout = models::video_attention_layout(
      m.attention_geometry(), o.num_frames > 0 ? o.num_frames : m.num_frames, models::parse_video_attention(o.attention_type));
  const analysis::VideoAttentionReport r = analysis::video_attention_report(spec, temporal, layout);
  for (const auto& w : r.spatial.warnings) spdlog::warn("{}", w);
  if (o.json) {
    nlohmann::json out = {{"model", m.name},
                          {"attention", spec.source},
                          {"attention_type", models::video_attention_name(layout.type)},
                          {"num_frames", layout.num_frames},
                          {"spatial_tokens", layout.spatial.num_tokens},
                          {"spatial_sequences", layout.spatial_sequences},
                          {"temporal_sequences", layout.temporal_sequences},
                          {"heads", layout.spatial.num_heads},
                          {"layers", layout.spatial.num_layers},
                          {"head_dim", layout.spatial.head_dim},
                          {"spatial_gflops", r.spatial_gflops},
                          {"temporal_gflops", r.temporal_gflops},
                          {"attention_gflops", r.attention_gflops},
                          {"attention_gflops_patch", r.attention_gflops_patch},
                          {"pruning_ratio", r.pruning_ratio},
                          {"density", r.density}};
    std::cout << out.dump() << std::endl;
    return;
  }
  fmt::print("model {} ({} frames, {}; {} layers x {} heads, head dim {}), spatial attention {}\n", m.name,
             layout.num_frames, models::video_attention_name(layout.type), layout.spatial.num_layers,
             layout.spatial.num_heads, layout.spatial.head_dim, spec.source);
  fmt::print("spatial attention GFLOPs per clip     : {:.4f} ({} sequences of {} tokens)\n", r.spatial_gflops,
             layout.spatial_sequences, layout.spatial.num_tokens);
  if (layout.temporal)
    fmt::print("temporal attention GFLOPs per clip    : {:.4f} ({} sequences of {} tokens{})\n", r.temporal_gflops,
               layout.temporal_sequences, layout.temporal->num_tokens, o.temporal_attn_cfg.empty() ? ", dense" : "");
  fmt::print("attention GFLOPs per clip (total)     : {:.4f}\n", r.attention_gflops);
  fmt::print("pruning ratio (spatial patch pairs)   : {:.4f}\n", r.pruning_ratio);
  fmt::print("density (spatial, share of N x N)     : {:.4f}\n", r.density);
}

void run_flops(const FlopsOptions& o) {
  const models::ModelShape& m = models::find_model_shape(o.model);
  config::AttentionSpec spec = config::load_attention_config(o.attn_cfg, o.overrides).spec;
  if (m.is_video()) return run_video_flops(o, m, spec);
  const AttentionGeometry shape = m.attention_geometry();
  const analysis::AttentionReport r = analysis::attention_report(spec, shape);
  for (const auto& w : r.warnings) spdlog::warn("{}", w);
  if (o.json) {
    nlohmann::json out = {{"model", m.name},
                          {"attention", spec.source},
                          {"tokens", shape.num_tokens},
                          {"heads", shape.num_heads},
                          {"layers", shape.num_layers},
                          {"head_dim", shape.head_dim},
                          {"attention_gflops", r.attention_gflops},
                          {"attention_gflops_patch", r.attention_gflops_patch},
                          {"pruning_ratio", r.pruning_ratio},
                          {"density", r.density}};
    std::cout << out.dump() << std::endl;
    return;
  }
  fmt::print("model {} ({} tokens, {} layers x {} heads, head dim {}), attention {}\n", m.name, shape.num_tokens,
             shape.num_layers, shape.num_heads, shape.head_dim, spec.source);
  fmt::print("attention GFLOPs (all computed pairs) : {:.4f}\n", r.attention_gflops);
  fmt::print("attention GFLOPs (patch pairs only)   : {:.4f}\n", r.attention_gflops_patch);
  fmt::print("pruning ratio (patch pairs skipped)   : {:.4f}\n", r.pruning_ratio);
  fmt::print("density (share of N x N computed)     : {:.4f}\n", r.density);
}

}  // namespace

void register_flops_command(CLI::App& app) {
  auto options = std::make_shared<FlopsOptions>();
  CLI::App* cmd = app.add_subcommand("flops", "Attention GFLOPs, pruning ratio and density of a model");
  cmd->add_option(option_names("model"), options->model, "model name (timm naming)")->default_val("vit_base_patch16_224");
  cmd->add_option(option_names("attn-cfg"), options->attn_cfg, "attention config YAML (default: built-in Fibottention)")
      ->check(CLI::ExistingFile);
  cmd->add_option("--set", options->overrides, "override a mask kwarg: NAME=VALUE (repeatable)");
  cmd->add_flag(option_names("json"), options->json, "print one JSON object");
  cmd->add_option(option_names("num-frames"), options->num_frames, "video models: frames per clip (0: the model's)");
  cmd->add_option(option_names("attention-type"), options->attention_type,
                  "video models: divided_space_time | space_only | joint_space_time")
      ->capture_default_str();
  cmd->add_option(option_names("temporal-attn-cfg"), options->temporal_attn_cfg,
                  "video models: attention config of the temporal attention (default: dense)")
      ->check(CLI::ExistingFile);
  cmd->callback([options] { run_flops(*options); });
}

}  // namespace sparsevit::cli
