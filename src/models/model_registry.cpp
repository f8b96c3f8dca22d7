#include "models/model_registry.h"

#include "models/conv_stem.h"
#include "models/timesformer.h"
#include "util/errors.h"

namespace sparsevit::models {

VitConfig vit_config(const ModelShape& s, const ModelOptions& o) {
  VitConfig c;
  c.img_size = o.img_size.value_or(s.image_size);
  c.patch_size = o.patch_size.value_or(s.patch_size);
  c.in_chans = o.in_chans.value_or(s.in_chans);
  c.num_classes = o.num_classes.value_or(s.num_classes);
  c.embed_dim = o.embed_dim.value_or(s.embed_dim);
  c.depth = o.depth.value_or(s.depth);
  c.num_heads = o.num_heads.value_or(s.num_heads);
  c.global_pool = o.global_pool;
  c.stem = check_stem(o.stem);
  c.num_prefix_tokens = s.num_prefix_tokens;
  c.drop_rate = o.drop_rate;
  c.drop_path_rate = o.drop_path_rate;
  c.attention = o.attention;
  // 0: a feature extractor without head (the policy's observation encoder).
  if (c.num_classes < 0) throw UsageError("nb_classes must be >= 0, got " + std::to_string(c.num_classes));
  if (c.patch_size < 1) throw UsageError("patch_size must be >= 1, got " + std::to_string(c.patch_size));
  if (c.img_size < c.patch_size || c.img_size % c.patch_size != 0)
    throw UsageError("img_size " + std::to_string(c.img_size) + " is not a positive multiple of " + s.name +
                     "'s patch size " + std::to_string(c.patch_size));
  if (c.depth < 1) throw UsageError("depth must be >= 1, got " + std::to_string(c.depth));
  if (c.num_heads < 1 || c.embed_dim < 1 || c.embed_dim % c.num_heads != 0)
    throw UsageError("embed_dim " + std::to_string(c.embed_dim) + " must be a positive multiple of num_heads " +
                     std::to_string(c.num_heads));
  if (c.in_chans < 1) throw UsageError("in_chans must be >= 1, got " + std::to_string(c.in_chans));
  if (c.stem == "conv") conv_stem_channels(c.patch_size, c.embed_dim);  // UsageError unless patch 2^k, dim fits
  if (o.drop_path_rate < 0 || o.drop_path_rate >= 1)
    throw UsageError("drop_path must be in [0, 1), got " + std::to_string(o.drop_path_rate));
  return c;
}

std::shared_ptr<VisionTransformer> create_model(const std::string& name, const ModelOptions& options) {
  const ModelShape& shape = find_model_shape(name);
  if (shape.is_video())
    throw UsageError(name + " is a video model (TimeSformer); this command takes image models (vit_*)");
  return std::make_shared<VisionTransformer>(vit_config(shape, options));
}

int64_t num_frames(const ModelShape& shape, const ModelOptions& options) {
  if (!shape.is_video()) return 0;
  const int64_t frames = options.num_frames.value_or(shape.num_frames);
  if (frames < 1) throw UsageError("num_frames must be >= 1, got " + std::to_string(frames));
  return frames;
}

std::shared_ptr<Classifier> create_classifier(const std::string& name, const ModelOptions& options) {
  const ModelShape& shape = find_model_shape(name);
  if (!shape.is_video()) return create_model(name, options);
  TimeSformerConfig c;
  c.vit = vit_config(shape, options);
  c.num_frames = num_frames(shape, options);
  c.attention_type = parse_video_attention(options.attention_type);
  c.temporal_attention = options.temporal_attention;
  return std::make_shared<TimeSformer>(c);
}

}  // namespace sparsevit::models
