// The finetune / eval pipeline (MAE's main_finetune.py in C++): data -> ViT with the
// configured attention -> AdamW + cosine schedule + EMA -> metrics.jsonl, atomic
// checkpoints, and a final summary (top-1, attention GFLOPs, pruning ratio).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace sparsevit::train {

// Every field is a `sparsevit finetune` flag of the same name (and a key of --config YAML).
struct TrainConfig {
  // data
  std::string dataset = "fashion_mnist";
  std::string data_path;            // default: the dataset's standard location
  int64_t nb_classes = 0;           // 0: from the dataset
  int64_t max_train_samples = 0;    // 0: all
  int64_t max_eval_samples = 0;
  int64_t num_workers = 2;
  // model
  std::string model = "vit_nano_patch2_28";
  std::string attn_cfg;             // "" : the built-in Fibottention default
  std::vector<std::string> attn_set;  // NAME=VALUE mask kwarg overrides
  double drop_path = 0.1;
  // optimisation (DeiT recipe)
  int64_t epochs = 3;
  int64_t batch_size = 64;
  double blr = 1e-3;                // lr = blr * batch_size / 256 unless lr is set
  double lr = 0;                    // 0: from blr
  double min_lr = 1e-6;
  double warmup_epochs = 1;
  double weight_decay = 0.05;
  double opt_eps = 1e-6;
  double clip_grad = 0;             // 0: no clipping
  double smoothing = 0.1;
  // augmentation
  double mixup = 0;
  double cutmix = 0;
  double mixup_prob = 1.0;
  double mixup_switch_prob = 0.5;
  std::string aa = "";              // RandAugment string, e.g. rand-m9-mstd0.5-inc1 ("" or "none": off)
  double color_jitter = 0.0;
  std::string train_crop = "pad";   // pad (random crop with padding, small images) | rrc (RandomResizedCrop)
  // EMA
  bool model_ema = false;
  double model_ema_decay = 0.9999;
  // run
  std::string output_dir;           // "" : nothing written
  std::string log_dir;              // metrics.jsonl location (default: output_dir)
  std::string resume;               // checkpoint to resume from (or to evaluate with --eval)
  int64_t save_ckpt_freq = 0;       // also keep checkpoint-<epoch>.pt every N epochs (0: only the latest)
  int64_t start_epoch = 0;
  bool eval = false;
  int64_t seed = 0;
  int64_t threads = 0;              // 0: every core
  int64_t print_freq = 0;           // 0: progress bar decides
  // data parallelism (several processes started by torchrun / mpirun / scripts/launch, found
  // through RANK, WORLD_SIZE, MASTER_ADDR, ... in the environment; see train/distributed.h).
  // batch_size is per process: the global batch is batch_size * world_size.
  std::string dist_backend = "gloo";  // gloo | nccl
  std::string dist_url = "env://";    // env:// | tcp://HOST:PORT | file:///PATH
  double dist_timeout = 1800;         // seconds: rendezvous and every collective
  double dist_bucket_mb = 25;         // gradient allreduce bucket size
  bool dist_no_overlap = false;       // reduce gradients after backward instead of during it
};

struct TrainSummary {
  double test_acc1 = 0, test_acc5 = 0, test_loss = 0;
  double ema_acc1 = -1;             // -1 when EMA is off
  double attention_gflops = 0, attention_gflops_patch = 0, pruning_ratio = 0, density = 1;
  int64_t params = 0;
  int64_t epochs_run = 0;
  int64_t rank = 0, world_size = 1;  // this process in a data-parallel run (not in to_json)
  nlohmann::json to_json() const;
  // One readable line: top-1, attention GFLOPs, pruning ratio.
  std::string to_text() const;
};

// Checks values and fills derived defaults (data_path, lr); throws UsageError.
TrainConfig resolve(TrainConfig config);
nlohmann::json config_to_json(const TrainConfig& config);

// Trains (or, with config.eval, only evaluates) and returns the final numbers.
TrainSummary run_finetune(const TrainConfig& config);

}  // namespace sparsevit::train
