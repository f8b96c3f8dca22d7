// The registry of mask generators: config name -> documented kwargs + a deterministic builder.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "patterns/kwarg_declaration.h"
#include "patterns/mask_kwargs.h"
#include "patterns/pattern.h"
#include "util/attention_geometry.h"

namespace sparsevit::patterns {

// What a generator is asked to build: one layer (0-based `layer`) of a model of the given
// geometry (masks support 0 or 1 prefix tokens: token 0 a class token or a patch).
//   MaskContext{geometry, layer}
struct MaskContext : AttentionGeometry {
  int64_t layer = 0;
};

struct MaskGenerator {
  std::string name;
  std::string summary;
  std::vector<KwargDoc> kwargs;  // defaults come from the generator's kwarg declarations
  // Dynamic masks (top-k) depend on the input and have no static pattern: `build` is empty.
  bool dynamic = false;
  std::function<Pattern(const MaskContext&, const MaskKwargs&)> build;
};

// Every built-in generator, in the order the docs list them.
const std::vector<MaskGenerator>& mask_generators();
// Adds a generator at run time (the Python package's sparsevit.patterns.register_mask): configs
// parsed afterwards in this process may name it. A built-in name is a UsageError; registering a
// name again replaces the earlier generator. Register before building patterns on other threads.
void register_mask_generator(MaskGenerator generator);
std::vector<std::string> mask_names();  // built-in, then registered at run time
// Throws UsageError "unknown mask 'x' (did you mean 'y'?)".
const MaskGenerator& find_mask(const std::string& name);
// Throws UsageError naming the first kwarg the generator does not accept.
void validate_mask_kwargs(const MaskGenerator& generator, const MaskKwargs& kwargs);

// Validates the context and kwargs, then builds one layer.
Pattern build_mask(const std::string& name, const MaskContext& context, const MaskKwargs& kwargs);
// Every layer of a model (the layer index feeds the generator: per-layer shuffles and windows).
std::vector<Pattern> build_layer_masks(const std::string& name, const AttentionGeometry& geometry,
                                       const MaskKwargs& kwargs);

}  // namespace sparsevit::patterns
