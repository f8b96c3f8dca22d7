// The .npy header reader: findings of tests/fuzz/npy_fuzzer.cpp stay fixed.
#include "util/npy_file.h"

#include <gtest/gtest.h>

#include <sstream>
#include <string>

#include "util/errors.h"

namespace sparsevit {
namespace {

std::string npy_with_header(const std::string& dict) {
  std::string header = dict;
  header.append((64 - (10 + header.size() + 1) % 64) % 64, ' ');
  header.push_back('\n');
  std::string bytes = "\x93NUMPY";
  bytes.push_back(1);
  bytes.push_back(0);
  bytes.push_back(static_cast<char>(header.size() & 0xff));
  bytes.push_back(static_cast<char>(header.size() >> 8));
  return bytes + header;
}

std::vector<int64_t> read_header(const std::string& bytes) {
  std::istringstream in(bytes);
  return read_npy_float32_header(in, "x.npy", "scores");
}

TEST(NpyHeader, ReadsTheShape) {
  EXPECT_EQ(read_header(npy_with_header("{'descr': '<f4', 'fortran_order': False, 'shape': (3, 2, 10, 10), }")),
            (std::vector<int64_t>{3, 2, 10, 10}));
  EXPECT_EQ(read_header(npy_with_header("{'descr': '<f4', 'fortran_order': False, 'shape': (), }")),
            std::vector<int64_t>{});
}

TEST(NpyHeader, HugeDimensionsAreCorruptHeadersNotCrashes) {
  // Fuzzer finding: a 20-digit dimension made std::stoll throw std::out_of_range (terminate).
  EXPECT_THROW(read_header(npy_with_header("{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999999999999, 2), }")),
               RuntimeError);
  // Dimensions that fit but whose product overflows.
  EXPECT_THROW(read_header(npy_with_header("{'descr': '<f4', 'fortran_order': False, 'shape': (4000000000, 4000000000), }")),
               RuntimeError);
  // Leading zeros are still a small number.
  EXPECT_EQ(read_header(npy_with_header("{'descr': '<f4', 'fortran_order': False, 'shape': (0000000000000000000005,), }")),
            std::vector<int64_t>{5});
}

}  // namespace
}  // namespace sparsevit
