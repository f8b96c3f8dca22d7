// `mask: file`: attention patterns designed elsewhere (Python, another tool) read from a NumPy
// file, so the CLI trains and reports exactly that pattern. Two layouts (docs/masks.md, `file`):
//   .npz with int32/int64 `row_ptr` [L, H, N+1] or [H, N+1] and `col_idx` [L, H, W] or [H, W]
//   (per-head CSR; entries of col_idx past row_ptr[..., N] are padding), or
//   .npy bool/uint8 dense mask [L, H, N, N] or [H, N, N] (nonzero: the query attends the key).
// The file's first bytes decide which (a zip archive or a .npy), not its name.
#pragma once

#include <string>

#include "patterns/mask_registry.h"

namespace sparsevit::patterns {

// Layer context.layer's pattern as the file defines it: no head shuffle, no class-token rows or
// columns added. Geometry mismatches and malformed patterns (keys out of range or not strictly
// increasing within a row, a row without keys, a bad row_ptr) are RuntimeErrors naming the file.
Pattern load_pattern_file(const std::string& path, const MaskContext& context);

}  // namespace sparsevit::patterns
