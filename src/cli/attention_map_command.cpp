// `sparsevit attention-map --resume CKPT --image PATH --output_dir DIR`: per-head attention maps
// (class token over the patch grid, and the full N x N matrix) as PNG files.
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "experiments/attention_map.h"

namespace sparsevit::cli {

void register_attention_map_command(CLI::App& app) {
  auto c = std::make_shared<experiments::AttentionMapConfig>();
  CLI::App* cmd = app.add_subcommand("attention-map", "Write a checkpoint's per-head attention maps for one image as PNG");
  add_named_option(cmd, "resume", c->resume, "the checkpoint")->required();
  add_named_option(cmd, "image", c->image, "a .png / .jpg image, or an IDX images file (with --index); video models: a video file or frame folder");
  add_named_option(cmd, "index", c->index, "which image of the IDX file or of --dataset");
  add_named_option(cmd, "frame", c->frame, "video models: the frame of the clip whose spatial attention is shown");
  // The image from a dataset (with --index): --dataset and --data_path as finetune reads them.
  bind_train_config_fields(cmd, {{"dataset", &c->dataset}, {"data_path", &c->data_path}});
  add_named_option(cmd, "split", c->split, "train | test (with --dataset)");
  add_named_option(cmd, "stats", c->stats, "dataset whose mean/std normalise the image (default: --dataset, else fashion_mnist for "
                         "1-channel models, ImageNet's)");
  add_named_option(cmd, "output_dir", c->output_dir, "where the PNG files go")->required();
  add_named_option(cmd, "layer", c->layer, "layer (negative counts from the end; -1: the last)");
  add_named_option(cmd, "cls_size", c->cls_size, "side in pixels of the class-token maps");
  add_named_option(cmd, "matrix_scale", c->matrix_scale, "pixels per token of the N x N maps (0: side <= 600)");
  bind_train_config_fields(cmd, {{"threads", &c->threads}});
  cmd->callback([c] {
    const experiments::AttentionMapSummary s = experiments::run_attention_map(*c);
    std::cout << "wrote " << s.files.size() << " files to " << c->output_dir << " (layer " << s.layer << ", "
              << s.heads << " heads, " << s.grid << "x" << s.grid << " patch grid)\n"
              << s.to_json().dump() << std::endl;
  });
}

}  // namespace sparsevit::cli
