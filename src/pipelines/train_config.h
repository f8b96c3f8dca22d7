// The training configuration and its one list of fields. `for_each_field` is the only place a
// field is named: the CLI flags (both spellings), the `--config` YAML keys, `config.json`, the
// sweep's recipe and the range checks are all generated from it.
#pragma once

#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "models/stem_names.h"

namespace sparsevit::pipelines {

struct TrainConfig {
  // data
  std::string dataset = "auto";      // auto: from --data_path's layout (data::resolve_dataset_name)
  std::string data_path;            // default: the dataset's standard location
  int64_t nb_classes = 0;           // 0: from the dataset
  int64_t input_size = 0;           // 0: the model's image size
  int64_t max_train_samples = 0;    // 0: all
  int64_t max_eval_samples = 0;
  int64_t num_workers = 2;
  // model
  std::string model = "vit_nano_patch2_28";
  std::string attn_cfg;             // "" : the built-in Fibottention default
  std::vector<std::string> attn_set;  // NAME=VALUE mask kwarg overrides
  double drop_path = 0.1;
  int64_t patch_size = 0, embed_dim = 0, depth = 0, num_heads = 0;  // 0: the model's
  bool global_pool = false;         // mean of patch tokens + fc_norm (MAE finetuning) instead of the class token
  std::string stem = "patch";       // patch: patchify conv | conv: early-convolution stem (models/conv_stem.h)
  std::string finetune;             // initial weights: pretrain checkpoint, safetensors or .pth (timm / MAE names)
  // video models (TimeSformer)
  int64_t num_frames = 0;           // frames per clip (0: the model's)
  int64_t sampling_rate = 0;        // stride between sampled frames (0: 2 on moving_fashion_mnist, else TimeSformer's 8)
  double target_fps = 30;           // the frame rate sampling_rate counts in
  std::string attention_type = "divided_space_time";
  std::string temporal_attn_cfg;    // attention config of the temporal attention ("" : dense)
  int64_t test_num_clips = 1;       // test views: temporal clips x spatial crops, logits averaged per video
  int64_t test_num_crops = 1;
  // MAE pretraining (sparsevit pretrain)
  double mask_ratio = 0.75;
  bool norm_pix_loss = false;
  int64_t decoder_embed_dim = 0, decoder_depth = 0, decoder_num_heads = 0;  // 0: the model's default decoder
  std::string decoder_attn_cfg;     // "" : the encoder's attention config
  std::string save_recon;           // folder for reconstruction PNGs after training ("" : none)
  // diffusion policy (sparsevit policy train / eval; Diffusion Policy's PushT image recipe)
  int64_t obs_horizon = 2;          // observations the policy sees
  int64_t pred_horizon = 16;        // actions it predicts
  int64_t action_horizon = 8;       // actions executed per prediction
  std::string down_dims = "256,512,1024";  // the U-Net's channels per level
  int64_t step_embed_dim = 128;     // diffusion step embedding
  int64_t inference_steps = 100;    // 100: DDPM over every step (DP); fewer: DDIM
  double crossway_weight = 0;       // Crossway Diffusion's reconstruction loss weight (0: plain DP)
  double pose_weight = 0;           // auxiliary block-pose regression from the readout (0: off)
  std::string crossway_input = "mid";  // mid: the U-Net's mid features (the paper) | obs: the observation features
  std::string obs_type = "image";   // image: ViT encoder + agent position | lowdim: agent position + block pose, no encoder
  std::string obs_readout = "spatial_softmax";  // the encoder's readout (policy/observation_readout.h) | cls | ...
  int64_t num_kp = 32;              // spatial softmax keypoints (Diffusion Policy / robomimic: 32)
  int64_t obs_shift = 4;            // training frames shifted by up to +-N px of the encoder's input (0: off)
  int64_t probe_batches = 4;        // image probe after training: batches of windows (0: none)
  int64_t eval_episodes = 50;       // closed-loop episodes after training and in `policy eval`
  int64_t eval_seed = 100000;       // episode i starts from reset(eval_seed + i)
  int64_t eval_train_episodes = 0;  // closed-loop episodes on the demonstrations' seeds 0.. (fitting vs generalising)
  int64_t val_batches = 8;          // validation loss each epoch on the held-out episodes (--max_train_samples)
  std::string save_video;           // folder for rollout videos ("" : none; .mp4 per episode, or PNG frames)
  bool freeze_encoder = false;      // keep the encoder (from --finetune) fixed: no gradient, BatchNorm in eval mode
  // optimisation (DeiT recipe)
  int64_t epochs = 3;
  int64_t batch_size = 64;
  int64_t accum_iter = 1;           // optimizer step every accum_iter batches (MAE)
  double blr = 1e-3;                // lr = blr * batch_size * accum_iter * world / 256 unless lr is set
  double lr = 0;                    // 0: from blr
  double min_lr = 1e-6;
  double warmup_epochs = 1;
  double weight_decay = 0.05;
  double opt_eps = 1e-6;
  double clip_grad = 0;             // 0: no clipping
  double layer_decay = 1.0;         // layer-wise lr decay (MAE's --layer_decay; 1: off)
  double smoothing = 0.1;
  // augmentation
  double mixup = 0;
  double cutmix = 0;
  double mixup_prob = 1.0;
  double mixup_switch_prob = 0.5;
  std::string aa = "";              // RandAugment string, e.g. rand-m9-mstd0.5-inc1 ("" or "none": off)
  double color_jitter = 0.0;
  std::string train_crop = "auto";  // auto | pad | rrc | none
  double reprob = 0;                // random erasing probability (timm)
  std::string remode = "pixel";     // pixel | rand | const
  int64_t recount = 1;              // erase 1..recount boxes
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
  bool dist_eval = false;           // MAE's flag: evaluation is always sharded over the ranks here
  std::string device = "cpu";       // cpu (this build trains on the CPU)
  int64_t seed = 0;
  std::string amp = "none";         // none | bf16: autocast the forward's GEMMs to bfloat16
  int64_t threads = 0;              // 0: every core (shared among the processes on this machine)
  int64_t print_freq = 0;           // 0: progress bar decides
  // data parallelism (processes started by torchrun / mpirun / scripts/launch, found through
  // RANK, WORLD_SIZE, MASTER_ADDR, ...; see distributed/). batch_size is per process.
  std::string dist_backend = "gloo";  // gloo | nccl
  std::string dist_url = "env://";    // env:// | tcp://HOST:PORT | file:///PATH
  double dist_timeout = 1800;         // seconds: rendezvous and every collective
  double dist_bucket_mb = 25;         // gradient allreduce bucket size
  bool dist_no_overlap = false;       // reduce gradients after backward instead of during it
};

// recipe: what every run of an experiment shares (finetune and sweep take these);
// run: what one run has of its own (attention config, output, resume, seed, distribution).
enum class FieldGroup { recipe, run };

// The commands a field belongs to (a bit mask): finetune/eval/sweep, and MAE's pretrain.
// kPolicy: the diffusion policy's train / eval (sparsevit policy).
enum Command : unsigned { kFinetune = 1, kPretrain = 2, kPolicy = 4, kAllCommands = 7 };
inline constexpr unsigned kImageCommands = kFinetune | kPretrain;  // fields about image datasets

// A field's name (flag, YAML key and JSON key), help text and allowed values.
struct FieldInfo {
  const char* name = "";
  const char* help = "";
  FieldGroup group = FieldGroup::recipe;
  double min = -std::numeric_limits<double>::infinity();
  double max = std::numeric_limits<double>::infinity();
  bool min_inclusive = true, max_inclusive = true;
  std::vector<std::string> choices;  // for strings; empty: any text
  unsigned commands = kAllCommands;
  FieldInfo only(unsigned command_mask) const {
    FieldInfo f = *this;
    f.commands = command_mask;
    return f;
  }
};

namespace field {
FieldInfo any(const char* name, const char* help, FieldGroup group = FieldGroup::recipe);
FieldInfo positive(const char* name, const char* help, FieldGroup group = FieldGroup::recipe);
FieldInfo non_negative(const char* name, const char* help, FieldGroup group = FieldGroup::recipe);
FieldInfo at_least_one(const char* name, const char* help, FieldGroup group = FieldGroup::recipe);
FieldInfo unit_interval(const char* name, const char* help, bool max_inclusive);  // [0, 1] or [0, 1)
FieldInfo one_of(const char* name, const char* help, std::vector<std::string> choices,
                 FieldGroup group = FieldGroup::recipe);
}  // namespace field

// Calls visit(value, FieldInfo) for every field, in the order of --help and config.json.
// Config is TrainConfig or const TrainConfig.
template <class Config, class Visitor>
void for_each_field(Config& c, Visitor&& visit) {
  using namespace field;
  constexpr FieldGroup run = FieldGroup::run;
  visit(c.dataset, any("dataset", "auto (fashion_mnist, or from --data_path's layout) | fashion_mnist | fashion_mnist_frames (its garments as "
                                  "moving_fashion_mnist's frames show them) | mnist | cifar10 | "
                                  "cifar100 | image_folder | imagenet (train/ + val/ class folders) | demonstrations (pretrain: the camera frames of "
                                  "a .episodes file or Diffusion Policy's .zarr folder, picked by auto too); video models: "
                                  "auto (moving_fashion_mnist, or video_list with --data_path) | moving_fashion_mnist | "
                                  "moving_fashion_mnist_order (which garment moves first) | video_list (TimeSformer's train.csv / test.csv)").only(kImageCommands));
  visit(c.data_path, any("data_path", "dataset folder (default: the dataset's standard location); policy: the "
                                      "demonstrations (a .episodes file or Diffusion Policy's .zarr folder)"));
  visit(c.nb_classes, non_negative("nb_classes", "number of classes (0: from the dataset)").only(kFinetune));
  visit(c.input_size, non_negative("input_size", "image size the model takes (0: the model's)"));
  visit(c.max_train_samples, non_negative("max_train_samples", "use only the first N training samples (policy and "
                                                               "demonstration frames: episodes) (0: all)"));
  visit(c.max_eval_samples, non_negative("max_eval_samples", "use only the first N evaluation samples (0: all)").only(kFinetune));
  visit(c.num_workers, non_negative("num_workers", "data loading threads").only(kImageCommands));
  visit(c.model, any("model", "model name (timm naming, e.g. vit_tiny_patch2_28)"));
  visit(c.attn_cfg, any("attn_cfg", "attention config YAML (default: built-in Fibottention)", run));
  visit(c.attn_set, any("attn_set", "override a mask kwarg: NAME=VALUE (repeatable)"));
  visit(c.drop_path, unit_interval("drop_path", "stochastic depth rate", false).only(kFinetune | kPolicy));
  visit(c.patch_size, non_negative("patch_size", "patch size (0: the model's)"));
  visit(c.embed_dim, non_negative("embed_dim", "embedding width (0: the model's)"));
  visit(c.depth, non_negative("depth", "number of blocks (0: the model's)"));
  visit(c.num_heads, non_negative("num_heads", "attention heads (0: the model's)"));
  visit(c.global_pool, any("global_pool", "classify the mean of the patch tokens through fc_norm (MAE finetuning) "
                                          "instead of the class token").only(kFinetune | kPolicy));
  visit(c.stem, one_of("stem", "how images become patch tokens: patch (a conv with kernel = stride = patch size, ViT) | "
                               "conv (3x3 stride-2 convs with BatchNorm + ReLU, then a 1x1 conv: \"Early convolutions "
                               "help transformers see better\"; the same patch grid)",
                       models::stem_names()));
  // A recipe field: a sweep starts every run from the same weights (the video demo's image ViT).
  visit(c.finetune, any("finetune", "initial weights: a pretrain checkpoint, safetensors or .pth with timm/MAE names "
                                    "(policy: the encoder's; the decoder and heads are dropped)")
                        .only(kFinetune | kPolicy));
  visit(c.num_frames, non_negative("num_frames", "video models: frames per clip (0: the model's)").only(kFinetune));
  visit(c.sampling_rate, non_negative("sampling_rate", "video models: stride between sampled frames at target_fps "
                                                       "(0: 2 on moving_fashion_mnist, else 8 as TimeSformer)").only(kFinetune));
  visit(c.target_fps, positive("target_fps", "video models: the frame rate sampling_rate counts in").only(kFinetune));
  visit(c.attention_type, one_of("attention_type", "video models: divided_space_time | space_only | joint_space_time",
                                 {"divided_space_time", "space_only", "joint_space_time"}).only(kFinetune));
  visit(c.temporal_attn_cfg, any("temporal_attn_cfg", "video models: attention config YAML of the temporal attention "
                                                      "(default: dense)", run).only(kFinetune));
  visit(c.test_num_clips, at_least_one("test_num_clips", "video models: temporal views per test video").only(kFinetune));
  visit(c.test_num_crops, at_least_one("test_num_crops", "video models: spatial crops per test view (1: centre, 3: "
                                                        "left/centre/right)").only(kFinetune));
  visit(c.mask_ratio, unit_interval("mask_ratio", "fraction of patches masked", false).only(kPretrain));
  visit(c.norm_pix_loss, any("norm_pix_loss", "reconstruct per-patch normalised pixels").only(kPretrain));
  visit(c.decoder_embed_dim, non_negative("decoder_embed_dim", "decoder width (0: the model's default)").only(kPretrain));
  visit(c.decoder_depth, non_negative("decoder_depth", "decoder blocks (0: the model's default)").only(kPretrain));
  visit(c.decoder_num_heads, non_negative("decoder_num_heads", "decoder heads (0: the model's default)").only(kPretrain));
  visit(c.decoder_attn_cfg, any("decoder_attn_cfg", "attention config YAML of the decoder (default: --attn_cfg)", run)
                                .only(kPretrain));
  visit(c.save_recon, any("save_recon", "write original / masked / reconstruction PNGs of a few images here", run)
                          .only(kPretrain));
  visit(c.obs_horizon, at_least_one("obs_horizon", "observation steps the policy sees").only(kPolicy));
  visit(c.pred_horizon, at_least_one("pred_horizon", "action steps the policy predicts").only(kPolicy));
  visit(c.action_horizon, at_least_one("action_horizon", "action steps executed per prediction").only(kPolicy));
  visit(c.down_dims, any("down_dims", "the U-Net's channels per level, comma-separated").only(kPolicy));
  visit(c.step_embed_dim, at_least_one("step_embed_dim", "diffusion step embedding width").only(kPolicy));
  visit(c.inference_steps, at_least_one("inference_steps", "denoising steps when acting: 100 runs DDPM over every "
                                                          "training step (Diffusion Policy), fewer run DDIM").only(kPolicy));
  visit(c.crossway_weight, non_negative("crossway_weight", "Crossway Diffusion's image reconstruction loss weight (0: "
                                                          "the plain diffusion policy; the paper: 0.1)").only(kPolicy));
  visit(c.pose_weight, non_negative("pose_weight", "auxiliary loss weight of a linear head regressing each frame's block "
                                                   "pose from its readout, supervised by the demonstrations' states "
                                                   "(0: off; evaluation does not use it)").only(kPolicy));
  visit(c.crossway_input, one_of("crossway_input", "what Crossway decodes: mid (the U-Net's mid features, the paper) | "
                                                   "obs (the observation features, the released configs)",
                                 {"mid", "obs"}).only(kPolicy));
  visit(c.obs_type, one_of("obs_type", "what the policy observes: image (the ViT encoder's readout of each frame + "
                                       "the agent position) | lowdim (agent position + block pose, no encoder: the "
                                       "baseline that needs no vision)",
                           {"image", "lowdim"}).only(kPolicy));
  visit(c.obs_readout, one_of("obs_readout", "how the U-Net reads each frame's ViT tokens: spatial_softmax "
                                             "(Diffusion Policy's keypoints over the patch grid) | attention_pool "
                                             "(learned queries over the patch tokens) | flatten (a linear map of all "
                                             "patch tokens) | cls (the class token)",
                              {"spatial_softmax", "attention_pool", "flatten", "cls"}).only(kPolicy));
  visit(c.num_kp, at_least_one("num_kp", "spatial_softmax: keypoints (channels of the 1x1 projection)").only(kPolicy));
  visit(c.obs_shift, non_negative("obs_shift", "Diffusion Policy's random crop as a shift: training frames move by up "
                                               "to +-N pixels of the encoder's input, edges repeated; evaluation sees "
                                               "them unshifted (0: off)").only(kPolicy));
  visit(c.probe_batches, non_negative("probe_batches", "after training, the image probe's loss on this many batches "
                                                       "of held-out windows (0: none)", run).only(kPolicy));
  visit(c.eval_episodes, non_negative("eval_episodes", "closed-loop PushT episodes after training (0: none)", run)
                             .only(kPolicy));
  visit(c.eval_seed, non_negative("eval_seed", "episode i starts from reset(eval_seed + i)", run).only(kPolicy));
  visit(c.eval_train_episodes, non_negative("eval_train_episodes", "also evaluate on this many training seeds (the "
                                                                   "demonstrations' seeds 0..; eval_train.json)", run)
                                   .only(kPolicy));
  visit(c.val_batches, non_negative("val_batches", "validation loss each epoch on this many batches of the episodes "
                                                   "--max_train_samples leaves out; the best epoch is kept as "
                                                   "checkpoint-best.pt and evaluated (0: none)", run)
                           .only(kPolicy));
  visit(c.save_video, any("save_video", "write rollout videos here (.mp4 per episode; a folder ending in /png: PNG "
                                        "frames)", run).only(kPolicy));
  visit(c.freeze_encoder, any("freeze_encoder", "train the policy with the encoder from --finetune held fixed (no "
                                                "gradient; BatchNorm statistics frozen)").only(kPolicy));
  visit(c.epochs, non_negative("epochs", "training epochs"));
  visit(c.batch_size, positive("batch_size", "batch size per process (global batch: batch_size * accum_iter * world size)"));
  visit(c.accum_iter, at_least_one("accum_iter", "accumulate gradients over N batches per optimizer step"));
  visit(c.blr, positive("blr", "base learning rate: lr = blr * batch_size * accum_iter * world_size / 256"));
  visit(c.lr, non_negative("lr", "absolute learning rate (overrides blr)"));
  visit(c.min_lr, non_negative("min_lr", "lower bound of the cosine schedule"));
  visit(c.warmup_epochs, non_negative("warmup_epochs", "linear warm-up epochs"));
  visit(c.weight_decay, non_negative("weight_decay", "AdamW weight decay"));
  visit(c.opt_eps, positive("opt_eps", "AdamW epsilon"));
  visit(c.clip_grad, non_negative("clip_grad", "clip the gradient norm (0: off)"));
  visit(c.layer_decay, positive("layer_decay", "layer-wise lr decay: block i gets lr * layer_decay^(depth + 1 - i) (1: off; "
                                              "policy: the encoder's blocks, the rest at lr)")
                           .only(kFinetune | kPolicy));
  visit(c.smoothing, unit_interval("smoothing", "label smoothing", false).only(kFinetune));
  visit(c.mixup, non_negative("mixup", "mixup alpha (0: off)").only(kFinetune));
  visit(c.cutmix, non_negative("cutmix", "cutmix alpha (0: off)").only(kFinetune));
  visit(c.mixup_prob, unit_interval("mixup_prob", "probability of applying mixup or cutmix to a batch", true).only(kFinetune));
  visit(c.mixup_switch_prob,
        unit_interval("mixup_switch_prob", "probability of cutmix instead of mixup when both are on", true).only(kFinetune));
  visit(c.aa, any("aa", "RandAugment policy, timm syntax (e.g. rand-m9-mstd0.5-inc1; empty or none: off)").only(kFinetune));
  visit(c.color_jitter, non_negative("color_jitter", "colour jitter strength (0: off)").only(kFinetune));
  visit(c.train_crop, one_of("train_crop", "auto (rrc above 64 px, else pad) | pad (random crop with padding) | "
                             "rrc (RandomResizedCrop) | none (flip only)", {"auto", "pad", "rrc", "none"})
                            .only(kImageCommands));
  visit(c.reprob, unit_interval("reprob", "random erasing probability (timm)", true).only(kFinetune));
  visit(c.remode, one_of("remode", "random erasing fill: pixel | rand | const", {"pixel", "rand", "const"}).only(kFinetune));
  visit(c.recount, at_least_one("recount", "random erasing: up to this many boxes").only(kFinetune));
  visit(c.model_ema, any("model_ema", "keep an EMA of the weights and evaluate it too").only(kFinetune | kPolicy));
  visit(c.model_ema_decay, unit_interval("model_ema_decay", "EMA decay (policy: the cap of Diffusion Policy's "
                                                            "warm-up schedule)", false).only(kFinetune | kPolicy));
  visit(c.output_dir, any("output_dir", "where checkpoints, metrics.jsonl and the resolved config go", run));
  visit(c.log_dir, any("log_dir", "where metrics.jsonl goes (default: output_dir)", run));
  visit(c.resume, any("resume", "checkpoint to resume from", run));
  visit(c.save_ckpt_freq,
        non_negative("save_ckpt_freq", "also keep checkpoint-<epoch>.pt every N epochs (0: only the latest)", run));
  visit(c.start_epoch, non_negative("start_epoch", "first epoch (when resuming an old checkpoint)", run));
  visit(c.eval, any("eval", "only evaluate (with --resume)", run).only(kFinetune));
  visit(c.dist_eval, any("dist_eval", "shard evaluation over the ranks (always on here; accepted for MAE's scripts)", run)
                         .only(kFinetune));
  visit(c.device, any("device", "cpu (this build trains on the CPU; cuda is refused with the reason)", run));
  visit(c.seed, any("seed", "random seed", run));
  visit(c.amp, one_of("amp", "mixed precision on the CPU: none | bf16 (autocast: GEMMs in bfloat16, float32 master "
                             "weights, norms, softmax and losses)", {"none", "bf16"}));
  visit(c.threads, non_negative("threads", "CPU threads for LibTorch (0: every core)"));
  visit(c.print_freq, non_negative("print_freq", "progress lines per epoch when not on a terminal (0: auto)"));
  visit(c.dist_backend, one_of("dist_backend", "distributed backend: gloo (CPU) | nccl (LibTorch CUDA builds)",
                               {"gloo", "nccl"}, run));
  visit(c.dist_url, any("dist_url", "rendezvous: env:// (MASTER_ADDR:MASTER_PORT) | tcp://HOST:PORT | file:///PATH", run));
  visit(c.dist_timeout, positive("dist_timeout", "seconds a rendezvous or collective may wait for the other processes", run));
  visit(c.dist_bucket_mb, positive("dist_bucket_mb", "gradient allreduce bucket size in MB", run));
  visit(c.dist_no_overlap, any("dist_no_overlap", "average gradients after backward instead of overlapping with it", run));
}

// Checks every field against its FieldInfo and the fields against each other, and fills
// derived defaults (aa "none" -> "", log_dir); throws UsageError "--NAME must be ...".
TrainConfig resolve(TrainConfig config, unsigned command = kFinetune);
// The fields of `command`, by name.
nlohmann::json config_to_json(const TrainConfig& config, unsigned command = kFinetune);

}  // namespace sparsevit::pipelines
