// AttentionSpec: the typed form of an attention config (configs/attention/*.yaml):
//
//   attention:
//     backend: vit
//     mask: fibo
//     mask_kwargs: {w_min: 5, w_max: 65, schedule: wythoff}
//
// or a backend with its own kwargs (config/attention_backends.h):
//
//   attention:
//     backend: performer
//     backend_kwargs: {num_features: 3, seed: 0}
//
// Unknown keys, backends, masks and kwargs are UsageErrors naming the key and file:line. The
// parser reads a format-neutral tree (config/config_node.h), whichever YAML reader filled it.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "patterns/mask_kwargs.h"
#include "patterns/pattern.h"
#include "util/attention_geometry.h"

namespace sparsevit::config {

class ConfigNode;

// Which kernel runs a static pattern (`kernel:`), parsed once with the config; `auto` is
// resolved once per layer when its module is built (sparse below the density threshold,
// masked above it: attention/vit_attention.h).
enum class AttentionKernel { kAuto, kSparse, kMasked, kDense };
// "auto" | "sparse" | "masked" | "dense": the config spelling, for logs and reports.
const std::string& kernel_name(AttentionKernel kernel);
// Throws UsageError "unknown kernel 'x' (did you mean 'y'?)".
AttentionKernel parse_kernel(const std::string& name);

struct AttentionSpec {
  std::string backend = "vit";
  std::string mask;  // "" when attention is dense
  patterns::MaskKwargs mask_kwargs;
  patterns::MaskKwargs backend_kwargs;  // the backend's own (linformer k, performer num_features, ...)
  AttentionKernel kernel = AttentionKernel::kAuto;
  std::string source = "<built-in>";

  bool has_mask() const { return !mask.empty(); }
  bool has_dynamic_mask() const;  // e.g. topk: chosen from the scores at run time
};

std::vector<std::string> backend_names();
std::vector<std::string> kernel_names();

// The config's text, read by this build's YAML reader (config/config_document.h).
AttentionSpec parse_attention_spec(const std::string& yaml_text, const std::string& source_name);
// The one spec parser, over a document already read into the format-neutral tree; errors are
// UsageErrors prefixed with the offending node's location.
AttentionSpec parse_attention_spec(const ConfigNode& document, const std::string& source_name);
AttentionSpec load_attention_spec(const std::string& path);

// An attention config as a run uses it: the YAML text (it travels in checkpoints) and the spec.
struct AttentionConfig {
  std::string yaml;
  AttentionSpec spec;
};
// Reads `path` once ("" : the built-in Fibottention default) and applies NAME=VALUE overrides
// (see apply_mask_kwarg_overrides). A missing file is a UsageError naming it.
AttentionConfig load_attention_config(const std::string& path, const std::vector<std::string>& overrides = {});

// The spec as a config file that parse_attention_spec reads back to the same spec (kwargs in
// name order; values written as given). Used to store the configs a sweep derives.
std::string attention_spec_yaml(const AttentionSpec& spec);
// The embedded default: Fibottention with w_min 5, w_max 65 on the Wythoff schedule.
const std::string& default_attention_yaml();
AttentionSpec default_attention_spec();

// Applies NAME=VALUE overrides (e.g. from `--set w_max=33`) to the mask kwargs, validated; for a
// backend with kwargs and no mask (e.g. `--set k=8` on linformer) to the backend kwargs.
void apply_mask_kwarg_overrides(AttentionSpec& spec, const std::vector<std::string>& assignments);

// The static pattern of every layer (nullopt for dense layers and dynamic masks).
std::vector<std::optional<patterns::Pattern>> build_layer_patterns(const AttentionSpec& spec,
                                                                   const AttentionGeometry& geometry);

}  // namespace sparsevit::config
