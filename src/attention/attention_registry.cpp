// The registry of attention backends: config name -> module factory.
#include <algorithm>
#include <functional>
#include <map>

#include "attention/attention.h"
#include "attention/efficient_attention.h"
#include "attention/imhsa_attention.h"
#include "attention/linformer_attention.h"
#include "attention/performer_attention.h"
#include "attention/reformer_attention.h"
#include "attention/topk_attention.h"
#include "attention/vit_attention.h"
#include "util/did_you_mean.h"
#include "util/errors.h"

namespace sparsevit::attention {
namespace {

using Factory = std::function<std::shared_ptr<AttentionModule>(const config::AttentionSpec&, const AttentionDims&,
                                                               std::optional<patterns::Pattern>)>;

// A backend whose score step is its own (no pattern): built from its backend_kwargs.
template <class Backend>
Factory backend_without_mask(const std::string& name) {
  return [name](const config::AttentionSpec& spec, const AttentionDims& dims, std::optional<patterns::Pattern>) {
    if (spec.has_mask()) throw UsageError(spec.source + ": backend '" + name + "' takes no mask");
    if (dims.attn_drop > 0) throw UsageError("attention: attn_drop > 0 is not supported by backend '" + name + "'");
    return std::shared_ptr<AttentionModule>(std::make_shared<Backend>(dims, spec.backend_kwargs));
  };
}

const std::map<std::string, Factory>& factories() {
  static const std::map<std::string, Factory> table = {
      {"vit",
       [](const config::AttentionSpec& spec, const AttentionDims& dims, std::optional<patterns::Pattern> pattern) {
         if (spec.has_dynamic_mask()) {
           if (dims.attn_drop > 0) throw UsageError("attention: attn_drop > 0 is not supported with top-k");
           return std::shared_ptr<AttentionModule>(std::make_shared<TopkAttention>(dims, spec.mask_kwargs));
         }
         return std::shared_ptr<AttentionModule>(std::make_shared<VitAttention>(dims, std::move(pattern), spec.kernel));
       }},
      {"topk",
       [](const config::AttentionSpec& spec, const AttentionDims& dims, std::optional<patterns::Pattern>) {
         if (spec.has_mask() && spec.mask != "topk")
           throw UsageError(spec.source + ": backend 'topk' takes `mask: topk` (or no mask), not '" + spec.mask + "'");
         return std::shared_ptr<AttentionModule>(std::make_shared<TopkAttention>(dims, spec.mask_kwargs));
       }},
      {"dense",
       [](const config::AttentionSpec&, const AttentionDims& dims, std::optional<patterns::Pattern>) {
         return std::shared_ptr<AttentionModule>(std::make_shared<VitAttention>(dims, std::nullopt, "dense"));
       }},
      {"linformer", backend_without_mask<LinformerAttention>("linformer")},
      {"efficient", backend_without_mask<EfficientAttention>("efficient")},
      {"performer", backend_without_mask<PerformerAttention>("performer")},
      {"imhsa", backend_without_mask<ImhsaAttention>("imhsa")},
      {"reformer", backend_without_mask<ReformerAttention>("reformer")},
  };
  return table;
}

}  // namespace

std::vector<std::string> attention_backend_names() {
  std::vector<std::string> names;
  for (const auto& [name, factory] : factories()) names.push_back(name);
  return names;
}

std::shared_ptr<AttentionModule> make_attention(const config::AttentionSpec& spec, const AttentionDims& dims,
                                                std::optional<patterns::Pattern> layer_pattern) {
  const auto it = factories().find(spec.backend);
  if (it == factories().end())
    throw UsageError(unknown_name_message("attention backend", spec.backend, attention_backend_names()));
  return it->second(spec, dims, std::move(layer_pattern));
}

// Measured with `sparsevit bench --backward` (docs/ops.md): the sparse operator beats dense masked
// attention at every density below ~0.9 (N=197, D=16 and 64); at density ~1 they tie.
double sparse_kernel_density_threshold() { return 0.9; }

}  // namespace sparsevit::attention
