#include "config/attention_spec.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cctype>
#include <fstream>
#include <sstream>

#include "config/attention_backends.h"
#include "patterns/mask_registry.h"
#include "util/did_you_mean.h"
#include "util/errors.h"

namespace sparsevit::config {
namespace {

std::string where(const std::string& source, const YAML::Mark& mark) {
  if (mark.is_null()) return source;
  return source + ":" + std::to_string(mark.line + 1) + ":" + std::to_string(mark.column + 1);
}

[[noreturn]] void fail(const std::string& source, const YAML::Node& node, const std::string& message) {
  throw UsageError(where(source, node.Mark()) + ": " + message);
}

std::string scalar_of(const std::string& source, const YAML::Node& node, const std::string& key) {
  if (!node.IsScalar()) fail(source, node, "'" + key + "' must be a single value");
  return node.Scalar();
}

// yaml-cpp keeps duplicate keys silently (and lookups find the first): refuse them.
void reject_duplicate_keys(const std::string& source, const YAML::Node& map, const std::string& section) {
  std::vector<std::string> seen;
  for (const auto& item : map) {
    if (!item.first.IsScalar()) fail(source, item.first, "keys of '" + section + "' must be names");
    const std::string key = item.first.Scalar();
    if (std::find(seen.begin(), seen.end(), key) != seen.end())
      fail(source, item.first, "duplicate key '" + key + "' in '" + section + "'");
    seen.push_back(key);
  }
}

void check_keys(const std::string& source, const YAML::Node& map, const std::string& section,
                const std::vector<std::string>& allowed) {
  reject_duplicate_keys(source, map, section);
  for (const auto& item : map) {
    const std::string key = item.first.Scalar();
    if (std::find(allowed.begin(), allowed.end(), key) == allowed.end())
      fail(source, item.first, unknown_name_message("key in '" + section + "'", key, allowed));
  }
}

// A `name: value` / `name: [values]` mapping into kwargs that remember file:line.
void read_kwargs(const std::string& source, const YAML::Node& kwargs, const std::string& section,
                 patterns::MaskKwargs& out) {
  if (!kwargs.IsMap()) fail(source, kwargs, "'" + section + "' must be a mapping of name: value");
  reject_duplicate_keys(source, kwargs, section);
  for (const auto& item : kwargs) {
    const std::string name = item.first.Scalar();
    const std::string at = where(source, item.first.Mark());
    const YAML::Node& value = item.second;
    if (value.IsScalar()) {
      out.set_scalar(name, value.Scalar(), at);
    } else if (value.IsSequence()) {
      std::vector<std::string> items;
      for (const auto& element : value) {
        if (!element.IsScalar()) fail(source, element, section + "." + name + ": list items must be values");
        items.push_back(element.Scalar());
      }
      out.set_list(name, std::move(items), at);
    } else {
      fail(source, value, section + "." + name + ": expected a value or a list of values");
    }
  }
}

AttentionSpec parse_attention_yaml(const std::string& yaml_text, const std::string& source);

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
  try {
    return parse_attention_yaml(yaml_text, source);
  } catch (const YAML::Exception& e) {
    throw UsageError(where(source, e.mark) + ": invalid YAML: " + e.msg);
  }
}

namespace {

AttentionSpec parse_attention_yaml(const std::string& yaml_text, const std::string& source) {
  const YAML::Node root = YAML::Load(yaml_text);
  if (!root.IsMap()) fail(source, root, "expected a mapping with an 'attention' section");
  check_keys(source, root, "top level", {"attention"});
  if (!root["attention"]) fail(source, root, "missing the 'attention' section");
  const YAML::Node attention = root["attention"];
  if (!attention.IsMap()) fail(source, attention, "'attention' must be a mapping (backend, mask, mask_kwargs)");
  check_keys(source, attention, "attention", {"backend", "mask", "mask_kwargs", "backend_kwargs", "kernel"});

  AttentionSpec spec;
  spec.source = source;
  spec.backend_kwargs.set_section("backend_kwargs");
  if (const YAML::Node n = attention["backend"]) {
    spec.backend = scalar_of(source, n, "backend");
    // Case-insensitive: the reference implementation's configs write `backend: ViT`.
    std::transform(spec.backend.begin(), spec.backend.end(), spec.backend.begin(),
                   [](unsigned char ch) { return static_cast<char>(std::tolower(ch)); });
    const auto names = backend_names();
    if (std::find(names.begin(), names.end(), spec.backend) == names.end())
      fail(source, n, unknown_name_message("backend", spec.backend, names));
  }
  if (const YAML::Node n = attention["kernel"]) {
    try {
      spec.kernel = parse_kernel(scalar_of(source, n, "kernel"));
    } catch (const UsageError& e) {
      fail(source, n, e.what());
    }
  }
  if (const YAML::Node n = attention["mask"]; n && !n.IsNull()) {
    spec.mask = scalar_of(source, n, "mask");
    if (spec.mask == "none" || spec.mask == "dense") spec.mask.clear();
    if (spec.has_mask()) {
      try {
        patterns::find_mask(spec.mask);
      } catch (const UsageError& e) {
        fail(source, n, e.what());
      }
    }
  }
  if (const YAML::Node kwargs = attention["mask_kwargs"]; kwargs && !kwargs.IsNull()) {
    if (!spec.has_mask()) fail(source, kwargs, "'mask_kwargs' given without a 'mask'");
    read_kwargs(source, kwargs, "mask_kwargs", spec.mask_kwargs);
    patterns::validate_mask_kwargs(patterns::find_mask(spec.mask), spec.mask_kwargs);
  }
  if (const YAML::Node kwargs = attention["backend_kwargs"]; kwargs && !kwargs.IsNull()) {
    read_kwargs(source, kwargs, "backend_kwargs", spec.backend_kwargs);
    validate_backend_kwargs(spec.backend, spec.backend_kwargs);
  }
  if (spec.has_mask() && !find_backend(spec.backend).takes_mask && spec.backend != "dense")
    fail(source, attention["mask"], "backend '" + spec.backend + "' takes no mask (its kwargs go in 'backend_kwargs')");
  if (spec.backend == "dense" && spec.has_mask())
    fail(source, attention["mask"], "backend 'dense' takes no mask; use backend 'vit' with a mask");
  return spec;
}

}  // namespace

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
