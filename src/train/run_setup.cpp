#include "train/run_setup.h"

#include <torch/cuda.h>

#include <fstream>
#include <sstream>

#include "util/errors.h"

namespace sparsevit::train {

AttentionConfig load_attention_config(const std::string& path, const std::vector<std::string>& overrides) {
  AttentionConfig a;
  if (path.empty()) {
    a.yaml = config::default_attention_yaml();
    a.spec = config::default_attention_spec();
  } else {
    std::ifstream in(path, std::ios::binary);
    if (!in) throw UsageError("cannot read attention config '" + path + "'");
    std::ostringstream text;
    text << in.rdbuf();
    a.yaml = text.str();
    a.spec = config::parse_attention_spec(a.yaml, path);
  }
  config::apply_mask_kwarg_overrides(a.spec, overrides);
  return a;
}

models::ModelOptions vit_model_options(const TrainConfig& c, const config::AttentionSpec& spec) {
  models::ModelOptions o;
  if (c.nb_classes > 0) o.num_classes = c.nb_classes;
  if (c.input_size > 0) o.img_size = c.input_size;
  if (c.patch_size > 0) o.patch_size = c.patch_size;
  if (c.embed_dim > 0) o.embed_dim = c.embed_dim;
  if (c.depth > 0) o.depth = c.depth;
  if (c.num_heads > 0) o.num_heads = c.num_heads;
  o.global_pool = c.global_pool;
  o.drop_path_rate = c.drop_path;
  o.attention = spec;
  return o;
}

void check_device(const std::string& device) {
  if (device == "cpu") return;
  throw UsageError("--device " + device + ": sparsevit trains on the CPU in this version" +
                   (torch::cuda::is_available() ? "" : " (and this LibTorch build has no CUDA)") + "; use --device cpu");
}

data::LoaderOptions loader_options(const TrainConfig& c, const ProcessContext& process) {
  data::LoaderOptions o;
  o.batch_size = c.batch_size;
  o.num_workers = c.num_workers;
  o.seed = static_cast<uint64_t>(c.seed);
  o.rank = process.rank();
  o.world_size = process.world_size();
  return o;
}

data::TransformConfig transform_config(const TrainConfig& c, int64_t input_size, int64_t in_chans) {
  data::TransformConfig tc = data::transform_config_for(c.dataset, input_size, in_chans);
  tc.train_crop = c.train_crop;
  tc.color_jitter = c.color_jitter;
  tc.auto_augment = c.aa;
  tc.re_prob = c.reprob;
  tc.re_mode = c.remode;
  tc.re_count = c.recount;
  data::validate(tc);
  return tc;
}

}  // namespace sparsevit::train
