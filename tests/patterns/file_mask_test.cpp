// `mask: file`: patterns read from .npz (CSR) and .npy (dense) files reproduce the patterns they
// were written from, layer by layer, and every malformed file is a RuntimeError naming it.
#include "patterns/file_mask.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <functional>

#include "patterns/pattern_stats.h"
#include "util/errors.h"
#include "util/npz_file.h"

namespace sparsevit::patterns {
namespace {

namespace fs = std::filesystem;

class FileMaskTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("sparsevit_file_mask_test_" + std::to_string(::getpid()));
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string path(const std::string& name) const { return (dir_ / name).string(); }
  fs::path dir_;
};

MaskKwargs file_kwargs(const std::string& path) {
  MaskKwargs kw;
  kw.set_scalar("pattern_file", path, "cfg.yaml:4");
  return kw;
}

// The layers' CSR as an .npz: [L, H, ...] (or [H, ...] from layers[0] when !per_layer), col_idx
// padded with `pad` extra entries of junk that the reader must ignore.
void write_csr(const std::string& path, const std::vector<Pattern>& layers, bool per_layer, NpyDtype dtype,
               bool compress, int64_t pad = 0) {
  const std::size_t count = per_layer ? layers.size() : 1;
  const int64_t heads = layers[0].num_heads(), n = layers[0].num_tokens();
  int64_t width = 0;
  for (std::size_t l = 0; l < count; ++l) width = std::max(width, layers[l].max_edges());
  width += pad;
  std::vector<int64_t> row_ptr, col_idx;
  for (std::size_t l = 0; l < count; ++l)
    for (int32_t h = 0; h < heads; ++h) {
      for (int32_t v : layers[l].row_ptr(h)) row_ptr.push_back(v);
      for (int32_t k : layers[l].col_idx(h)) col_idx.push_back(k);
      for (int64_t e = layers[l].edges(h); e < width; ++e) col_idx.push_back(-7);  // padding junk
    }
  std::vector<int64_t> lead = per_layer ? std::vector<int64_t>{static_cast<int64_t>(count), heads} : std::vector<int64_t>{heads};
  std::vector<int64_t> rp_shape = lead, ci_shape = lead;
  rp_shape.push_back(n + 1);
  ci_shape.push_back(width);
  write_npz(path, {{"row_ptr", make_npy_array(dtype, rp_shape, row_ptr)}, {"col_idx", make_npy_array(dtype, ci_shape, col_idx)}},
            compress);
}

// Dense [L, H, N, N] (or [H, N, N]) mask of the layers.
void write_dense(const std::string& path, const std::vector<Pattern>& layers, bool per_layer, NpyDtype dtype) {
  const std::size_t count = per_layer ? layers.size() : 1;
  const int32_t heads = layers[0].num_heads(), n = layers[0].num_tokens();
  std::vector<int64_t> values;
  for (std::size_t l = 0; l < count; ++l)
    for (int32_t h = 0; h < heads; ++h)
      for (int32_t j = 0; j < n; ++j)
        for (int32_t k = 0; k < n; ++k) values.push_back(layers[l].contains(h, j, k) ? 1 : 0);
  std::vector<int64_t> shape = {heads, n, n};
  if (per_layer) shape.insert(shape.begin(), static_cast<int64_t>(count));
  const std::string bytes = npy_array_bytes(make_npy_array(dtype, shape, values));
  std::ofstream(path, std::ios::binary) << bytes;
}

void expect_same(const Pattern& a, const Pattern& b, const std::string& what) {
  ASSERT_EQ(a.num_tokens(), b.num_tokens()) << what;
  ASSERT_EQ(a.num_heads(), b.num_heads()) << what;
  EXPECT_EQ(a.num_prefix_tokens(), b.num_prefix_tokens()) << what;
  for (int32_t h = 0; h < a.num_heads(); ++h) {
    EXPECT_EQ(a.row_ptr(h), b.row_ptr(h)) << what << " head " << h;
    EXPECT_EQ(a.col_idx(h), b.col_idx(h)) << what << " head " << h;
  }
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const RuntimeError& e) {
    return e.what();
  } catch (const std::exception& e) {
    return std::string("<not a RuntimeError: ") + e.what() + ">";
  }
  return "<no exception>";
}

const AttentionGeometry kGeometry{17, 1, 3, 64, 4};

TEST_F(FileMaskTest, FibottentionWrittenAsCsrReadsBackIdentically) {
  // fibo shuffles heads per layer: a per-layer file must keep every layer's own pattern.
  const auto fibo = build_layer_masks("fibo", kGeometry, MaskKwargs());
  for (NpyDtype dtype : {NpyDtype::kInt32, NpyDtype::kInt64})
    for (bool compress : {false, true}) {
      write_csr(path("fibo.npz"), fibo, true, dtype, compress, 3);
      const auto read = build_layer_masks("file", kGeometry, file_kwargs(path("fibo.npz")));
      ASSERT_EQ(read.size(), fibo.size());
      for (std::size_t l = 0; l < fibo.size(); ++l)
        expect_same(read[l], fibo[l], "layer " + std::to_string(l) + (compress ? " deflated" : " stored"));
      EXPECT_DOUBLE_EQ(pruning_ratio(read), pruning_ratio(fibo));
    }
}

TEST_F(FileMaskTest, OneHeadsLayoutServesEveryLayer) {
  MaskKwargs local;
  local.set_scalar("window", "2");
  const auto source = build_layer_masks("local", kGeometry, local);
  write_csr(path("local.npz"), source, false, NpyDtype::kInt64, false);
  const auto read = build_layer_masks("file", kGeometry, file_kwargs(path("local.npz")));
  for (std::size_t l = 0; l < read.size(); ++l) expect_same(read[l], source[0], "layer " + std::to_string(l));
}

TEST_F(FileMaskTest, DenseMasksReadBackIdentically) {
  MaskKwargs bigbird;
  bigbird.set_scalar("seed", "3");
  const auto source = build_layer_masks("bigbird", kGeometry, bigbird);
  write_dense(path("bigbird.npy"), source, true, NpyDtype::kBool);
  const auto read = build_layer_masks("file", kGeometry, file_kwargs(path("bigbird.npy")));
  for (std::size_t l = 0; l < read.size(); ++l) expect_same(read[l], source[l], "layer " + std::to_string(l));
  write_dense(path("shared.npy"), source, false, NpyDtype::kUInt8);
  for (const auto& layer : build_layer_masks("file", kGeometry, file_kwargs(path("shared.npy"))))
    expect_same(layer, source[0], "shared uint8");
}

TEST_F(FileMaskTest, ThePatternIsExactlyTheFilesWithoutClassTokenAdditions) {
  // Every row attends only itself: nothing is added for the class token.
  Pattern diagonal(17, 3, 1);
  for (int32_t h = 0; h < 3; ++h) diagonal.set_head(h, [](int32_t j, std::vector<int32_t>& keys) { keys.push_back(j); });
  write_csr(path("diag.npz"), {diagonal}, false, NpyDtype::kInt32, true);
  const Pattern read = build_mask("file", MaskContext{kGeometry, 2}, file_kwargs(path("diag.npz")));
  expect_same(read, diagonal, "diagonal");
  EXPECT_EQ(read.total_edges(), 3 * 17);
  EXPECT_FALSE(read.diagonals(0).has_value());
}

TEST_F(FileMaskTest, GeometryMismatchesNameBothSides) {
  const auto fibo = build_layer_masks("fibo", kGeometry, MaskKwargs());
  write_csr(path("p.npz"), fibo, true, NpyDtype::kInt32, false);
  const std::string tokens = error_of([&] { build_layer_masks("file", {18, 1, 3, 64, 4}, file_kwargs(path("p.npz"))); });
  EXPECT_NE(tokens.find("p.npz"), std::string::npos) << tokens;
  EXPECT_NE(tokens.find("N=17 tokens and H=3 heads; the model has N=18 tokens and H=3 heads"), std::string::npos) << tokens;
  const std::string heads = error_of([&] { build_layer_masks("file", {17, 1, 2, 64, 4}, file_kwargs(path("p.npz"))); });
  EXPECT_NE(heads.find("the model has N=17 tokens and H=2 heads"), std::string::npos) << heads;
  const std::string layers = error_of([&] { build_layer_masks("file", {17, 1, 3, 64, 5}, file_kwargs(path("p.npz"))); });
  EXPECT_NE(layers.find("has 4 layers, the model 5"), std::string::npos) << layers;
  write_dense(path("d.npy"), fibo, true, NpyDtype::kBool);
  const std::string dense = error_of([&] { build_layer_masks("file", {18, 1, 3, 64, 4}, file_kwargs(path("d.npy"))); });
  EXPECT_NE(dense.find("the model has N=18 tokens"), std::string::npos) << dense;
}

// A one-head, N=3 CSR file with the given arrays; the error building it (or "<no exception>").
std::string csr_error(const std::string& path, std::vector<int64_t> row_ptr, std::vector<int64_t> col_idx,
                      NpyDtype dtype = NpyDtype::kInt32) {
  const int64_t w = static_cast<int64_t>(col_idx.size());
  write_npz(path, {{"row_ptr", make_npy_array(dtype, {1, 4}, row_ptr)}, {"col_idx", make_npy_array(dtype, {1, w}, col_idx)}},
            false);
  return error_of([&] { build_mask("file", MaskContext{{3, 0, 1, 64, 1}, 0}, file_kwargs(path)); });
}

TEST_F(FileMaskTest, MalformedCsrIsRefusedWithItsReason) {
  const std::string p = path("bad.npz");
  EXPECT_EQ(csr_error(p, {0, 1, 2, 3}, {0, 1, 2}), "<no exception>");
  EXPECT_EQ(csr_error(p, {0, 1, 2, 3}, {0, 1, 2, 99, -4}), "<no exception>");  // padding is ignored
  auto expect = [&](const std::string& msg, const std::string& part) {
    EXPECT_NE(msg.find(part), std::string::npos) << msg;
    EXPECT_NE(msg.find("bad.npz"), std::string::npos) << msg;
  };
  expect(csr_error(p, {1, 1, 2, 3}, {0, 1, 2}), "row_ptr[0] is 1, must be 0");
  expect(csr_error(p, {0, 2, 1, 3}, {0, 1, 2}), "row_ptr decreases at row 1");
  expect(csr_error(p, {0, 1, 2, 4}, {0, 1, 2}), "row_ptr[3] = 4 exceeds col_idx's width W=3");
  expect(csr_error(p, {0, 1, 1, 2}, {0, 1, 2}), "row 1 has no keys");
  expect(csr_error(p, {0, 1, 2, 3}, {0, 3, 2}), "row 1 has key 3 outside [0, 3)");
  expect(csr_error(p, {0, 1, 2, 3}, {-1, 1, 2}), "row 0 has key -1 outside [0, 3)");
  expect(csr_error(p, {0, 1, 3, 4}, {0, 2, 1, 2}), "row 1's keys are not strictly increasing (2 then 1)");
  expect(csr_error(p, {0, 1, 3, 4}, {0, 1, 1, 2}), "row 1's keys are not strictly increasing (1 then 1)");
  expect(csr_error(p, {0, 1, 2, 3}, {0, 1, 2}, NpyDtype::kUInt8), "row_ptr must be int32 or int64, not '|u1'");
  EXPECT_EQ(csr_error(p, {0, 1, 2, 3}, {0, 1, 2}, NpyDtype::kInt64), "<no exception>");
}

TEST_F(FileMaskTest, MalformedFilesAndKwargsAreRefused) {
  const MaskContext ctx{{3, 0, 1, 64, 1}, 0};
  write_npz(path("other.npz"), {{"scores", make_npy_array(NpyDtype::kInt32, {1}, {0})}}, false);
  const std::string members = error_of([&] { build_mask("file", ctx, file_kwargs(path("other.npz"))); });
  EXPECT_NE(members.find("must hold arrays 'row_ptr' and 'col_idx' (it holds: scores)"), std::string::npos) << members;
  write_npz(path("mixed.npz"), {{"row_ptr", make_npy_array(NpyDtype::kInt32, {1, 4}, {0, 1, 2, 3})},
                                {"col_idx", make_npy_array(NpyDtype::kInt32, {1, 1, 3}, {0, 1, 2})}},
            false);
  const std::string mixed = error_of([&] { build_mask("file", ctx, file_kwargs(path("mixed.npz"))); });
  EXPECT_NE(mixed.find("must share their leading"), std::string::npos) << mixed;
  // A dense mask with an empty row, and a dense mask of the wrong dtype.
  std::ofstream(path("empty_row.npy"), std::ios::binary)
      << npy_array_bytes(make_npy_array(NpyDtype::kBool, {1, 3, 3}, {1, 0, 0, 0, 0, 0, 0, 0, 1}));
  const std::string empty = error_of([&] { build_mask("file", ctx, file_kwargs(path("empty_row.npy"))); });
  EXPECT_NE(empty.find("head 0: row 1 has no keys"), std::string::npos) << empty;
  std::ofstream(path("ints.npy"), std::ios::binary) << npy_array_bytes(make_npy_array(NpyDtype::kInt32, {1, 3, 3}, std::vector<int64_t>(9, 1)));
  const std::string dtype = error_of([&] { build_mask("file", ctx, file_kwargs(path("ints.npy"))); });
  EXPECT_NE(dtype.find("must be a bool or uint8 mask, not '<i4'"), std::string::npos) << dtype;
  std::ofstream(path("text.txt")) << "hello";
  const std::string text = error_of([&] { build_mask("file", ctx, file_kwargs(path("text.txt"))); });
  EXPECT_NE(text.find("neither an .npz archive"), std::string::npos) << text;
  const std::string missing = error_of([&] { build_mask("file", ctx, file_kwargs(path("none.npz"))); });
  EXPECT_NE(missing.find("cannot open pattern file"), std::string::npos) << missing;
  EXPECT_NE(missing.find("none.npz"), std::string::npos) << missing;
  EXPECT_THROW(build_mask("file", ctx, MaskKwargs()), UsageError);
  MaskKwargs list;
  list.set_list("pattern_file", {"a.npz", "b.npz"});
  EXPECT_THROW(build_mask("file", ctx, list), UsageError);
  MaskKwargs typo;
  typo.set_scalar("pattern_fle", "a.npz");
  EXPECT_THROW(build_mask("file", ctx, typo), UsageError);
}

}  // namespace
}  // namespace sparsevit::patterns
