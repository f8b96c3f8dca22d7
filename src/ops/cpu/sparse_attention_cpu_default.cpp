// Sparse attention CPU kernels compiled for the default instruction set (see sparse_attention_cpu_impl.h).
#define SPARSEVIT_CPU_ISA default_isa
#define SPARSEVIT_CPU_VECTOR_BYTES 16
#include "ops/cpu/sparse_attention_cpu_impl.h"

namespace sparsevit::ops::cpu {
const KernelTable& kernel_table_default() { return default_isa::table(); }
}  // namespace sparsevit::ops::cpu
