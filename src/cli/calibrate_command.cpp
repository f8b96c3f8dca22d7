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
  add_named_option(cmd, "resume", c->resume, "checkpoint of the trained (dense) model")->required();
  add_named_option(cmd, "attn-cfg", c->attn_cfg, "the pruning config (mask: pruning) to calibrate")->required();
  add_named_option(cmd, "output", c->output, "where the .npy scores go (default: the config's mask_kwargs.scores_file)");
  bind_train_config_fields(cmd, {{"dataset", &c->dataset}, {"data_path", &c->data_path}});
  add_named_option(cmd, "split", c->split, "train | test: which images to calibrate on");
  add_named_option(cmd, "max_samples", c->max_samples, "calibrate on the first N images (0: all)");
  bind_train_config_fields(cmd, {{"batch_size", &c->batch_size}, {"num_workers", &c->num_workers},
                                 {"threads", &c->threads}, {"seed", &c->seed}});
  cmd->callback([c] {
    const experiments::CalibrateSummary s = experiments::run_calibrate(*c);
    std::cout << s.to_text() << "\n" << s.to_json().dump() << std::endl;
  });
}

}  // namespace sparsevit::cli
