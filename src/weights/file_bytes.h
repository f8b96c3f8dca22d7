// A whole input file as bytes, for the weight readers (RuntimeError "<path>: cannot read: why").
#pragma once

#include <string>

namespace sparsevit::weights {

std::string read_file_bytes(const std::string& path);

}  // namespace sparsevit::weights
