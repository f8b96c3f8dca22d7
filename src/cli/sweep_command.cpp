// `sparsevit sweep --configs configs/attention/*.yaml --seeds 0,1,2 ...`: every config trained
// with one recipe (finetune's flags), resumable, then report.md / report.json / PNG plots.
#include <iostream>
#include <memory>

#include "cli/commands.h"
#include "experiments/sweep.h"

namespace sparsevit::cli {

void register_sweep_command(CLI::App& app) {
  struct State {
    experiments::SweepConfig config;
    std::string seeds = "0";
  };
  auto s = std::make_shared<State>();
  s->config.recipe.num_workers = 1;  // per run; the cores go to the compute
  CLI::App* cmd = app.add_subcommand(
      "sweep", "Train every attention config with one recipe and seeds; write report.md, report.json and plots");
  auto opt = [cmd](const std::string& name, auto& field, const std::string& help) {
    return cmd->add_option(option_names(name), field, help)->capture_default_str();
  };
  train::TrainConfig& r = s->config.recipe;
  cmd->add_option("--configs", s->config.configs, "attention config YAMLs (one report row each)")->required();
  opt("seeds", s->seeds, "comma-separated seeds; a seed fixes the data order for every config");
  opt("output_dir", s->config.output_dir, "runs go to <output_dir>/<config stem>/seed<k>; reports here");
  opt("diversity_limit", s->config.diversity_limit,
      "eval images for the head-diversity statistic (0: all, -1: skip; capped by max_eval_samples)");
  // The shared recipe: finetune's flags of the same names.
  opt("dataset", r.dataset, "fashion_mnist | mnist | cifar10 | cifar100 | image_folder");
  opt("data_path", r.data_path, "dataset folder (default: the dataset's standard location)");
  opt("nb_classes", r.nb_classes, "number of classes (0: from the dataset)");
  opt("model", r.model, "model name (timm naming, e.g. vit_nano_patch4_28)");
  cmd->add_option("--attn-set,--attn_set", r.attn_set, "override a kwarg in every config: NAME=VALUE (repeatable)");
  opt("epochs", r.epochs, "training epochs per run");
  opt("batch_size", r.batch_size, "batch size");
  opt("blr", r.blr, "base learning rate: lr = blr * batch_size / 256");
  opt("lr", r.lr, "absolute learning rate (overrides blr)");
  opt("min_lr", r.min_lr, "lower bound of the cosine schedule");
  opt("warmup_epochs", r.warmup_epochs, "linear warm-up epochs");
  opt("weight_decay", r.weight_decay, "AdamW weight decay");
  opt("opt_eps", r.opt_eps, "AdamW epsilon");
  opt("clip_grad", r.clip_grad, "clip the gradient norm (0: off)");
  opt("smoothing", r.smoothing, "label smoothing");
  opt("drop_path", r.drop_path, "stochastic depth rate");
  opt("mixup", r.mixup, "mixup alpha (0: off)");
  opt("cutmix", r.cutmix, "cutmix alpha (0: off)");
  opt("aa", r.aa, "RandAugment policy, timm syntax (empty: off)");
  opt("color_jitter", r.color_jitter, "colour jitter strength (0: off)");
  opt("train_crop", r.train_crop, "pad | rrc | none");
  cmd->add_flag(option_names("model_ema"), r.model_ema, "keep an EMA of the weights and evaluate it too");
  opt("max_train_samples", r.max_train_samples, "use only the first N training samples (0: all)");
  opt("max_eval_samples", r.max_eval_samples, "use only the first N evaluation samples (0: all)");
  opt("num_workers", r.num_workers, "data loading threads");
  opt("threads", r.threads, "CPU threads for LibTorch (0: every core)");
  opt("print_freq", r.print_freq, "progress lines per epoch when not on a terminal (0: auto)");
  cmd->callback([s, cmd] {
    experiments::SweepConfig c = s->config;
    c.seeds = experiments::parse_seed_list(s->seeds);
    // The options given, for report.md.
    std::string line = "sparsevit sweep";
    for (const CLI::Option* o : cmd->get_options()) {
      if (o->count() == 0 || o->get_lnames().empty()) continue;
      line += " --" + o->get_lnames().front();
      for (const std::string& v : o->results()) line += o->get_expected_min() == 0 ? "" : " " + v;
    }
    c.command_line = line;
    const experiments::SweepResult result = experiments::run_sweep(c);
    std::cout << "sweep: " << result.rows.size() << " configs, " << result.runs_trained << " runs trained, "
              << result.runs_reused << " reused, " << result.skipped.size() << " skipped\n";
    for (const auto& f : result.files) std::cout << "wrote " << f << "\n";
    std::cout << experiments::sweep_report_json(c, result).dump() << std::endl;
  });
}

}  // namespace sparsevit::cli
