// Autocast for the public sparsevit operators (torchvision's ops/autocast split): inside
// torch.autocast, float32 q, k, v (or qkv) run in the region's lower-precision dtype, as matmul and
// scaled_dot_product_attention do: bfloat16 on the CPU by default, float16 or bfloat16 on CUDA.
// float64 inputs are left alone (autocast never lowers them). Then the call goes on below autocast
// (autograd, then the device kernel), so gradients flow back through the casts.
#include <ATen/ATen.h>
#include <ATen/autocast_mode.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <c10/core/impl/LocalDispatchKeySet.h>
#include <torch/library.h>
#include <torch/version.h>

#include "ops/sparse_attention.h"

namespace sparsevit::ops {
namespace {

// LibTorch 2.4 replaced the per-device getters with get_autocast_dtype(device_type).
at::ScalarType autocast_dtype(c10::DeviceType device) {
#if TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 4)
  return at::autocast::get_autocast_dtype(device);
#else
  return device == c10::DeviceType::CUDA ? at::autocast::get_autocast_gpu_dtype()
                                         : at::autocast::get_autocast_cpu_dtype();
#endif
}

template <c10::DeviceType Device>
struct Autocast {
  static constexpr c10::DispatchKey kKey =
      Device == c10::DeviceType::CUDA ? c10::DispatchKey::AutocastCUDA : c10::DispatchKey::AutocastCPU;

  static at::Tensor cast(const at::Tensor& t) {
    // cached_cast lowers eligible float tensors only (float32 and the other half type), not float64.
    return at::autocast::cached_cast(autocast_dtype(Device), t, Device);
  }

  static at::Tensor attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                              const at::Tensor& row_ptr, const at::Tensor& col_idx, double scale) {
    c10::impl::ExcludeDispatchKeyGuard no_autocast(kKey);
    return sparse_attention(cast(q), cast(k), cast(v), row_ptr, col_idx, scale);
  }

  static at::Tensor qkv_attention(const at::Tensor& qkv, int64_t num_heads, const at::Tensor& row_ptr,
                                  const at::Tensor& col_idx, double scale) {
    c10::impl::ExcludeDispatchKeyGuard no_autocast(kKey);
    return sparse_attention_qkv(cast(qkv), num_heads, row_ptr, col_idx, scale);
  }
};

}  // namespace

TORCH_LIBRARY_IMPL(sparsevit, AutocastCPU, m) {
  m.impl("sparse_attention", TORCH_FN(Autocast<c10::DeviceType::CPU>::attention));
  m.impl("sparse_attention_qkv", TORCH_FN(Autocast<c10::DeviceType::CPU>::qkv_attention));
}

TORCH_LIBRARY_IMPL(sparsevit, AutocastCUDA, m) {
  m.impl("sparse_attention", TORCH_FN(Autocast<c10::DeviceType::CUDA>::attention));
  m.impl("sparse_attention_qkv", TORCH_FN(Autocast<c10::DeviceType::CUDA>::qkv_attention));
}

}  // namespace sparsevit::ops
