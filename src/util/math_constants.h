// Mathematical constants shared by the layers (C++17 has no std::numbers; c10's differ between
// LibTorch 1.13 and 2.x).
#pragma once

namespace sparsevit {

inline constexpr double kPi = 3.14159265358979323846;

}  // namespace sparsevit
