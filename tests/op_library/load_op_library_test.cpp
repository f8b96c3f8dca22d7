// Loads libsparsevit_ops.so the way torch.ops.load_library does (dlopen; this executable does
// not link it), finds `sparsevit::sparse_attention` through the dispatcher by name only, and
// checks its output and gradients in float64 against attention written here from plain ATen
// ops: what an independent reference outside the project sees.
#include <ATen/ATen.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <dlfcn.h>
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <string>

namespace {

const c10::OperatorHandle& sparse_attention_op() {
  static void* handle = [] {
    const std::string path = std::string(SPARSEVIT_BINARY_DIR) + "/libsparsevit_ops.so";
    void* h = dlopen(path.c_str(), RTLD_NOW | RTLD_GLOBAL);
    if (h == nullptr) ADD_FAILURE() << "dlopen " << path << ": " << dlerror();
    return h;
  }();
  (void)handle;
  static const c10::OperatorHandle op =
      c10::Dispatcher::singleton().findSchemaOrThrow("sparsevit::sparse_attention", "");
  return op;
}

at::Tensor call_op(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const at::Tensor& row_ptr,
                   const at::Tensor& col_idx, double scale) {
  return sparse_attention_op()
      .typed<at::Tensor(const at::Tensor&, const at::Tensor&, const at::Tensor&, const at::Tensor&,
                        const at::Tensor&, double)>()
      .call(q, k, v, row_ptr, col_idx, scale);
}

// A random per-head CSR over N tokens (some rows empty), as int64 [H, N+1] / [H, nnz_max].
std::pair<at::Tensor, at::Tensor> random_csr(int64_t H, int64_t N, double p, at::Tensor& dense_mask) {
  dense_mask = at::rand({H, N, N}, at::kDouble) < p;
  dense_mask.select(1, 0).zero_();  // query 0 of every head has no key: its output must be 0
  const at::Tensor counts = dense_mask.sum(-1);
  const at::Tensor row_ptr = at::cat({at::zeros({H, 1}, at::kLong), counts.cumsum(-1)}, 1);
  const int64_t nnz_max = std::max<int64_t>(1, row_ptr.select(1, N).max().item<int64_t>());
  at::Tensor col_idx = at::zeros({H, nnz_max}, at::kLong);
  for (int64_t h = 0; h < H; ++h) {
    const at::Tensor cols = dense_mask[h].nonzero().select(1, 1);
    col_idx[h].narrow(0, 0, cols.size(0)).copy_(cols);
  }
  return {row_ptr, col_idx};
}

TEST(OpLibrary, LoadedByNameMatchesPlainAtenAttentionInFloat64) {
  torch::manual_seed(3);
  for (const auto& [N, D] : std::vector<std::pair<int64_t, int64_t>>{{1, 8}, {13, 16}, {50, 64}, {197, 8}}) {
    SCOPED_TRACE("N=" + std::to_string(N) + " D=" + std::to_string(D));
    const int64_t B = 2, H = 3;
    at::Tensor mask;
    const auto [row_ptr, col_idx] = random_csr(H, N, 0.2, mask);
    auto opts = at::TensorOptions().dtype(at::kDouble).requires_grad(true);
    const at::Tensor q = torch::randn({B, H, N, D}, opts), k = torch::randn({B, H, N, D}, opts),
                     v = torch::randn({B, H, N, D}, opts);  // torch:: factories honour requires_grad
    const double scale = 1.0 / std::sqrt(static_cast<double>(D));
    const at::Tensor out = call_op(q, k, v, row_ptr, col_idx, scale);

    // Reference: scores, -inf off the pattern, softmax, rows without keys set to 0.
    const at::Tensor scores = at::matmul(q, k.transpose(-2, -1)) * scale;
    const at::Tensor probs =
        at::softmax(scores.masked_fill(mask.logical_not(), -INFINITY), -1).nan_to_num(0.0);
    const at::Tensor expected = at::matmul(probs, v);
    EXPECT_LT((out - expected).abs().max().item<double>(), 1e-9);
    EXPECT_EQ(out.select(2, 0).abs().max().item<double>(), 0.0);

    const at::Tensor grad_out = at::randn_like(out);
    const auto got = torch::autograd::grad({out}, {q, k, v}, {grad_out});
    const auto want = torch::autograd::grad({expected}, {q, k, v}, {grad_out});
    for (int i = 0; i < 3; ++i) EXPECT_LT((got[i] - want[i]).abs().max().item<double>(), 1e-9) << "gradient " << i;
  }
}

TEST(OpLibrary, Int32IndicesGiveTheSameResult) {
  torch::manual_seed(4);
  at::Tensor mask;
  const auto [row_ptr, col_idx] = random_csr(2, 20, 0.3, mask);
  const at::Tensor q = at::randn({1, 2, 20, 16}, at::kDouble), k = at::randn_like(q), v = at::randn_like(q);
  const at::Tensor a = call_op(q, k, v, row_ptr, col_idx, 0.25);
  const at::Tensor b = call_op(q, k, v, row_ptr.to(at::kInt), col_idx.to(at::kInt), 0.25);
  EXPECT_TRUE(at::equal(a, b));
}

// Seen from outside (torch.ops.load_library users compute gradient penalties with
// create_graph=True): the gradients must either carry a graph or refuse to be differentiated,
// never come back silently detached.
TEST(OpLibrary, DoubleBackwardIsRefusedNotSilentlyDetached) {
  torch::manual_seed(5);
  at::Tensor mask;
  const auto [row_ptr, col_idx] = random_csr(2, 16, 0.3, mask);
  const at::Tensor q = torch::randn({1, 2, 16, 8}, at::TensorOptions().dtype(at::kDouble).requires_grad(true));
  const at::Tensor out = call_op(q, q, q, row_ptr, col_idx, 0.5);
  const auto grads = torch::autograd::grad({out.pow(2).sum()}, {q}, {}, /*retain_graph=*/true, /*create_graph=*/true);
  ASSERT_TRUE(grads[0].requires_grad()) << "create_graph=true returned a gradient without a graph";
  try {
    grads[0].sum().backward();
    ADD_FAILURE() << "expected double backward to fail";
  } catch (const c10::Error& e) {
    EXPECT_NE(std::string(e.what()).find("double backward of sparsevit::sparse_attention is not supported"),
              std::string::npos)
        << e.what();
  }
}

// The packed op by name: qkv [B, N, 3*H*D] as a fused projection returns it, out [B, N, H*D],
// against the same plain-ATen attention on the [B, N, 3, H, D] views, output and d(qkv).
TEST(OpLibrary, PackedQkvOpLoadedByNameMatchesPlainAtenAttention) {
  sparse_attention_op();  // loads the library
  torch::manual_seed(6);
  const auto op = c10::Dispatcher::singleton()
                      .findSchemaOrThrow("sparsevit::sparse_attention_qkv", "")
                      .typed<at::Tensor(const at::Tensor&, int64_t, const at::Tensor&, const at::Tensor&, double)>();
  for (const auto& [N, D] : std::vector<std::pair<int64_t, int64_t>>{{13, 16}, {50, 64}}) {
    SCOPED_TRACE("N=" + std::to_string(N) + " D=" + std::to_string(D));
    const int64_t B = 2, H = 3;
    at::Tensor mask;
    const auto [row_ptr, col_idx] = random_csr(H, N, 0.2, mask);
    const at::Tensor qkv = torch::randn({B, N, 3 * H * D}, at::TensorOptions().dtype(at::kDouble).requires_grad(true));
    const double scale = 0.3;
    const at::Tensor out = op.call(qkv, H, row_ptr, col_idx, scale);
    ASSERT_EQ(out.sizes(), (std::vector<int64_t>{B, N, H * D}));
    const at::Tensor t = qkv.view({B, N, 3, H, D}).permute({2, 0, 3, 1, 4});
    const at::Tensor q = t[0], k = t[1], v = t[2];
    const at::Tensor probs = at::softmax((at::matmul(q, k.transpose(-2, -1)) * scale)
                                             .masked_fill(mask.logical_not(), -INFINITY), -1)
                                 .nan_to_num(0.0);
    const at::Tensor expected = at::matmul(probs, v).transpose(1, 2).reshape({B, N, H * D});
    EXPECT_LT((out - expected).abs().max().item<double>(), 1e-9);
    const at::Tensor grad_out = at::randn_like(out);
    const at::Tensor got = torch::autograd::grad({out}, {qkv}, {grad_out})[0];
    const at::Tensor want = torch::autograd::grad({expected}, {qkv}, {grad_out})[0];
    EXPECT_LT((got - want).abs().max().item<double>(), 1e-9);
  }
}

}  // namespace
