#include "runtime/malloc_cache.h"

#if defined(__GLIBC__)
#include <malloc.h>
#endif

namespace sparsevit::runtime {

void enable_malloc_cache() {
#if defined(__GLIBC__)
  // Every block comes from the heap and stays there after free (mmap's threshold cannot be set
  // above 32 MiB, and one [128, 197, 768] float activation of a ViT-Ti is 74 MiB); up to 1 GiB of
  // free heap top is kept instead of being returned to the kernel.
  mallopt(M_MMAP_MAX, 0);
  mallopt(M_TRIM_THRESHOLD, 1 << 30);
#endif
}

}  // namespace sparsevit::runtime
