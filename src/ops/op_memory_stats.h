// Accounting of the bytes the sparse attention operator allocates (outputs, saved log-sum-exp,
// index conversions, contiguous copies, per-edge and per-thread workspaces).
//
// Every kernel call adds the bytes it allocated; `sparsevit bench` resets the counters before one
// timed iteration and reports `bytes_allocated` as `peak_extra_bytes`. The sum over the calls of
// an iteration is an upper bound of the operator's peak (it assumes nothing is freed in between).
#pragma once

#include <cstdint>

namespace sparsevit::ops {

struct OpMemoryStats {
  int64_t bytes_allocated = 0;  // summed over calls since the last reset
  int64_t max_call_bytes = 0;   // the largest single call
  int64_t calls = 0;
};

void record_op_allocation(int64_t bytes);
void reset_op_memory_stats();
OpMemoryStats op_memory_stats();

}  // namespace sparsevit::ops
