// Picks the widest compiled kernel table the running CPU supports.
#include <cstdlib>
#include <cstring>

#include "ops/cpu/sparse_attention_cpu_kernels.h"

namespace sparsevit::ops::cpu {
namespace {

const KernelTable& detect() {
  // SPARSEVIT_CPU_ISA caps the choice (for tests and A/B timings); unknown values are ignored.
  const char* cap = std::getenv("SPARSEVIT_CPU_ISA");
  const bool allow_avx512 = cap == nullptr || std::strcmp(cap, "avx512") == 0;
  const bool allow_avx2 = allow_avx512 || std::strcmp(cap, "avx2") == 0;
  __builtin_cpu_init();
  if (allow_avx512 && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vl") &&
      __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("fma")) {
    return kernel_table_avx512();
  }
  if (allow_avx2 && __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return kernel_table_avx2();
  return kernel_table_default();
}

}  // namespace

const KernelTable& kernel_table() {
  static const KernelTable& table = detect();
  return table;
}

}  // namespace sparsevit::ops::cpu
