// `sparsevit diversity --resume CKPT`: the head-diversity statistic of a trained model.
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "experiments/head_diversity.h"

namespace sparsevit::cli {

void register_diversity_command(CLI::App& app) {
  struct State {
    experiments::DiversityConfig config;
    bool json = false;
  };
  auto s = std::make_shared<State>();
  experiments::DiversityConfig& c = s->config;
  CLI::App* cmd = app.add_subcommand(
      "diversity", "Head diversity of a checkpoint: per image, mean over head pairs of |Yi-Yj|/(|Yi|+|Yj|), last layer");
  add_named_option(cmd, "resume", c.resume, "the checkpoint")->required();
  bind_train_config_fields(cmd, {{"dataset", &c.dataset}, {"data_path", &c.data_path}});
  add_named_option(cmd, "split", c.split, "train | test");
  add_named_option(cmd, "limit", c.limit, "the first N (class-balanced) images (0: all)");
  bind_train_config_fields(cmd, {{"batch_size", &c.batch_size}, {"num_workers", &c.num_workers}, {"threads", &c.threads}});
  cmd->add_flag("--json", s->json, "print only the JSON summary");
  cmd->callback([s] {
    experiments::DiversityConfig c = s->config;
    if (s->json) c.progress = false;
    const experiments::DiversitySummary summary = experiments::run_diversity(c);
    if (!s->json) std::cout << summary.to_text() << " (quartiles: linear interpolation, numpy's default)\n";
    std::cout << summary.to_json().dump() << std::endl;
  });
}

}  // namespace sparsevit::cli
