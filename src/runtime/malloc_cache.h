// Keep freed memory in the process, as a caching allocator (PyTorch's on GPUs, jemalloc or
// tcmalloc on CPUs) would. LibTorch's CPU allocator is plain malloc; with glibc's defaults every
// tensor above the mmap threshold (128 KiB at first, adapting up to 32 MiB) is a fresh mmap, and
// freed heap top above the trim threshold goes back to the kernel, so a training step pays page
// faults and page zeroing for each of its large activations and gradients, every step.
#pragma once

namespace sparsevit::runtime {

// Turns off glibc's mmap for large blocks and raises its trim threshold to 1 GiB (process-wide;
// idempotent).
void enable_malloc_cache();

}  // namespace sparsevit::runtime
