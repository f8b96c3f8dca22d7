// Sparse attention CPU kernels compiled for the avx512 instruction set (see sparse_attention_cpu_impl.h).
#define SPARSEVIT_CPU_ISA avx512
#define SPARSEVIT_CPU_VECTOR_BYTES 64
#include "ops/cpu/sparse_attention_cpu_impl.h"

namespace sparsevit::ops::cpu {
const KernelTable& kernel_table_avx512() { return avx512::table(); }
}  // namespace sparsevit::ops::cpu
