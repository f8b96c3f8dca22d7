// The registry of attention backends: config name -> module factory. The names and their docs
// are config::attention_backends() (one list); this file adds a factory to each, and
// check_backend_registry() refuses a name without a factory or a factory without a name.
#include <algorithm>
#include <functional>
#include <map>
#include <stdexcept>

#include "attention/attention.h"
#include "attention/efficient_attention.h"
#include "attention/imhsa_attention.h"
#include "attention/linformer_attention.h"
#include "attention/performer_attention.h"
#include "attention/reformer_attention.h"
#include "attention/topk_attention.h"
#include "attention/vit_attention.h"
#include "config/attention_backends.h"
#include "util/errors.h"

namespace sparsevit::attention {
namespace {

using Factory = std::function<std::shared_ptr<AttentionModule>(const config::AttentionSpec&, const LayerOptions&,
                                                               std::optional<patterns::Pattern>)>;

// A backend whose score step is its own (no pattern): built from its backend_kwargs.
template <class Backend>
Factory backend_without_mask(const std::string& name) {
  return [name](const config::AttentionSpec& spec, const LayerOptions& options, std::optional<patterns::Pattern>) {
    if (spec.has_mask()) throw UsageError(spec.source + ": backend '" + name + "' takes no mask");
    if (options.attn_drop > 0) throw UsageError("attention: attn_drop > 0 is not supported by backend '" + name + "'");
    return std::shared_ptr<AttentionModule>(std::make_shared<Backend>(options, spec.backend_kwargs));
  };
}

const std::map<std::string, Factory>& factories() {
  static const std::map<std::string, Factory> table = {
      {"vit",
       [](const config::AttentionSpec& spec, const LayerOptions& options, std::optional<patterns::Pattern> pattern) {
         if (spec.has_dynamic_mask()) {
           if (options.attn_drop > 0) throw UsageError("attention: attn_drop > 0 is not supported with top-k");
           return std::shared_ptr<AttentionModule>(std::make_shared<TopkAttention>(options, spec.mask_kwargs));
         }
         return std::shared_ptr<AttentionModule>(std::make_shared<VitAttention>(options, std::move(pattern), spec.kernel));
       }},
      {"topk",
       [](const config::AttentionSpec& spec, const LayerOptions& options, std::optional<patterns::Pattern>) {
         if (spec.has_mask() && spec.mask != "topk")
           throw UsageError(spec.source + ": backend 'topk' takes `mask: topk` (or no mask), not '" + spec.mask + "'");
         return std::shared_ptr<AttentionModule>(std::make_shared<TopkAttention>(options, spec.mask_kwargs));
       }},
      {"dense",
       [](const config::AttentionSpec&, const LayerOptions& options, std::optional<patterns::Pattern>) {
         return std::shared_ptr<AttentionModule>(
             std::make_shared<VitAttention>(options, std::nullopt, config::AttentionKernel::kDense));
       }},
      {"linformer", backend_without_mask<LinformerAttention>("linformer")},
      {"efficient", backend_without_mask<EfficientAttention>("efficient")},
      {"performer", backend_without_mask<PerformerAttention>("performer")},
      {"imhsa", backend_without_mask<ImhsaAttention>("imhsa")},
      {"reformer", backend_without_mask<ReformerAttention>("reformer")},
  };
  return table;
}

// A mismatch between the two lists is a programming error: fail when the program starts
// (static initialisation of this file, which every model build links), not at the first use.
[[maybe_unused]] const bool kRegistryChecked = (check_backend_registry(), true);

}  // namespace

void check_backend_names(const std::vector<std::string>& listed, const std::vector<std::string>& with_factory) {
  auto contains = [](const std::vector<std::string>& names, const std::string& name) {
    return std::find(names.begin(), names.end(), name) != names.end();
  };
  std::string problems;
  for (const auto& name : listed)
    if (!contains(with_factory, name)) problems += " backend '" + name + "' has no factory;";
  for (const auto& name : with_factory)
    if (!contains(listed, name)) problems += " factory '" + name + "' is not in config::attention_backends();";
  if (!problems.empty()) throw std::logic_error("attention backend registry:" + problems);
}

void check_backend_registry() {
  std::vector<std::string> with_factory;
  for (const auto& [name, factory] : factories()) with_factory.push_back(name);
  check_backend_names(config::backend_names(), with_factory);
}

std::vector<std::string> attention_backend_names() { return config::backend_names(); }

std::shared_ptr<AttentionModule> make_attention(const config::AttentionSpec& spec, const LayerOptions& options,
                                                std::optional<patterns::Pattern> layer_pattern) {
  // find_backend throws the "did you mean" UsageError for a name the table does not know.
  return factories().at(config::find_backend(spec.backend).name)(spec, options, std::move(layer_pattern));
}

// Measured with `sparsevit bench --backward` (docs/ops.md): the sparse operator beats dense masked
// attention at every density below ~0.9 (N=197, D=16 and 64); at density ~1 they tie.
double sparse_kernel_density_threshold() { return 0.9; }

}  // namespace sparsevit::attention
