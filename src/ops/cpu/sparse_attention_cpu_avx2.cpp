// Sparse attention CPU kernels compiled for the avx2 instruction set (see sparse_attention_cpu_impl.h).
#define SPARSEVIT_CPU_ISA avx2
#define SPARSEVIT_CPU_VECTOR_BYTES 32
#include "ops/cpu/sparse_attention_cpu_impl.h"

namespace sparsevit::ops::cpu {
const KernelTable& kernel_table_avx2() { return avx2::table(); }
}  // namespace sparsevit::ops::cpu
