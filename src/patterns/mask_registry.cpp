#include "patterns/mask_registry.h"

#include <deque>
#include <mutex>

#include <cmath>
#include <limits>

#include "patterns/mask_generators.h"
#include "util/did_you_mean.h"
#include "util/errors.h"

namespace sparsevit::patterns {

// An explicit table rather than static self-registration: static libraries drop
// translation units nobody references, and the order here is the documented order.
const std::vector<MaskGenerator>& mask_generators() {
  static const std::vector<MaskGenerator> generators = {
      fibottention_generator(), local_generator(),      random_generator(), sparse_transformer_generator(),
      bigbird_generator(),      longformer_generator(), pruning_generator(), file_generator(),
      topk_generator(),
  };
  return generators;
}

namespace {

// Generators registered at run time; a deque keeps references to them valid as it grows.
std::deque<MaskGenerator>& runtime_generators() {
  static std::deque<MaskGenerator> generators;
  return generators;
}
std::mutex& runtime_mutex() {
  static std::mutex m;
  return m;
}

}  // namespace

void register_mask_generator(MaskGenerator generator) {
  for (const auto& g : mask_generators())
    if (g.name == generator.name) throw UsageError("mask '" + generator.name + "' is built in; choose another name");
  if (generator.name.empty() || (!generator.dynamic && !generator.build))
    throw UsageError("a registered mask needs a name and a build function");
  std::lock_guard<std::mutex> lock(runtime_mutex());
  for (auto& g : runtime_generators())
    if (g.name == generator.name) {
      g = std::move(generator);
      return;
    }
  runtime_generators().push_back(std::move(generator));
}

std::vector<std::string> mask_names() {
  std::vector<std::string> names;
  for (const auto& g : mask_generators()) names.push_back(g.name);
  std::lock_guard<std::mutex> lock(runtime_mutex());
  for (const auto& g : runtime_generators()) names.push_back(g.name);
  return names;
}

const MaskGenerator& find_mask(const std::string& name) {
  for (const auto& g : mask_generators())
    if (g.name == name) return g;
  {
    std::lock_guard<std::mutex> lock(runtime_mutex());
    for (const auto& g : runtime_generators())
      if (g.name == name) return g;
  }
  throw UsageError(unknown_name_message("mask", name, mask_names()));
}

void validate_mask_kwargs(const MaskGenerator& generator, const MaskKwargs& kwargs) {
  std::vector<std::string> accepted;
  for (const auto& k : generator.kwargs) accepted.push_back(k.name);
  for (const auto& name : kwargs.names()) {
    bool known = false;
    for (const auto& a : accepted) known = known || a == name;
    if (!known)
      throw UsageError(kwargs.describe(name) + ": " +
                       unknown_name_message("kwarg for mask '" + generator.name + "'", name, accepted));
  }
}

Pattern build_mask(const std::string& name, const MaskContext& context, const MaskKwargs& kwargs) {
  const MaskGenerator& generator = find_mask(name);
  validate_mask_kwargs(generator, kwargs);
  if (context.num_tokens < 1) throw UsageError("tokens must be >= 1, got " + std::to_string(context.num_tokens));
  if (context.num_tokens > std::numeric_limits<int32_t>::max() || context.num_heads > std::numeric_limits<int32_t>::max())
    throw UsageError("patterns hold at most 2^31 - 1 tokens and heads");
  if (context.num_heads < 1) throw UsageError("heads must be >= 1, got " + std::to_string(context.num_heads));
  if (context.num_layers < 1) throw UsageError("layers must be >= 1, got " + std::to_string(context.num_layers));
  if (context.layer < 0 || context.layer >= context.num_layers)
    throw UsageError("layer index " + std::to_string(context.layer) + " out of range [0, " +
                     std::to_string(context.num_layers) + ")");
  if (context.num_prefix_tokens < 0 || context.num_prefix_tokens > 1)
    throw UsageError("prefix tokens must be 0 or 1, got " + std::to_string(context.num_prefix_tokens));
  if (context.num_prefix_tokens == 1 && context.num_tokens < 2)
    throw UsageError("a model with a class token needs at least 2 tokens");
  if (generator.dynamic)
    throw UsageError("mask '" + name + "' is dynamic (chosen from the scores at run time): it has no static pattern");
  return generator.build(context, kwargs);
}

std::vector<Pattern> build_layer_masks(const std::string& name, const AttentionGeometry& geometry,
                                       const MaskKwargs& kwargs) {
  std::vector<Pattern> layers;
  for (int64_t l = 0; l < geometry.num_layers; ++l) layers.push_back(build_mask(name, MaskContext{geometry, l}, kwargs));
  return layers;
}

namespace {
// The documented default, `global`, applies to models with a class token; without one the
// fallback is `none` (and `global` is refused).
constexpr ChoiceKwarg kClassToken{"class_token", "global",
                                  "`global`: row 0 and column 0 fully connected (models with a class token); "
                                  "`none`: token 0 is treated like any other token"};
}  // namespace

KwargDoc class_token_kwarg_doc() { return kClassToken.doc_entry(); }

bool class_token_is_global(const MaskContext& context, const MaskKwargs& kwargs) {
  const std::string fallback = context.num_prefix_tokens > 0 ? kClassToken.fallback : "none";
  const std::string mode = kwargs.get_choice(kClassToken.name, fallback, {"global", "none"});
  if (mode == "global" && context.num_prefix_tokens == 0)
    throw UsageError(kwargs.describe("class_token") + ": `global` needs a model with a class token");
  return mode == "global";
}

std::vector<int32_t> class_token_globals(const MaskContext& context, const MaskKwargs& kwargs) {
  return class_token_is_global(context, kwargs) ? std::vector<int32_t>{0} : std::vector<int32_t>{};
}

int64_t diagonal_patch_edges(const std::vector<int32_t>& offsets, int32_t num_patches) {
  int64_t edges = 0;
  for (int32_t o : offsets)
    if (o >= 0 && o < num_patches) edges += o == 0 ? num_patches : 2 * static_cast<int64_t>(num_patches - o);
  return edges;
}

int64_t closest_to_target(int64_t lo, int64_t hi, double target, const std::function<double(int64_t)>& ratio) {
  int64_t best = lo;
  double best_gap = std::abs(ratio(lo) - target);
  for (int64_t x = lo + 1; x <= hi; ++x) {
    const double gap = std::abs(ratio(x) - target);
    if (gap < best_gap - 1e-12) {
      best = x;
      best_gap = gap;
    }
  }
  return best;
}

}  // namespace sparsevit::patterns
