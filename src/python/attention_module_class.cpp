// torch.classes.sparsevit.AttentionModule: one layer of any attention backend of the zoo, built
// by the C++ registry (attention::make_attention) and run by its C++ forward, for the Python
// package's SparseAttention (python/sparsevit/nn.py). No backend's math is written twice.
//
// Parameters live in Python (nn.Parameter, so optimizers, state_dict and .to() work as usual);
// before each forward the Python module hands them over with bind(), which points the C++
// parameters at the same storage (set_data: no copy). The C++ forward records its own autograd
// graph; the package's autograd.Function backpropagates through it with torch.autograd.grad and
// returns the gradients of the bound parameters.
#include <ATen/ATen.h>
#include <torch/custom_class.h>
#include <torch/library.h>

#include <string>
#include <vector>

#include "attention/attention.h"
#include "config/attention_spec.h"
#include "util/errors.h"

namespace sparsevit {
namespace {

class AttentionModuleHolder : public torch::CustomClassHolder {
 public:
  AttentionModuleHolder(const std::string& yaml, const std::string& source, const std::vector<std::string>& overrides,
                        std::vector<int64_t> geometry, int64_t layer, bool qkv_bias, double attn_drop,
                        double proj_drop) {
    if (geometry.size() != 5)
      throw UsageError("AttentionModule: geometry is [tokens, prefix_tokens, heads, head_dim, layers]");
    config::AttentionSpec spec = config::parse_attention_spec(yaml, source);
    config::apply_mask_kwarg_overrides(spec, overrides);
    attention::LayerOptions options;
    options.geometry = AttentionGeometry{geometry[0], geometry[1], geometry[2], geometry[3], geometry[4]};
    if (layer < 0 || layer >= options.geometry.num_layers)
      throw UsageError("AttentionModule: layer " + std::to_string(layer) + " outside [0, " +
                       std::to_string(options.geometry.num_layers) + ")");
    options.layer = layer;
    options.qkv_bias = qkv_bias;
    options.attn_drop = attn_drop;
    options.proj_drop = proj_drop;
    std::optional<patterns::Pattern> pattern;
    if (spec.has_mask() && !spec.has_dynamic_mask()) {
      if (options.geometry.num_tokens <= 0)
        throw UsageError("AttentionModule: mask '" + spec.mask + "' needs the sequence length (num_tokens)");
      pattern = std::move(config::build_layer_patterns(spec, options.geometry).at(static_cast<std::size_t>(layer)));
    }
    module_ = attention::make_attention(spec, options, std::move(pattern));
  }

  std::vector<std::string> parameter_names() const {
    std::vector<std::string> names;
    for (const auto& item : module_->named_parameters()) names.push_back(item.key());
    return names;
  }

  std::vector<at::Tensor> parameters() const { return module_->parameters(); }

  // Points every C++ parameter at `values` (same order as parameter_names), converts the
  // buffers to their dtype, and sets train/eval mode. Already-bound parameters are left alone,
  // so a graph recorded by an earlier forward keeps its tensors.
  void bind(const std::vector<at::Tensor>& values, bool training) {
    auto params = module_->parameters();
    if (values.size() != params.size())
      throw UsageError("AttentionModule.bind: " + std::to_string(values.size()) + " tensors for " +
                       std::to_string(params.size()) + " parameters");
    if (!values.empty() && values.front().scalar_type() != dtype_) {
      dtype_ = values.front().scalar_type();
      module_->to(dtype_);  // buffers (random features, rotations) follow the parameters' dtype
      params = module_->parameters();
    }
    at::NoGradGuard no_grad;
    for (std::size_t i = 0; i < params.size(); ++i) {
      at::Tensor& p = params[i];
      const at::Tensor& v = values[i];
      if (p.sizes() != v.sizes())
        throw UsageError("AttentionModule.bind: parameter " + std::to_string(i) + " has shape " +
                         c10::str(v.sizes()) + ", expected " + c10::str(p.sizes()));
      if (p.data_ptr() != v.data_ptr() || p.scalar_type() != v.scalar_type() || p.strides() != v.strides())
        p.set_data(v.detach());
    }
    module_->train(training);
  }

  at::Tensor forward(const at::Tensor& x) { return module_->forward(x); }
  void set_progress(double progress) { module_->set_progress(progress); }
  std::string kernel_name() const { return module_->kernel_name(); }
  double computed_pairs_per_head(int64_t num_tokens) const { return module_->computed_pairs_per_head(num_tokens); }

 private:
  std::shared_ptr<attention::AttentionModule> module_;
  at::ScalarType dtype_ = at::kFloat;
};

}  // namespace
}  // namespace sparsevit

TORCH_LIBRARY_FRAGMENT(sparsevit, m) {
  using sparsevit::AttentionModuleHolder;
  m.class_<AttentionModuleHolder>("AttentionModule")
      .def(torch::init<std::string, std::string, std::vector<std::string>, std::vector<int64_t>, int64_t, bool, double,
                       double>())
      .def("parameter_names", &AttentionModuleHolder::parameter_names)
      .def("parameters", &AttentionModuleHolder::parameters)
      .def("bind", &AttentionModuleHolder::bind)
      .def("forward", &AttentionModuleHolder::forward)
      .def("set_progress", &AttentionModuleHolder::set_progress)
      .def("kernel_name", &AttentionModuleHolder::kernel_name)
      .def("computed_pairs_per_head", &AttentionModuleHolder::computed_pairs_per_head);
}
