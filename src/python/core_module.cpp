// _sparsevit_core: the C++ attention configs and mask registry for the Python package
// (python/sparsevit). Standard library types only cross the boundary (lists of ints, dicts of
// strings), so the module does not depend on the Python torch's C++ ABI; the package turns the
// CSR lists into tensors. Errors keep the CLI's text: UsageError -> ValueError, the rest ->
// RuntimeError.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "analysis/attention_report.h"
#include "config/attention_spec.h"
#include "models/model_description.h"
#include "patterns/mask_registry.h"
#include "patterns/pattern_stats.h"
#include "util/errors.h"

namespace py = pybind11;
namespace sparsevit {
namespace {

// kwargs as written in the YAML: a string, or a list of strings.
py::dict kwargs_dict(const patterns::MaskKwargs& kwargs) {
  py::dict out;
  for (const auto& [name, value] : kwargs.values()) {
    if (value.is_list)
      out[py::str(name)] = value.items;
    else
      out[py::str(name)] = value.items.empty() ? std::string() : value.items.front();
  }
  return out;
}

config::AttentionSpec parse(const std::string& yaml, const std::string& source, const std::vector<std::string>& overrides) {
  config::AttentionSpec spec = config::parse_attention_spec(yaml, source);
  config::apply_mask_kwarg_overrides(spec, overrides);
  return spec;
}

// The validated spec as a dict (what `sparsevit masks` reads from the file).
py::dict spec_dict(const std::string& yaml, const std::string& source, const std::vector<std::string>& overrides) {
  const config::AttentionSpec spec = parse(yaml, source, overrides);
  py::dict out;
  out["backend"] = spec.backend;
  out["mask"] = spec.mask;
  out["mask_kwargs"] = kwargs_dict(spec.mask_kwargs);
  out["backend_kwargs"] = kwargs_dict(spec.backend_kwargs);
  out["kernel"] = config::kernel_name(spec.kernel);
  out["dynamic"] = spec.has_dynamic_mask();
  out["source"] = spec.source;
  return out;
}

// Every layer's static pattern: None for dense / dynamic layers, else a dict with the operator's
// CSR (row_ptr [H * (N + 1)], col_idx [H * width], width) and the layer's statistics.
py::list layer_patterns(const std::string& yaml, const std::string& source, const std::vector<std::string>& overrides,
                        int64_t tokens, int64_t prefix_tokens, int64_t heads, int64_t head_dim, int64_t layers) {
  const config::AttentionSpec spec = parse(yaml, source, overrides);
  AttentionGeometry g{tokens, prefix_tokens, heads, head_dim, layers};
  py::list out;
  for (const auto& p : config::build_layer_patterns(spec, g)) {
    if (!p) {
      out.append(py::none());
      continue;
    }
    py::dict d;
    d["row_ptr"] = p->flat_row_ptr();
    d["col_idx"] = p->padded_col_idx();
    d["width"] = p->max_edges();
    d["edges"] = p->total_edges();
    d["pruning_ratio"] = patterns::pruning_ratio(*p);
    d["density"] = patterns::density(*p);
    d["attention_gflops"] = patterns::attention_gflops(*p, head_dim);
    d["warnings"] = p->warnings();
    out.append(d);
  }
  return out;
}

// `sparsevit flops`' report of a config at a geometry (every backend: patterns, dynamic masks,
// and the equivalent pairs of backends without one), as JSON text.
std::string report_json(const std::string& yaml, const std::string& source, const std::vector<std::string>& overrides,
                        int64_t tokens, int64_t prefix_tokens, int64_t heads, int64_t head_dim, int64_t layers) {
  const config::AttentionSpec spec = parse(yaml, source, overrides);
  return analysis::report_to_json(analysis::attention_report(spec, {tokens, prefix_tokens, heads, head_dim, layers}))
      .dump();
}

// A mask generator backed by a Python function fn(tokens, heads, layer, prefix_tokens, kwargs)
// returning, per head, per query row, the key indices (the package normalises what users return).
// The function is kept for the life of the process (never released: the registry outlives the
// interpreter's finalisation).
void register_python_mask(const std::string& name, const py::function& fn, const std::vector<std::string>& kwarg_names,
                          const std::string& summary) {
  patterns::MaskGenerator g;
  g.name = name;
  g.summary = summary;
  for (const auto& k : kwarg_names) g.kwargs.push_back({k, "", "(registered from Python)"});
  auto* held = new py::function(fn);
  g.build = [held, name](const patterns::MaskContext& ctx, const patterns::MaskKwargs& kw) {
    py::gil_scoped_acquire gil;
    py::object rows = (*held)(ctx.num_tokens, ctx.num_heads, ctx.layer, ctx.num_prefix_tokens, kwargs_dict(kw));
    const auto heads = rows.cast<std::vector<std::vector<std::vector<int64_t>>>>();
    const std::string where = "mask '" + name + "' (layer " + std::to_string(ctx.layer) + ")";
    if (static_cast<int64_t>(heads.size()) != ctx.num_heads)
      throw UsageError(where + ": returned " + std::to_string(heads.size()) + " heads, expected " +
                       std::to_string(ctx.num_heads));
    patterns::Pattern p(static_cast<int32_t>(ctx.num_tokens), static_cast<int32_t>(ctx.num_heads),
                        static_cast<int32_t>(ctx.num_prefix_tokens));
    for (int32_t h = 0; h < static_cast<int32_t>(ctx.num_heads); ++h) {
      const auto& head = heads[static_cast<std::size_t>(h)];
      if (static_cast<int64_t>(head.size()) != ctx.num_tokens)
        throw UsageError(where + ": head " + std::to_string(h) + " has " + std::to_string(head.size()) +
                         " rows, expected " + std::to_string(ctx.num_tokens));
      for (const auto& row : head)
        for (int64_t key : row)
          if (key < 0 || key >= ctx.num_tokens)
            throw UsageError(where + ": key " + std::to_string(key) + " outside [0, " + std::to_string(ctx.num_tokens) + ")");
      p.set_head(h, [&head](int32_t row, std::vector<int32_t>& keys) {
        for (int64_t key : head[static_cast<std::size_t>(row)]) keys.push_back(static_cast<int32_t>(key));
      });
    }
    return p;
  };
  patterns::register_mask_generator(std::move(g));
}

// models/model_description's reading of a checkpoint's (or an exported file's) description, as a
// dict: "kind" (classifier | mae | policy | none) and the classifier's fields. Python reads no
// description JSON of its own.
py::dict model_description_dict(const std::string& metadata_json, const std::string& context) {
  py::dict out;
  const nlohmann::json meta = nlohmann::json::parse(metadata_json, nullptr, false);
  const std::optional<models::ModelDescription> d =
      meta.is_discarded() ? std::nullopt : models::read_model_description(meta, context);
  out["kind"] = !d ? "none" : d->classifier ? "classifier" : d->mae ? "mae" : "policy";
  if (!d || !d->classifier) return out;
  const models::ClassifierDescription& c = *d->classifier;
  out["model"] = c.model;
  out["nb_classes"] = c.nb_classes;
  if (c.shape) {
    out["img_size"] = c.shape->img_size;
    out["patch_size"] = c.shape->patch_size;
    out["embed_dim"] = c.shape->embed_dim;
    out["depth"] = c.shape->depth;
    out["num_heads"] = c.shape->num_heads;
    out["global_pool"] = c.shape->global_pool;
  }
  out["num_frames"] = c.num_frames;
  out["attention_yaml"] = c.attention.yaml;
  out["attention_overrides"] = c.attention.overrides;
  out["temporal_attention_yaml"] = c.temporal_attention.yaml;
  out["dataset"] = c.dataset;
  return out;
}

}  // namespace
}  // namespace sparsevit

PYBIND11_MODULE(_sparsevit_core, m) {
  using namespace sparsevit;
  m.doc() = "sparsevit's C++ attention configs and mask registry";
  py::register_exception<UsageError>(m, "UsageError", PyExc_ValueError);
  m.def("spec", &spec_dict, py::arg("yaml"), py::arg("source"), py::arg("overrides") = std::vector<std::string>{});
  m.def("layer_patterns", &layer_patterns, py::arg("yaml"), py::arg("source"), py::arg("overrides"), py::arg("tokens"),
        py::arg("prefix_tokens"), py::arg("heads"), py::arg("head_dim"), py::arg("layers"));
  m.def("report_json", &report_json, py::arg("yaml"), py::arg("source"), py::arg("overrides"), py::arg("tokens"),
        py::arg("prefix_tokens"), py::arg("heads"), py::arg("head_dim"), py::arg("layers"));
  m.def("default_yaml", [] { return config::default_attention_yaml(); });
  m.def("model_description", &model_description_dict, py::arg("metadata_json"), py::arg("context"));
  m.def("register_mask", &register_python_mask, py::arg("name"), py::arg("fn"), py::arg("kwarg_names"),
        py::arg("summary"));
  m.def("mask_names", &patterns::mask_names);
  m.attr("torch_version") = SPARSEVIT_TORCH_VERSION;
}
