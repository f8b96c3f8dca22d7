// Autograd for sparsevit::sparse_attention and sparsevit::sparse_attention_qkv: the forward and backward call the private ops through
// the dispatcher, so each backend (CPU now, CUDA later) only registers kernels.
#include <ATen/core/dispatch/Dispatcher.h>
#include <torch/autograd.h>
#include <torch/library.h>

#include <tuple>

namespace sparsevit::ops {
namespace {

std::tuple<at::Tensor, at::Tensor> call_forward(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                                                const at::Tensor& row_ptr, const at::Tensor& col_idx, double scale) {
  static auto op = c10::Dispatcher::singleton()
                       .findSchemaOrThrow("sparsevit::_sparse_attention_forward", "")
                       .typed<std::tuple<at::Tensor, at::Tensor>(const at::Tensor&, const at::Tensor&,
                                                                 const at::Tensor&, const at::Tensor&,
                                                                 const at::Tensor&, double)>();
  return op.call(q, k, v, row_ptr, col_idx, scale);
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> call_backward(const at::Tensor& grad_out, const at::Tensor& q,
                                                             const at::Tensor& k, const at::Tensor& v,
                                                             const at::Tensor& out, const at::Tensor& lse,
                                                             const at::Tensor& row_ptr, const at::Tensor& col_idx,
                                                             double scale) {
  static auto op =
      c10::Dispatcher::singleton()
          .findSchemaOrThrow("sparsevit::_sparse_attention_backward", "")
          .typed<std::tuple<at::Tensor, at::Tensor, at::Tensor>(
              const at::Tensor&, const at::Tensor&, const at::Tensor&, const at::Tensor&, const at::Tensor&,
              const at::Tensor&, const at::Tensor&, const at::Tensor&, double)>();
  return op.call(grad_out, q, k, v, out, lse, row_ptr, col_idx, scale);
}

class SparseAttentionFunction : public torch::autograd::Function<SparseAttentionFunction> {
 public:
  static torch::autograd::variable_list forward(torch::autograd::AutogradContext* ctx, const at::Tensor& q,
                                                const at::Tensor& k, const at::Tensor& v, const at::Tensor& row_ptr,
                                                const at::Tensor& col_idx, double scale) {
    at::AutoDispatchBelowADInplaceOrView guard;
    auto [out, lse] = call_forward(q, k, v, row_ptr, col_idx, scale);
    ctx->saved_data["scale"] = scale;
    ctx->save_for_backward({q, k, v, out, lse, row_ptr, col_idx});
    return {out};
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grad_outputs) {
    const auto saved = ctx->get_saved_variables();
    const double scale = ctx->saved_data["scale"].toDouble();
    auto [dq, dk, dv] =
        call_backward(grad_outputs[0], saved[0], saved[1], saved[2], saved[3], saved[4], saved[5], saved[6], scale);
    return {dq, dk, dv, at::Tensor(), at::Tensor(), at::Tensor()};
  }
};

at::Tensor sparse_attention_autograd(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                                     const at::Tensor& row_ptr, const at::Tensor& col_idx, double scale) {
  return SparseAttentionFunction::apply(q, k, v, row_ptr, col_idx, scale)[0];
}

// The private ops get refusing autograd kernels (torchvision does this for its backward ops):
// they run below autograd, and a graph built through them (create_graph=true, i.e. double
// backward) ends in a node that fails with a clear message instead of gradients that silently
// have no graph.
class SparseAttentionBackwardFunction : public torch::autograd::Function<SparseAttentionBackwardFunction> {
 public:
  static torch::autograd::variable_list forward(torch::autograd::AutogradContext*, const at::Tensor& grad_out,
                                                const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                                                const at::Tensor& out, const at::Tensor& lse,
                                                const at::Tensor& row_ptr, const at::Tensor& col_idx, double scale) {
    at::AutoDispatchBelowADInplaceOrView guard;
    auto [dq, dk, dv] = call_backward(grad_out, q, k, v, out, lse, row_ptr, col_idx, scale);
    return {dq, dk, dv};
  }
  static torch::autograd::variable_list backward(torch::autograd::AutogradContext*, torch::autograd::variable_list) {
    TORCH_CHECK(false,
                "double backward of sparsevit::sparse_attention is not supported (its gradients are computed by "
                "sparsevit::_sparse_attention_backward, which has no derivative)");
  }
};

std::tuple<at::Tensor, at::Tensor, at::Tensor> sparse_attention_backward_autograd(
    const at::Tensor& grad_out, const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const at::Tensor& out,
    const at::Tensor& lse, const at::Tensor& row_ptr, const at::Tensor& col_idx, double scale) {
  const auto g = SparseAttentionBackwardFunction::apply(grad_out, q, k, v, out, lse, row_ptr, col_idx, scale);
  return {g[0], g[1], g[2]};
}

class SparseAttentionForwardFunction : public torch::autograd::Function<SparseAttentionForwardFunction> {
 public:
  static torch::autograd::variable_list forward(torch::autograd::AutogradContext*, const at::Tensor& q,
                                                const at::Tensor& k, const at::Tensor& v, const at::Tensor& row_ptr,
                                                const at::Tensor& col_idx, double scale) {
    at::AutoDispatchBelowADInplaceOrView guard;
    auto [out, lse] = call_forward(q, k, v, row_ptr, col_idx, scale);
    return {out, lse};
  }
  static torch::autograd::variable_list backward(torch::autograd::AutogradContext*, torch::autograd::variable_list) {
    TORCH_CHECK(false,
                "sparsevit::_sparse_attention_forward has no derivative; differentiate sparsevit::sparse_attention "
                "instead");
  }
};

std::tuple<at::Tensor, at::Tensor> sparse_attention_forward_autograd(const at::Tensor& q, const at::Tensor& k,
                                                                     const at::Tensor& v, const at::Tensor& row_ptr,
                                                                     const at::Tensor& col_idx, double scale) {
  const auto r = SparseAttentionForwardFunction::apply(q, k, v, row_ptr, col_idx, scale);
  return {r[0], r[1]};
}

// ---- packed qkv ----------------------------------------------------------------------------

std::tuple<at::Tensor, at::Tensor> call_qkv_forward(const at::Tensor& qkv, int64_t num_heads, const at::Tensor& row_ptr,
                                                    const at::Tensor& col_idx, double scale) {
  static auto op = c10::Dispatcher::singleton()
                       .findSchemaOrThrow("sparsevit::_sparse_attention_qkv_forward", "")
                       .typed<std::tuple<at::Tensor, at::Tensor>(const at::Tensor&, int64_t, const at::Tensor&,
                                                                 const at::Tensor&, double)>();
  return op.call(qkv, num_heads, row_ptr, col_idx, scale);
}

at::Tensor call_qkv_backward(const at::Tensor& grad_out, const at::Tensor& qkv, const at::Tensor& out,
                             const at::Tensor& lse, int64_t num_heads, const at::Tensor& row_ptr,
                             const at::Tensor& col_idx, double scale) {
  static auto op = c10::Dispatcher::singleton()
                       .findSchemaOrThrow("sparsevit::_sparse_attention_qkv_backward", "")
                       .typed<at::Tensor(const at::Tensor&, const at::Tensor&, const at::Tensor&, const at::Tensor&,
                                         int64_t, const at::Tensor&, const at::Tensor&, double)>();
  return op.call(grad_out, qkv, out, lse, num_heads, row_ptr, col_idx, scale);
}

class SparseAttentionQkvFunction : public torch::autograd::Function<SparseAttentionQkvFunction> {
 public:
  static torch::autograd::variable_list forward(torch::autograd::AutogradContext* ctx, const at::Tensor& qkv,
                                                int64_t num_heads, const at::Tensor& row_ptr,
                                                const at::Tensor& col_idx, double scale) {
    at::AutoDispatchBelowADInplaceOrView guard;
    auto [out, lse] = call_qkv_forward(qkv, num_heads, row_ptr, col_idx, scale);
    ctx->saved_data["scale"] = scale;
    ctx->saved_data["num_heads"] = num_heads;
    ctx->save_for_backward({qkv, out, lse, row_ptr, col_idx});
    return {out};
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grad_outputs) {
    const auto saved = ctx->get_saved_variables();
    const double scale = ctx->saved_data["scale"].toDouble();
    const int64_t num_heads = ctx->saved_data["num_heads"].toInt();
    at::Tensor dqkv =
        call_qkv_backward(grad_outputs[0], saved[0], saved[1], saved[2], num_heads, saved[3], saved[4], scale);
    return {dqkv, at::Tensor(), at::Tensor(), at::Tensor(), at::Tensor()};
  }
};

at::Tensor sparse_attention_qkv_autograd(const at::Tensor& qkv, int64_t num_heads, const at::Tensor& row_ptr,
                                         const at::Tensor& col_idx, double scale) {
  return SparseAttentionQkvFunction::apply(qkv, num_heads, row_ptr, col_idx, scale)[0];
}

class SparseAttentionQkvBackwardFunction : public torch::autograd::Function<SparseAttentionQkvBackwardFunction> {
 public:
  static torch::autograd::variable_list forward(torch::autograd::AutogradContext*, const at::Tensor& grad_out,
                                                const at::Tensor& qkv, const at::Tensor& out, const at::Tensor& lse,
                                                int64_t num_heads, const at::Tensor& row_ptr,
                                                const at::Tensor& col_idx, double scale) {
    at::AutoDispatchBelowADInplaceOrView guard;
    return {call_qkv_backward(grad_out, qkv, out, lse, num_heads, row_ptr, col_idx, scale)};
  }
  static torch::autograd::variable_list backward(torch::autograd::AutogradContext*, torch::autograd::variable_list) {
    TORCH_CHECK(false,
                "double backward of sparsevit::sparse_attention_qkv is not supported (its gradient is computed by "
                "sparsevit::_sparse_attention_qkv_backward, which has no derivative)");
  }
};

at::Tensor sparse_attention_qkv_backward_autograd(const at::Tensor& grad_out, const at::Tensor& qkv,
                                                  const at::Tensor& out, const at::Tensor& lse, int64_t num_heads,
                                                  const at::Tensor& row_ptr, const at::Tensor& col_idx, double scale) {
  return SparseAttentionQkvBackwardFunction::apply(grad_out, qkv, out, lse, num_heads, row_ptr, col_idx, scale)[0];
}

class SparseAttentionQkvForwardFunction : public torch::autograd::Function<SparseAttentionQkvForwardFunction> {
 public:
  static torch::autograd::variable_list forward(torch::autograd::AutogradContext*, const at::Tensor& qkv,
                                                int64_t num_heads, const at::Tensor& row_ptr,
                                                const at::Tensor& col_idx, double scale) {
    at::AutoDispatchBelowADInplaceOrView guard;
    auto [out, lse] = call_qkv_forward(qkv, num_heads, row_ptr, col_idx, scale);
    return {out, lse};
  }
  static torch::autograd::variable_list backward(torch::autograd::AutogradContext*, torch::autograd::variable_list) {
    TORCH_CHECK(false,
                "sparsevit::_sparse_attention_qkv_forward has no derivative; differentiate "
                "sparsevit::sparse_attention_qkv instead");
  }
};

std::tuple<at::Tensor, at::Tensor> sparse_attention_qkv_forward_autograd(const at::Tensor& qkv, int64_t num_heads,
                                                                         const at::Tensor& row_ptr,
                                                                         const at::Tensor& col_idx, double scale) {
  const auto r = SparseAttentionQkvForwardFunction::apply(qkv, num_heads, row_ptr, col_idx, scale);
  return {r[0], r[1]};
}

}  // namespace

TORCH_LIBRARY_IMPL(sparsevit, Autograd, m) {
  m.impl("sparse_attention", TORCH_FN(sparse_attention_autograd));
  m.impl("_sparse_attention_forward", TORCH_FN(sparse_attention_forward_autograd));
  m.impl("_sparse_attention_backward", TORCH_FN(sparse_attention_backward_autograd));
  m.impl("sparse_attention_qkv", TORCH_FN(sparse_attention_qkv_autograd));
  m.impl("_sparse_attention_qkv_forward", TORCH_FN(sparse_attention_qkv_forward_autograd));
  m.impl("_sparse_attention_qkv_backward", TORCH_FN(sparse_attention_qkv_backward_autograd));
}

}  // namespace sparsevit::ops
