// Typed .npy arrays: every supported dtype as NumPy writes it (fixtures made by
// tests/util/fixtures/make_npz_fixtures.py), round trips, and clear refusals of the rest.
#include "util/npy_array.h"

#include <gtest/gtest.h>

#include <string>

#include "util/errors.h"
#include "util/npy_file.h"

namespace sparsevit {
namespace {

const std::string kFixtures = SPARSEVIT_SOURCE_DIR "/tests/util/fixtures/";

std::vector<int64_t> ints(const NpyArray& a) {
  std::vector<int64_t> v;
  for (int64_t i = 0; i < a.count(); ++i) v.push_back(a.int_at(i));
  return v;
}

std::string runtime_error_message(const std::function<void()>& f) {
  try {
    f();
  } catch (const RuntimeError& e) {
    return e.what();
  } catch (const std::exception& e) {
    return std::string("<not a RuntimeError: ") + e.what() + ">";
  }
  return "<no exception>";
}

TEST(NpyArray, ReadsEveryDtypeNumpyWrites) {
  const NpyArray i4 = read_npy_array(kFixtures + "int32.npy", "test");
  EXPECT_EQ(i4.dtype, NpyDtype::kInt32);
  EXPECT_EQ(i4.shape, (std::vector<int64_t>{1, 3}));
  EXPECT_EQ(ints(i4), (std::vector<int64_t>{-2, 7, 2147483647}));
  const NpyArray i8 = read_npy_array(kFixtures + "int64.npy", "test");
  EXPECT_EQ(i8.dtype, NpyDtype::kInt64);
  EXPECT_EQ(ints(i8), (std::vector<int64_t>{-(int64_t{1} << 40), 5}));
  const NpyArray b1 = read_npy_array(kFixtures + "bool.npy", "test");
  EXPECT_EQ(b1.dtype, NpyDtype::kBool);
  EXPECT_EQ(b1.shape, (std::vector<int64_t>{2, 2}));
  EXPECT_EQ(ints(b1), (std::vector<int64_t>{1, 0, 0, 1}));
  const NpyArray u1 = read_npy_array(kFixtures + "uint8.npy", "test");
  EXPECT_EQ(u1.dtype, NpyDtype::kUInt8);
  EXPECT_EQ(ints(u1), (std::vector<int64_t>{0, 1, 255}));
  const NpyArray f4 = read_npy_array(kFixtures + "float32.npy", "test");
  EXPECT_EQ(f4.dtype, NpyDtype::kFloat32);
  EXPECT_FLOAT_EQ(f4.float_at(0), 0.5f);
  EXPECT_FLOAT_EQ(f4.float_at(1), -1.25f);
}

TEST(NpyArray, RefusesOtherDtypesAndLayoutsNamingTheFile) {
  const std::string f8 = runtime_error_message([] { read_npy_array(kFixtures + "float64.npy", "test"); });
  EXPECT_NE(f8.find("float64.npy"), std::string::npos) << f8;
  EXPECT_NE(f8.find("'<f8'"), std::string::npos) << f8;
  const std::string be = runtime_error_message([] { read_npy_array(kFixtures + "big_endian.npy", "test"); });
  EXPECT_NE(be.find("'>i4'"), std::string::npos) << be;
  const std::string fortran = runtime_error_message([] { read_npy_array(kFixtures + "fortran.npy", "test"); });
  EXPECT_NE(fortran.find("C-ordered"), std::string::npos) << fortran;
  const std::string missing = runtime_error_message([] { read_npy_array(kFixtures + "none.npy", "test"); });
  EXPECT_NE(missing.find("cannot open"), std::string::npos) << missing;
}

TEST(NpyArray, RoundTripsThroughBytes) {
  for (NpyDtype dtype : {NpyDtype::kInt32, NpyDtype::kInt64, NpyDtype::kBool, NpyDtype::kUInt8}) {
    const std::vector<int64_t> values = dtype == NpyDtype::kBool    ? std::vector<int64_t>{1, 0, 1, 1, 0, 0}
                                        : dtype == NpyDtype::kUInt8 ? std::vector<int64_t>{0, 9, 255, 3, 2, 1}
                                                                    : std::vector<int64_t>{-5, 0, 7, 1 << 30, 3, -1};
    const NpyArray a = make_npy_array(dtype, {2, 3}, values);
    const std::string bytes = npy_array_bytes(a);
    EXPECT_EQ(bytes.size() % 64, a.bytes.size() % 64) << npy_descr(dtype);  // header padded to 64
    const NpyArray b = parse_npy_array(bytes.data(), bytes.size(), "bytes");
    EXPECT_EQ(b.dtype, dtype);
    EXPECT_EQ(b.shape, a.shape);
    EXPECT_EQ(ints(b), values) << npy_descr(dtype);
  }
  EXPECT_THROW(make_npy_array(NpyDtype::kUInt8, {1}, {256}), std::invalid_argument);
  EXPECT_THROW(make_npy_array(NpyDtype::kInt32, {2}, {1}), std::invalid_argument);
}

TEST(NpyArray, ShortOrLongDataAndBadHeadersAreErrors) {
  const std::string good = npy_array_bytes(make_npy_array(NpyDtype::kInt32, {3}, {1, 2, 3}));
  const std::string shorter = good.substr(0, good.size() - 1);
  const std::string msg = runtime_error_message([&] { parse_npy_array(shorter.data(), shorter.size(), "m.npy"); });
  EXPECT_NE(msg.find("m.npy holds 11 data bytes, its shape needs 12"), std::string::npos) << msg;
  const std::string longer = good + "x";
  EXPECT_THROW(parse_npy_array(longer.data(), longer.size(), "m.npy"), RuntimeError);
  for (std::size_t cut : {0, 5, 9, 20}) EXPECT_THROW(parse_npy_array(good.data(), cut, "m.npy"), RuntimeError) << cut;
  std::string version = good;
  version[6] = 9;
  EXPECT_NE(runtime_error_message([&] { parse_npy_array(version.data(), version.size(), "m.npy"); }).find("version"),
            std::string::npos);
  std::string shape = good;
  shape.replace(shape.find("(3,)"), 4, "(3,x)");
  EXPECT_THROW(parse_npy_array(shape.data(), shape.size(), "m.npy"), RuntimeError);
}

TEST(NpyArray, TheFloat32ApiReadsThroughTheSameHeaderParser) {
  EXPECT_EQ(read_npy_float32(kFixtures + "float32.npy", "scores").values, (std::vector<float>{0.5f, -1.25f}));
  const std::string msg = runtime_error_message([] { read_npy_float32(kFixtures + "int32.npy", "scores"); });
  EXPECT_NE(msg.find("float32"), std::string::npos) << msg;
  EXPECT_NE(msg.find("int32.npy"), std::string::npos) << msg;
}

}  // namespace
}  // namespace sparsevit
