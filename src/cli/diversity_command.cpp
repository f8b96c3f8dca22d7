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
  auto opt = [cmd](const std::string& name, auto& field, const std::string& help) {
    return cmd->add_option(option_names(name), field, help)->capture_default_str();
  };
  opt("resume", c.resume, "the checkpoint")->required();
  opt("dataset", c.dataset, "fashion_mnist | mnist | cifar10 | cifar100 | image_folder");
  opt("data_path", c.data_path, "dataset folder (default: the dataset's standard location)");
  opt("split", c.split, "train | test");
  opt("limit", c.limit, "the first N (class-balanced) images (0: all)");
  opt("batch_size", c.batch_size, "batch size");
  opt("num_workers", c.num_workers, "data loading threads");
  opt("threads", c.threads, "CPU threads for LibTorch (0: every core)");
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
