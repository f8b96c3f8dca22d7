// `sparsevit masks`: the per-layer / per-head patterns of an attention config, as a table,
// JSON, or a PNG grid of one layer's head masks.
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>

#include "analysis/attention_report.h"
#include "analysis/mask_png.h"
#include "cli/commands.h"
#include "config/attention_spec.h"
#include "models/model_shapes.h"
#include "models/video_attention_layout.h"
#include "patterns/mask_registry.h"
#include "util/errors.h"

namespace sparsevit::cli {
namespace {

struct MasksOptions {
  std::string attn_cfg;
  std::vector<std::string> overrides;
  AttentionGeometry geometry;
  bool no_class_token = false;
  bool json = false;
  bool list = false;
  std::string png;
  int32_t png_layer = 0;
  // --model: the geometry of a registered model's attention instead of --tokens/--heads/...;
  // for a video model, its spatial attention (one frame, or the whole clip for joint_space_time).
  std::string model;
  int64_t num_frames = 0;
  std::string attention_type = "divided_space_time";
};

void print_mask_list() {
  for (const auto& g : patterns::mask_generators()) {
    fmt::print("{}{}: {}\n", g.name, g.dynamic ? " (dynamic)" : "", g.summary);
    for (const auto& k : g.kwargs)
      fmt::print("    {:<20} {:<14} {}\n", k.name, k.default_value.empty() ? "-" : k.default_value, k.doc);
  }
}

void run_masks(const MasksOptions& o) {
  if (o.list) return print_mask_list();
  config::AttentionSpec spec = config::load_attention_config(o.attn_cfg, o.overrides).spec;
  AttentionGeometry geometry = o.geometry;
  geometry.num_prefix_tokens = o.no_class_token ? 0 : 1;
  if (!o.model.empty()) {
    const models::ModelShape& shape = models::find_model_shape(o.model);
    geometry = shape.is_video()
                   ? models::video_attention_layout(shape.attention_geometry(), o.num_frames > 0 ? o.num_frames : shape.num_frames,
                                                    models::parse_video_attention(o.attention_type))
                         .spatial
                   : shape.attention_geometry();
  }
  const auto layers = config::build_layer_patterns(spec, geometry);
  const analysis::AttentionReport report = analysis::attention_report(spec, geometry, layers);
  for (const auto& w : report.warnings) spdlog::warn("{}", w);
  if (!o.png.empty()) {
    if (o.png_layer < 0 || o.png_layer >= geometry.num_layers)
      throw UsageError(fmt::format("--png-layer {} out of range [0, {})", o.png_layer, geometry.num_layers));
    if (!layers[o.png_layer]) throw UsageError("--png needs a static mask; this config's attention is " +
                                               std::string(report.dynamic ? "dynamic" : "dense"));
    analysis::write_mask_png(*layers[o.png_layer], o.png);
  }
  if (o.json) {
    std::cout << analysis::report_to_json(report).dump() << std::endl;
  } else {
    std::cout << analysis::format_report_table(report);
    if (!o.png.empty()) std::cout << "wrote " << o.png << " (layer " << o.png_layer << ")\n";
  }
}

}  // namespace

void register_masks_command(CLI::App& app) {
  auto options = std::make_shared<MasksOptions>();
  CLI::App* cmd = app.add_subcommand("masks", "Show the attention pattern of every layer and head of a config");
  cmd->add_option(option_names("attn-cfg"), options->attn_cfg,
                  "attention config YAML (default: the built-in Fibottention config)")
      ->check(CLI::ExistingFile);
  cmd->add_option(option_names("tokens"), options->geometry.num_tokens, "tokens N, class token included")
      ->default_val(197)->check(CLI::Range(1, 1 << 20));
  cmd->add_option(option_names("heads"), options->geometry.num_heads, "heads per layer")
      ->default_val(12)->check(CLI::Range(1, 4096));
  cmd->add_option(option_names("layers"), options->geometry.num_layers, "layers")
      ->default_val(12)->check(CLI::Range(1, 4096));
  cmd->add_option(option_names("head-dim"), options->geometry.head_dim, "head dimension for the GFLOPs")
      ->default_val(64)->check(CLI::Range(1, 1 << 16));
  cmd->add_flag(option_names("no-class-token"), options->no_class_token, "token 0 is a patch, not a class token");
  cmd->add_option("--set", options->overrides, "override a mask kwarg: NAME=VALUE (repeatable)");
  cmd->add_option(option_names("model"), options->model,
                  "take tokens, heads, layers and head dim from a registered model (video models: the spatial "
                  "attention of one frame)");
  cmd->add_option(option_names("num-frames"), options->num_frames, "video models: frames per clip (0: the model's)");
  cmd->add_option(option_names("attention-type"), options->attention_type,
                  "video models: divided_space_time | space_only | joint_space_time (joint: the whole clip)")
      ->capture_default_str();
  cmd->add_flag(option_names("json"), options->json, "print one JSON object instead of the table");
  cmd->add_option(option_names("png"), options->png, "write a PNG grid of one layer's head masks");
  cmd->add_option(option_names("png-layer"), options->png_layer, "layer shown by --png")->default_val(0);
  cmd->add_flag(option_names("list"), options->list, "list every mask and its kwargs");
  cmd->callback([options] { run_masks(*options); });
}

}  // namespace sparsevit::cli
