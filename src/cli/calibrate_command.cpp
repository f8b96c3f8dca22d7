// `sparsevit calibrate --resume CKPT --attn-cfg configs/attention/vit_pruning.yaml`: the
// static-pruning calibration pass (mean attention maps of a trained dense model -> .npy).
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "experiments/calibration.h"

namespace sparsevit::cli {

void register_calibrate_command(CLI::App& app) {
  auto c = std::make_shared<experiments::CalibrateConfig>();
  CLI::App* cmd = app.add_subcommand(
      "calibrate", "Average a trained model's attention maps into the scores file of a `mask: pruning` config");
  auto opt = [cmd](const std::string& name, auto& field, const std::string& help) {
    return cmd->add_option(option_names(name), field, help)->capture_default_str();
  };
  opt("resume", c->resume, "checkpoint of the trained (dense) model")->required();
  opt("attn-cfg", c->attn_cfg, "the pruning config (mask: pruning) to calibrate")->required();
  opt("output", c->output, "where the .npy scores go (default: the config's mask_kwargs.scores_file)");
  opt("dataset", c->dataset, "fashion_mnist | mnist | cifar10 | cifar100 | image_folder");
  opt("data_path", c->data_path, "dataset folder (default: the dataset's standard location)");
  opt("split", c->split, "train | test: which images to calibrate on");
  opt("max_samples", c->max_samples, "calibrate on the first N images (0: all)");
  opt("batch_size", c->batch_size, "batch size");
  opt("num_workers", c->num_workers, "data loading threads");
  opt("threads", c->threads, "CPU threads for LibTorch (0: every core)");
  opt("seed", c->seed, "random seed");
  cmd->callback([c] {
    const experiments::CalibrateSummary s = experiments::run_calibrate(*c);
    std::cout << s.to_text() << "\n" << s.to_json().dump() << std::endl;
  });
}

}  // namespace sparsevit::cli
