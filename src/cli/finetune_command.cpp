// `sparsevit finetune` / `sparsevit eval`: MAE main_finetune.py's flags (both --batch_size and
// --batch-size spellings), optionally read from `--config experiment.yaml` (same key names;
// flags on the command line override the file).
#include <yaml-cpp/yaml.h>

#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "train/trainer.h"
#include "util/did_you_mean.h"
#include "util/errors.h"

namespace sparsevit::cli {
namespace {

struct TrainCommand {
  train::TrainConfig config;
  std::string config_file;
};

}  // namespace

// The recipe: what every run of an experiment shares (finetune and sweep take the same flags).
void add_recipe_options(CLI::App* cmd, train::TrainConfig& c) {
  auto opt = [cmd](const std::string& name, auto& field, const std::string& help) {
    return cmd->add_option(option_names(name), field, help)->capture_default_str();
  };
  opt("dataset", c.dataset, "fashion_mnist | mnist | cifar10 | cifar100 | image_folder");
  opt("data_path", c.data_path, "dataset folder (default: the dataset's standard location)");
  opt("nb_classes", c.nb_classes, "number of classes (0: from the dataset)");
  opt("max_train_samples", c.max_train_samples, "use only the first N training samples (0: all)");
  opt("max_eval_samples", c.max_eval_samples, "use only the first N evaluation samples (0: all)");
  opt("num_workers", c.num_workers, "data loading threads");
  opt("model", c.model, "model name (timm naming, e.g. vit_tiny_patch2_28)");
  cmd->add_option("--attn-set,--attn_set", c.attn_set, "override a mask kwarg: NAME=VALUE (repeatable)");
  opt("drop_path", c.drop_path, "stochastic depth rate");
  opt("epochs", c.epochs, "training epochs");
  opt("batch_size", c.batch_size, "batch size per process (global batch: batch_size * world size)");
  opt("blr", c.blr, "base learning rate: lr = blr * batch_size * world_size / 256");
  opt("lr", c.lr, "absolute learning rate (overrides blr)");
  opt("min_lr", c.min_lr, "lower bound of the cosine schedule");
  opt("warmup_epochs", c.warmup_epochs, "linear warm-up epochs");
  opt("weight_decay", c.weight_decay, "AdamW weight decay");
  opt("opt_eps", c.opt_eps, "AdamW epsilon");
  opt("clip_grad", c.clip_grad, "clip the gradient norm (0: off)");
  opt("smoothing", c.smoothing, "label smoothing");
  opt("mixup", c.mixup, "mixup alpha (0: off)");
  opt("cutmix", c.cutmix, "cutmix alpha (0: off)");
  opt("mixup_prob", c.mixup_prob, "probability of applying mixup or cutmix to a batch");
  opt("mixup_switch_prob", c.mixup_switch_prob, "probability of cutmix instead of mixup when both are on");
  opt("aa", c.aa, "RandAugment policy, timm syntax (e.g. rand-m9-mstd0.5-inc1; empty: off)");
  opt("color_jitter", c.color_jitter, "colour jitter strength (0: off)");
  opt("train_crop", c.train_crop, "pad (random crop with padding) | rrc (RandomResizedCrop) | none (flip only)");
  cmd->add_flag(option_names("model_ema"), c.model_ema, "keep an EMA of the weights and evaluate it too");
  opt("model_ema_decay", c.model_ema_decay, "EMA decay");
  opt("threads", c.threads, "CPU threads for LibTorch (0: every core)");
  opt("print_freq", c.print_freq, "progress lines per epoch when not on a terminal (0: auto)");
}

namespace {

// The recipe plus what one run has of its own: attention config, output, resume, seed, distribution.
void add_train_options(CLI::App* cmd, train::TrainConfig& c) {
  add_recipe_options(cmd, c);
  auto opt = [cmd](const std::string& name, auto& field, const std::string& help) {
    return cmd->add_option(option_names(name), field, help)->capture_default_str();
  };
  opt("attn-cfg", c.attn_cfg, "attention config YAML (default: built-in Fibottention)");
  opt("output_dir", c.output_dir, "where checkpoints, metrics.jsonl and the resolved config go");
  opt("log_dir", c.log_dir, "where metrics.jsonl goes (default: output_dir)");
  opt("resume", c.resume, "checkpoint to resume from");
  opt("save_ckpt_freq", c.save_ckpt_freq, "also keep checkpoint-<epoch>.pt every N epochs (0: only the latest)");
  opt("start_epoch", c.start_epoch, "first epoch (when resuming an old checkpoint)");
  cmd->add_flag(option_names("eval"), c.eval, "only evaluate (with --resume)");
  opt("seed", c.seed, "random seed");
  // Data parallelism: active when a launcher (scripts/launch, torchrun, mpirun) sets RANK /
  // WORLD_SIZE (or OMPI_COMM_WORLD_*) to more than one process.
  opt("dist_backend", c.dist_backend, "distributed backend: gloo (CPU) | nccl (LibTorch CUDA builds)")
      ->check(CLI::IsMember({"gloo", "nccl"}));
  opt("dist_url", c.dist_url, "rendezvous: env:// (MASTER_ADDR:MASTER_PORT) | tcp://HOST:PORT | file:///PATH");
  opt("dist_timeout", c.dist_timeout, "seconds a rendezvous or collective may wait for the other processes");
  opt("dist_bucket_mb", c.dist_bucket_mb, "gradient allreduce bucket size in MB");
  cmd->add_flag(option_names("dist_no_overlap"), c.dist_no_overlap,
                "average gradients after backward instead of overlapping with it");
}

// Applies `--config FILE` before the command line is parsed, through the options themselves,
// so the file gets the same conversions and checks as the flags.
void apply_config_file(CLI::App* cmd, const std::string& path) {
  YAML::Node root;
  try {
    root = YAML::LoadFile(path);
  } catch (const YAML::BadFile&) {
    throw UsageError("cannot read --config file '" + path + "'");
  } catch (const YAML::Exception& e) {
    throw UsageError(path + ":" + std::to_string(e.mark.line + 1) + ": invalid YAML: " + e.msg);
  }
  if (root.IsNull()) return;
  if (!root.IsMap()) throw UsageError(path + ": expected a mapping of flag names to values");
  std::vector<std::string> known;
  for (const CLI::Option* o : cmd->get_options())
    for (const auto& n : o->get_lnames()) known.push_back(n);
  for (const auto& item : root) {
    const std::string key = item.first.as<std::string>();
    const std::string where = path + ":" + std::to_string(item.first.Mark().line + 1);
    CLI::Option* o = cmd->get_option_no_throw("--" + key);
    if (o == nullptr || key == "config" || key == "help")
      throw UsageError(where + ": " + unknown_name_message("key", key, known));
    std::vector<std::string> values;
    if (item.second.IsSequence()) {
      for (const auto& v : item.second) values.push_back(v.as<std::string>());
    } else if (item.second.IsScalar()) {
      values.push_back(item.second.Scalar());
    } else {
      throw UsageError(where + ": '" + key + "' must be a value or a list");
    }
    try {
      for (const auto& v : values) o->add_result(v);
      o->run_callback();
    } catch (const CLI::ParseError& e) {
      throw UsageError(where + ": " + key + ": " + e.what());
    }
    o->clear();  // a flag given on the command line still overrides the file
  }
}

void register_train_command(CLI::App& app, const std::string& name, const std::string& help, bool eval_only) {
  auto state = std::make_shared<TrainCommand>();
  CLI::App* cmd = app.add_subcommand(name, help);
  add_train_options(cmd, state->config);
  cmd->add_option("--config", state->config_file, "experiment YAML whose keys are these flags' names");
  cmd->callback([state, eval_only] {
    train::TrainConfig c = state->config;
    if (eval_only) c.eval = true;
    const train::TrainSummary summary = train::run_finetune(c);
    if (summary.rank != 0) return;  // data-parallel runs: rank 0 reports
    std::cout << summary.to_text() << "\n" << summary.to_json().dump() << std::endl;
  });
}

}  // namespace

void register_finetune_command(CLI::App& app) {
  register_train_command(app, "finetune", "Train a ViT with the configured attention (DeiT recipe)", false);
  register_train_command(app, "eval", "Evaluate a checkpoint (--resume) on the test split", true);
}

void apply_train_config_file(CLI::App& app, int argc, char** argv) {
  // `sparsevit finetune ... --config F ...`: load F into the options first.
  if (argc < 2 || (std::string(argv[1]) != "finetune" && std::string(argv[1]) != "eval")) return;
  CLI::App* cmd = app.get_subcommand(argv[1]);
  for (int i = 2; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--config" && i + 1 < argc) return apply_config_file(cmd, argv[i + 1]);
    if (a.rfind("--config=", 0) == 0) return apply_config_file(cmd, a.substr(9));
  }
}

}  // namespace sparsevit::cli
