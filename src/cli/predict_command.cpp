// `sparsevit predict (--resume CKPT | --weights FILE --model NAME ...) --input X [--output logits.npy]
// [--topk 5]`: logits and top-k classes of images, an image folder or a ready-made .npy tensor.
#include <iostream>
#include <memory>

#include "cli/commands.h"
#include "inference/predict.h"

namespace sparsevit::cli {

void register_predict_command(CLI::App& app) {
  auto p = std::make_shared<inference::PredictOptions>();
  p->model.dataset = "imagenet";  // normalisation of image inputs for published weights
  p->model.model = "vit_base_patch16_224";
  p->model.threads = 0;
  CLI::App* cmd = app.add_subcommand("predict", "Logits and top-k classes of a trained or published ViT");
  add_named_option(cmd, "resume", p->resume, "a sparsevit checkpoint (model, attention and shape as trained)");
  add_named_option(cmd, "weights", p->weights, "or a safetensors / .pth file with timm names (with --model)");
  add_named_option(cmd, "input", p->input,
                   "an image, a folder of images, or a float32 .npy [B, C, H, W] used as is; video models: a video "
                   "file, a folder of frames, or a float32 .npy [B, C, T, H, W]")
      ->required();
  add_named_option(cmd, "output", p->output, "write the logits [B, K] here as float32 .npy");
  add_named_option(cmd, "topk", p->topk, "classes printed per input");
  add_train_config_fields(cmd, p->model,
                          {"model", "nb_classes", "attn_cfg", "attn_set", "input_size", "patch_size", "embed_dim", "depth",
                           "num_heads", "global_pool", "dataset", "batch_size", "threads", "device", "num_frames",
                           "attention_type", "temporal_attn_cfg", "sampling_rate", "target_fps", "test_num_clips",
                           "test_num_crops"});
  cmd->callback([p] {
    const inference::Predictions predictions = inference::run_predict(*p);
    std::cout << inference::format_topk(predictions, p->topk) << std::flush;
  });
}

}  // namespace sparsevit::cli
