// _sparsevit_core: the C++ attention configs and mask registry for the Python package
// (python/sparsevit). Standard library types only cross the boundary (lists of ints, dicts of
// strings), so the module does not depend on the Python torch's C++ ABI; the package turns the
// CSR lists into tensors. Errors keep the CLI's text: UsageError -> ValueError, the rest ->
// RuntimeError.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <fstream>
#include <sstream>

#include "config/attention_spec.h"
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

}  // namespace
}  // namespace sparsevit

PYBIND11_MODULE(_sparsevit_core, m) {
  using namespace sparsevit;
  m.doc() = "sparsevit's C++ attention configs and mask registry";
  py::register_exception<UsageError>(m, "UsageError", PyExc_ValueError);
  m.def("spec", &spec_dict, py::arg("yaml"), py::arg("source"), py::arg("overrides") = std::vector<std::string>{});
  m.def("layer_patterns", &layer_patterns, py::arg("yaml"), py::arg("source"), py::arg("overrides"), py::arg("tokens"),
        py::arg("prefix_tokens"), py::arg("heads"), py::arg("head_dim"), py::arg("layers"));
  m.def("default_yaml", [] { return config::default_attention_yaml(); });
  m.attr("torch_version") = SPARSEVIT_TORCH_VERSION;
}
