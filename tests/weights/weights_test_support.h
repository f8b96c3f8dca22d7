// Shared by the weights tests: fixture paths, the fixtures' expected values, exact comparison, a
// scratch folder, and "this call throws RuntimeError naming the path".
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include <ATen/ATen.h>
#include <nlohmann/json.hpp>

#include "util/errors.h"
#include "weights/named_tensors.h"

namespace sparsevit::weights::testing {

inline std::string fixture(const std::string& name) {
  return std::string(SPARSEVIT_SOURCE_DIR) + "/tests/weights/fixtures/" + name;
}

inline std::string file_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

inline void write_bytes(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary).write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

inline at::ScalarType dtype_of(const std::string& name) {
  if (name == "F64") return at::kDouble;
  if (name == "F32") return at::kFloat;
  if (name == "F16") return at::kHalf;
  if (name == "BF16") return at::kBFloat16;
  if (name == "I64") return at::kLong;
  if (name == "I32") return at::kInt;
  if (name == "BOOL") return at::kBool;
  ADD_FAILURE() << "unknown dtype " << name;
  return at::kFloat;
}

// `<fixture>.expected.json`: [[name, dtype, shape, flat values], ...].
inline void expect_matches_fixture(const weights::NamedTensors& got, const std::string& expected_json) {
  const auto expected = nlohmann::json::parse(file_bytes(fixture(expected_json)));
  ASSERT_EQ(got.size(), expected.size());
  for (size_t i = 0; i < got.size(); ++i) {
    const auto& e = expected[i];
    const at::Tensor& t = got[i].second;
    SCOPED_TRACE(got[i].first);
    EXPECT_EQ(got[i].first, e[0].get<std::string>());
    EXPECT_EQ(t.scalar_type(), dtype_of(e[1].get<std::string>()));
    EXPECT_EQ(t.sizes().vec(), e[2].get<std::vector<int64_t>>());
    EXPECT_TRUE(t.is_contiguous());
    const at::Tensor flat = t.reshape(-1);
    ASSERT_EQ(static_cast<size_t>(flat.numel()), e[3].size());
    for (int64_t k = 0; k < flat.numel(); ++k) {
      const auto& value = e[3][static_cast<size_t>(k)];
      if (t.scalar_type() == at::kBool) EXPECT_EQ(flat[k].item<bool>(), value.get<bool>());
      else if (at::isIntegralType(t.scalar_type(), false)) EXPECT_EQ(flat[k].item<int64_t>(), value.get<int64_t>());
      else EXPECT_EQ(flat[k].item<double>(), value.get<double>());
    }
  }
}

inline void expect_same(const weights::NamedTensors& a, const weights::NamedTensors& b) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].first, b[i].first);
    EXPECT_EQ(a[i].second.scalar_type(), b[i].second.scalar_type()) << a[i].first;
    EXPECT_TRUE(at::equal(a[i].second, b[i].second)) << a[i].first;
  }
}

// A tensor of every supported dtype, with values that survive exactly.
inline weights::NamedTensors every_dtype() {
  const at::Tensor base = at::arange(6, at::kDouble).reshape({2, 3}) * 0.5 - 1.0;
  return {{"f64", base},
          {"f32", base.to(at::kFloat).t()},  // non-contiguous on purpose
          {"f16", base.to(at::kHalf)},
          {"bf16", base.to(at::kBFloat16)},
          {"i64", at::tensor(std::vector<int64_t>{int64_t{1} << 60, -3}, at::kLong)},
          {"i32", at::tensor({-7, 9}, at::kInt)},
          {"i16", at::tensor({-300}, at::kShort)},
          {"i8", at::tensor({-5, 4}, at::kChar)},
          {"u8", at::tensor({250, 1}, at::kByte)},
          {"bool", at::tensor({1, 0, 1}, at::kByte).to(at::kBool)},
          {"scalar", at::scalar_tensor(3.5, at::kFloat)},
          {"empty", at::zeros({0, 4})}};
}

class ScratchDir : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("sparsevit_weights_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string path(const std::string& name) const { return (dir_ / name).string(); }
  std::filesystem::path dir_;
};

#define EXPECT_RUNTIME_ERROR_WITH(statement, path, fragment)                                  \
  do {                                                                                        \
    try {                                                                                     \
      statement;                                                                              \
      ADD_FAILURE() << "no RuntimeError from " #statement;                                    \
    } catch (const ::sparsevit::RuntimeError& e) {                                            \
      const std::string what = e.what();                                                      \
      EXPECT_EQ(what.rfind(path, 0), 0u) << what;                                             \
      EXPECT_NE(what.find(fragment), std::string::npos) << what;                              \
      EXPECT_EQ(what.find('\n'), std::string::npos) << what;                                  \
    }                                                                                         \
  } while (0)

}  // namespace sparsevit::weights::testing
