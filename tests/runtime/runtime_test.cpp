// runtime/: thread set-up (denormals flushed on every pool thread), bfloat16 autocast guard, the
// host description runs record.
#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <limits>
#include <sstream>

#include "runtime/autocast.h"
#include "runtime/cpu_threads.h"
#include "runtime/host_info.h"
#include "runtime/malloc_cache.h"

namespace sparsevit::runtime {
namespace {

TEST(CpuThreads, EveryPoolThreadFlushesDenormals) {
  // Start the pool in the default mode first: threads inherit the mode of the thread that
  // creates them, so only a pool that already exists tells whether every thread is reached.
  at::set_num_threads(2);
  at::globalContext().setFlushDenormal(false);
  (void)(at::ones({1 << 22}) * 2.0f).sum().item<float>();
  ASSERT_EQ(configure_cpu_threads(2), 2);
  ASSERT_EQ(at::get_num_threads(), 2);
  // A denormal input times 1: with denormals-are-zero on the thread that computes an element the
  // product is 0, without it the denormal survives. The tensor is large enough for ATen to split
  // it between both threads, so a pool thread left in the default mode leaves nonzeros.
  const float denormal = std::numeric_limits<float>::denorm_min() * 1000.0f;
  const at::Tensor x = at::full({1 << 22}, denormal);
  const at::Tensor y = x * 1.0f;
  EXPECT_EQ(y.count_nonzero().item<int64_t>(), 0) << "some pool thread still computes with denormals";
}

TEST(HostInfo, CpuModelIsTheFirstModelNameOfCpuinfo) {
  std::istringstream x86(
      "processor\t: 0\nvendor_id\t: GenuineIntel\nmodel\t\t: 85\n"
      "model name\t: Intel(R) Xeon(R) Processor  \r\nprocessor\t: 1\nmodel name\t: Other CPU\n");
  EXPECT_EQ(cpu_model_name(x86), "Intel(R) Xeon(R) Processor");
  std::istringstream arm("processor\t: 0\nBogoMIPS\t: 50.00\nCPU implementer\t: 0x41\n");
  EXPECT_EQ(cpu_model_name(arm), "unknown");
  std::istringstream empty_value("model name\t:   \nmodel name\t: AMD EPYC\n");
  EXPECT_EQ(cpu_model_name(empty_value), "AMD EPYC");
  EXPECT_FALSE(describe_host().cpu.empty());
  EXPECT_GT(describe_host().cores, 0);
  // The thread count a run records: --threads as given, or every core for 0.
  EXPECT_EQ(resolve_cpu_threads(3), 3);
  EXPECT_EQ(resolve_cpu_threads(0), std::max<int64_t>(1, describe_host().cores));
}

TEST(Autocast, GemmsRunInBfloat16InsideTheGuardOnly) {
  const at::Tensor a = at::randn({8, 16}), b = at::randn({16, 4});
  {
    const AutocastGuard guard(true);
    EXPECT_EQ(at::matmul(a, b).scalar_type(), at::kBFloat16);
    {
      const AutocastGuard nested(true);
      EXPECT_EQ(at::linear(a, b.t()).scalar_type(), at::kBFloat16);
    }
    EXPECT_EQ(at::matmul(a, b).scalar_type(), at::kBFloat16) << "leaving a nested guard must not switch it off";
    // Norms stay float32 (autocast's fp32 policy), so training keeps float32 statistics.
    EXPECT_EQ(at::layer_norm(a, {16}).scalar_type(), at::kFloat);
  }
  EXPECT_EQ(at::matmul(a, b).scalar_type(), at::kFloat);
  const AutocastGuard off(false);
  EXPECT_EQ(at::matmul(a, b).scalar_type(), at::kFloat);
}

TEST(MallocCache, LargeBlocksAreReusedWithTheSameContents) {
  enable_malloc_cache();
  enable_malloc_cache();  // idempotent
  // Freed blocks stay in the process; reusing them must still give fresh tensors their values.
  for (int i = 0; i < 3; ++i) {
    const at::Tensor t = at::full({4 << 20}, static_cast<float>(i));
    EXPECT_EQ(t.sum().item<double>(), static_cast<double>(i) * (4 << 20));
  }
}

}  // namespace
}  // namespace sparsevit::runtime
