#include "config/attention_spec.h"

#include <algorithm>
#include <cctype>
#include <fstream>
#include <sstream>

#include "config/attention_backends.h"
#include "config/config_document.h"
#include "config/config_node.h"
#include "patterns/mask_registry.h"
#include "util/did_you_mean.h"
#include "util/errors.h"

namespace sparsevit::config {
namespace {

// Every error names where its node came from (config/config_node.h: "file:line:col").
[[noreturn]] void fail(const ConfigNode& node, const std::string& message) {
  throw UsageError(node.location() + ": " + message);
}

std::string scalar_of(const ConfigNode& node, const std::string& key) {
  if (!node.is_scalar()) fail(node, "'" + key + "' must be a single value");
  return node.text();
}

// The tree keeps duplicate keys (and lookups find the first): refuse them.
void reject_duplicate_keys(const ConfigNode& map, const std::string& section) {
  std::vector<std::string> seen;
  for (const auto& [key_node, value] : map.entries()) {
    if (!key_node.is_scalar()) fail(key_node, "keys of '" + section + "' must be names");
    const std::string& key = key_node.text();
    if (std::find(seen.begin(), seen.end(), key) != seen.end())
      fail(key_node, "duplicate key '" + key + "' in '" + section + "'");
    seen.push_back(key);
  }
}

void check_keys(const ConfigNode& map, const std::string& section, const std::vector<std::string>& allowed) {
  reject_duplicate_keys(map, section);
  for (const auto& [key_node, value] : map.entries()) {
    const std::string& key = key_node.text();
    if (std::find(allowed.begin(), allowed.end(), key) == allowed.end())
      fail(key_node, unknown_name_message("key in '" + section + "'", key, allowed));
  }
}

// A `name: value` / `name: [values]` mapping into kwargs that remember file:line.
void read_kwargs(const ConfigNode& kwargs, const std::string& section, patterns::MaskKwargs& out) {
  if (!kwargs.is_map()) fail(kwargs, "'" + section + "' must be a mapping of name: value");
  reject_duplicate_keys(kwargs, section);
  for (const auto& [key_node, value] : kwargs.entries()) {
    const std::string& name = key_node.text();
    const std::string& at = key_node.location();
    if (value.is_scalar()) {
      out.set_scalar(name, value.text(), at);
    } else if (value.is_sequence()) {
      std::vector<std::string> items;
      for (const auto& element : value.items()) {
        if (!element.is_scalar()) fail(element, section + "." + name + ": list items must be values");
        items.push_back(element.text());
      }
      out.set_list(name, std::move(items), at);
    } else {
      fail(value, section + "." + name + ": expected a value or a list of values");
    }
  }
}

}  // namespace

bool AttentionSpec::has_dynamic_mask() const { return has_mask() && patterns::find_mask(mask).dynamic; }

std::vector<std::string> backend_names() {
  std::vector<std::string> names;
  for (const auto& b : attention_backends()) names.push_back(b.name);
  return names;
}
std::vector<std::string> kernel_names() { return {"auto", "sparse", "masked", "dense"}; }

const std::string& kernel_name(AttentionKernel kernel) {
  static const std::vector<std::string> names = kernel_names();
  return names.at(static_cast<size_t>(kernel));
}

AttentionKernel parse_kernel(const std::string& name) {
  const auto names = kernel_names();
  const auto it = std::find(names.begin(), names.end(), name);
  if (it == names.end()) throw UsageError(unknown_name_message("kernel", name, names));
  return static_cast<AttentionKernel>(it - names.begin());
}

AttentionSpec parse_attention_spec(const std::string& yaml_text, const std::string& source) {
  return parse_attention_spec(read_config_document(yaml_text, source), source);
}

AttentionSpec parse_attention_spec(const ConfigNode& root, const std::string& source) {
  if (!root.is_map()) fail(root, "expected a mapping with an 'attention' section");
  check_keys(root, "top level", {"attention"});
  const ConfigNode* attention_node = root.find("attention");
  if (!attention_node) fail(root, "missing the 'attention' section");
  const ConfigNode& attention = *attention_node;
  if (!attention.is_map()) fail(attention, "'attention' must be a mapping (backend, mask, mask_kwargs)");
  check_keys(attention, "attention", {"backend", "mask", "mask_kwargs", "backend_kwargs", "kernel"});

  AttentionSpec spec;
  spec.source = source;
  spec.backend_kwargs.set_section("backend_kwargs");
  if (const ConfigNode* n = attention.find("backend")) {
    spec.backend = scalar_of(*n, "backend");
    // Case-insensitive: the reference implementation's configs write `backend: ViT`.
    std::transform(spec.backend.begin(), spec.backend.end(), spec.backend.begin(),
                   [](unsigned char ch) { return static_cast<char>(std::tolower(ch)); });
    const auto names = backend_names();
    if (std::find(names.begin(), names.end(), spec.backend) == names.end())
      fail(*n, unknown_name_message("backend", spec.backend, names));
  }
  if (const ConfigNode* n = attention.find("kernel")) {
    try {
      spec.kernel = parse_kernel(scalar_of(*n, "kernel"));
    } catch (const UsageError& e) {
      fail(*n, e.what());
    }
  }
  const ConfigNode* mask = attention.find("mask");
  if (mask && !mask->is_null()) {
    spec.mask = scalar_of(*mask, "mask");
    if (spec.mask == "none" || spec.mask == "dense") spec.mask.clear();
    if (spec.has_mask()) {
      try {
        patterns::find_mask(spec.mask);
      } catch (const UsageError& e) {
        fail(*mask, e.what());
      }
    }
  }
  if (const ConfigNode* kwargs = attention.find("mask_kwargs"); kwargs && !kwargs->is_null()) {
    if (!spec.has_mask()) fail(*kwargs, "'mask_kwargs' given without a 'mask'");
    read_kwargs(*kwargs, "mask_kwargs", spec.mask_kwargs);
    patterns::validate_mask_kwargs(patterns::find_mask(spec.mask), spec.mask_kwargs);
  }
  if (const ConfigNode* kwargs = attention.find("backend_kwargs"); kwargs && !kwargs->is_null()) {
    read_kwargs(*kwargs, "backend_kwargs", spec.backend_kwargs);
    validate_backend_kwargs(spec.backend, spec.backend_kwargs);
  }
  if (spec.has_mask() && !find_backend(spec.backend).takes_mask && spec.backend != "dense")
    fail(*mask, "backend '" + spec.backend + "' takes no mask (its kwargs go in 'backend_kwargs')");
  if (spec.backend == "dense" && spec.has_mask())
    fail(*mask, "backend 'dense' takes no mask; use backend 'vit' with a mask");
  return spec;
}


namespace {

std::string read_attention_yaml(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw UsageError("cannot read attention config '" + path + "'");
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

}  // namespace

AttentionSpec load_attention_spec(const std::string& path) { return parse_attention_spec(read_attention_yaml(path), path); }

AttentionConfig load_attention_config(const std::string& path, const std::vector<std::string>& overrides) {
  AttentionConfig a;
  if (path.empty()) {
    a.yaml = default_attention_yaml();
    a.spec = default_attention_spec();
  } else {
    a.yaml = read_attention_yaml(path);
    a.spec = parse_attention_spec(a.yaml, path);
  }
  apply_mask_kwarg_overrides(a.spec, overrides);
  return a;
}

std::string attention_spec_yaml(const AttentionSpec& spec) {
  auto section = [](const char* name, const patterns::MaskKwargs& kwargs) {
    if (kwargs.values().empty()) return std::string();
    std::string text = std::string("  ") + name + ":\n";
    for (const auto& [key, value] : kwargs.values()) {
      text += "    " + key + ": ";
      if (value.is_list) {
        text += "[";
        for (size_t i = 0; i < value.items.size(); ++i) text += (i ? ", " : "") + value.items[i];
        text += "]\n";
      } else {
        text += value.items.at(0) + "\n";
      }
    }
    return text;
  };
  std::string yaml = "attention:\n  backend: " + spec.backend + "\n";
  if (spec.has_mask()) yaml += "  mask: " + spec.mask + "\n";
  if (spec.kernel != AttentionKernel::kAuto) yaml += "  kernel: " + kernel_name(spec.kernel) + "\n";
  yaml += section("mask_kwargs", spec.mask_kwargs);
  yaml += section("backend_kwargs", spec.backend_kwargs);
  return yaml;
}

const std::string& default_attention_yaml() {
  static const std::string yaml =
      "attention:\n"
      "  backend: vit\n"
      "  mask: fibo\n"
      "  mask_kwargs:\n"
      "    w_min: 5\n"
      "    w_max: 65\n"
      "    schedule: wythoff\n";
  return yaml;
}

AttentionSpec default_attention_spec() { return parse_attention_spec(default_attention_yaml(), "<built-in default>"); }

void apply_mask_kwarg_overrides(AttentionSpec& spec, const std::vector<std::string>& assignments) {
  if (assignments.empty()) return;
  if (!spec.has_mask() && !find_backend(spec.backend).kwargs.empty()) {
    for (const auto& a : assignments) spec.backend_kwargs.set_from_assignment(a);
    validate_backend_kwargs(spec.backend, spec.backend_kwargs);
    return;
  }
  if (!spec.has_mask()) throw UsageError("--set overrides mask kwargs, but " + spec.source + " has no mask");
  for (const auto& a : assignments) spec.mask_kwargs.set_from_assignment(a);
  patterns::validate_mask_kwargs(patterns::find_mask(spec.mask), spec.mask_kwargs);
}

std::vector<std::optional<patterns::Pattern>> build_layer_patterns(const AttentionSpec& spec,
                                                                   const AttentionGeometry& geometry) {
  if (geometry.num_layers < 0) throw UsageError("layers must be >= 0, got " + std::to_string(geometry.num_layers));
  std::vector<std::optional<patterns::Pattern>> layers(geometry.num_layers);
  if (!spec.has_mask() || spec.has_dynamic_mask() || spec.kernel == AttentionKernel::kDense) return layers;
  auto built = patterns::build_layer_masks(spec.mask, geometry, spec.mask_kwargs);
  for (size_t l = 0; l < layers.size(); ++l) layers[l] = std::move(built[l]);
  return layers;
}

}  // namespace sparsevit::config
