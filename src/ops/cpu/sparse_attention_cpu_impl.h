// Sparse attention CPU kernels, written once and compiled per instruction set.
//
// Included only by sparse_attention_cpu_{default,avx2,avx512}.cpp, each of which defines
//   SPARSEVIT_CPU_ISA           the namespace / table name (default_isa, avx2, avx512)
//   SPARSEVIT_CPU_VECTOR_BYTES  the SIMD register width in bytes (16, 32, 64)
// and is compiled with the matching -m flags. Everything here has internal linkage (anonymous
// namespace) and uses no out-of-line standard-library templates, so no function compiled for
// a wider instruction set can leak into code that runs on a CPU without it.
//
// Vectorisation uses GCC/Clang vector extensions: arithmetic on `V<T>` compiles to one SIMD
// instruction per register (xmm/ymm/zmm by ISA). Dot products over D keep W-lane partial sums
// (4 keys at a time, sharing the query loads) and reduce them by halving; the weighted sums
// accumulate 4 value rows per pass over the output row. float32 exp is a vectorised Cephes-style
// polynomial (max error ~2 ulp); float64 uses std::exp (it serves gradcheck and references).
//
// The kernels live in role headers, included here in dependency order inside the per-ISA
// anonymous namespace (each refuses to be included any other way):
//   cpu_simd.h              vector types, bf16 storage, reductions, row helpers, exp/log
//   cpu_fixed_row.h         compile-time-D row primitives, row cursor, dispatch_dim
//   cpu_csr_kernels.h       general kernels over the CSR pattern (row-block, per-row, key pass)
//   cpu_diagonal_kernels.h  structured kernels for diagonal-offset patterns
// This file then builds the ISA's kernel table from their entry points.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <type_traits>
#include <utility>
#include <algorithm>

#include "ops/cpu/sparse_attention_cpu_kernels.h"

#ifndef SPARSEVIT_CPU_ISA
#error "define SPARSEVIT_CPU_ISA before including sparse_attention_cpu_impl.h"
#endif
#ifndef SPARSEVIT_CPU_VECTOR_BYTES
#error "define SPARSEVIT_CPU_VECTOR_BYTES before including sparse_attention_cpu_impl.h"
#endif

#define SV_INLINE inline __attribute__((always_inline))

namespace sparsevit::ops::cpu::SPARSEVIT_CPU_ISA {
namespace {

// The role headers hold only bodies; they check this macro so that none is included outside
// the per-ISA anonymous namespace (which would give its functions external linkage).
#define SPARSEVIT_CPU_IMPL_NAMESPACE_OPEN
#include "ops/cpu/cpu_simd.h"
#include "ops/cpu/cpu_fixed_row.h"
#include "ops/cpu/cpu_csr_kernels.h"
#include "ops/cpu/cpu_diagonal_kernels.h"
#undef SPARSEVIT_CPU_IMPL_NAMESPACE_OPEN

}  // namespace

#define SPARSEVIT_CPU_STR2(x) #x
#define SPARSEVIT_CPU_STR(x) SPARSEVIT_CPU_STR2(x)

const KernelTable& table() {
  static const KernelTable t{
      SPARSEVIT_CPU_STR(SPARSEVIT_CPU_ISA),
      {&forward_rows<float, float>, &backward_query_rows<float, float>, &backward_key_rows<float, float>, &forward_rows_diagonal<float, float>,
       &backward_query_rows_diagonal<float, float>, &backward_key_rows_diagonal<float, float>},
      {&forward_rows<double, double>, &backward_query_rows<double, double>, &backward_key_rows<double, double>, &forward_rows_diagonal<double, double>,
       &backward_query_rows_diagonal<double, double>, &backward_key_rows_diagonal<double, double>},
      {&forward_rows<float, Bf16>, &backward_query_rows<float, Bf16>, &backward_key_rows<float, Bf16>,
       &forward_rows_diagonal<float, Bf16>, &backward_query_rows_diagonal<float, Bf16>,
       &backward_key_rows_diagonal<float, Bf16>},
  };
  return t;
}

}  // namespace sparsevit::ops::cpu::SPARSEVIT_CPU_ISA

#undef SV_INLINE
