#include "runtime/malloc_cache.h"

#if defined(__GLIBC__)
#include <malloc.h>
#endif

namespace sparsevit::runtime {

void enable_malloc_cache() {
#if defined(__GLIBC__)
  // Blocks up to 32 MiB come from the heap and stay there after free (one [128, 197, 256] float
  // activation is 25 MiB); larger ones are still mapped and unmapped.
  mallopt(M_MMAP_THRESHOLD, 32 * 1024 * 1024);
  mallopt(M_TRIM_THRESHOLD, 1 << 30);
#endif
}

}  // namespace sparsevit::runtime
