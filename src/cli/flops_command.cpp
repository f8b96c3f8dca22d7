// `sparsevit flops`: attention GFLOPs, pruning ratio and density of a model + attention config.
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>

#include "analysis/attention_report.h"
#include "cli/commands.h"
#include "config/attention_spec.h"
#include "models/model_shapes.h"

namespace sparsevit::cli {
namespace {

struct FlopsOptions {
  std::string model = "vit_base_patch16_224";
  std::string attn_cfg;
  std::vector<std::string> overrides;
  bool json = false;
};

void run_flops(const FlopsOptions& o) {
  const models::ModelShape& m = models::find_model_shape(o.model);
  config::AttentionSpec spec = o.attn_cfg.empty() ? config::default_attention_spec()
                                                  : config::load_attention_spec(o.attn_cfg);
  config::apply_mask_kwarg_overrides(spec, o.overrides);
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
  cmd->callback([options] { run_flops(*options); });
}

}  // namespace sparsevit::cli
