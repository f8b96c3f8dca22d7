// The baseline mask generators (local, random, sparse_transformer, bigbird, longformer, pruning,
// topk) and the registry: closed-form edge counts, membership rules, seeded determinism,
// pruning-ratio targets, .npy score files, and the CSR / structure-hint invariants of every
// generator (docs/masks.md).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "patterns/mask_generators.h"
#include "patterns/mask_registry.h"
#include "patterns/pattern_stats.h"
#include "patterns/pruning_mask.h"
#include "patterns/topk_mask.h"
#include "util/errors.h"

#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#if defined(__SANITIZE_ADDRESS__)
#define SPARSEVIT_TEST_UNDER_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define SPARSEVIT_TEST_UNDER_ASAN 1
#endif
#endif
#ifndef SPARSEVIT_TEST_UNDER_ASAN
#define SPARSEVIT_TEST_UNDER_ASAN 0
#endif

namespace sparsevit::patterns {
namespace {

// ---------------------------------------------------------------------------------------------
// helpers

Pattern build(const std::string& mask, int32_t n, int32_t h, const MaskKwargs& kw, int32_t layer = 0,
              int32_t layers = 1, int32_t prefix = 1) {
  return build_mask(mask, MaskContext{{n, prefix, h, 64, layers}, layer}, kw);
}

MaskKwargs kwargs(std::initializer_list<std::pair<const char*, const char*>> items) {
  MaskKwargs kw;
  for (const auto& [k, v] : items) kw.set_scalar(k, v);
  return kw;
}

std::vector<int32_t> row_keys(const Pattern& p, int32_t h, int32_t j) {
  const auto& ptr = p.row_ptr(h);
  const auto& cols = p.col_idx(h);
  return std::vector<int32_t>(cols.begin() + ptr[j], cols.begin() + ptr[j + 1]);
}

// row_ptr monotone from 0 to edges, keys of every row strictly increasing and in [0, N).
void expect_csr_well_formed(const Pattern& p, const std::string& what) {
  const int32_t n = p.num_tokens();
  for (int32_t h = 0; h < p.num_heads(); ++h) {
    const auto& ptr = p.row_ptr(h);
    const auto& cols = p.col_idx(h);
    ASSERT_EQ(static_cast<int32_t>(ptr.size()), n + 1) << what << " head " << h;
    ASSERT_EQ(ptr.front(), 0) << what << " head " << h;
    ASSERT_EQ(static_cast<int64_t>(ptr.back()), static_cast<int64_t>(cols.size())) << what << " head " << h;
    ASSERT_EQ(p.edges(h), static_cast<int64_t>(cols.size())) << what;
    for (int32_t j = 0; j < n; ++j) {
      ASSERT_LE(ptr[j], ptr[j + 1]) << what << " head " << h << " row " << j;
      for (int32_t e = ptr[j]; e < ptr[j + 1]; ++e) {
        ASSERT_GE(cols[e], 0) << what << " head " << h << " row " << j;
        ASSERT_LT(cols[e], n) << what << " head " << h << " row " << j;
        if (e > ptr[j]) {
          ASSERT_LT(cols[e - 1], cols[e]) << what << " head " << h << " row " << j;
        }
      }
    }
  }
  int64_t total = 0, widest = 0;
  for (int32_t h = 0; h < p.num_heads(); ++h) {
    total += p.edges(h);
    widest = std::max(widest, p.edges(h));
  }
  EXPECT_EQ(p.total_edges(), total) << what;
  EXPECT_EQ(p.max_edges(), widest) << what;
}

// Where a DiagonalStructure hint is present it must describe the CSR exactly.
void expect_hint_exact(const Pattern& p, const std::string& what) {
  const int32_t n = p.num_tokens();
  for (int32_t h = 0; h < p.num_heads(); ++h) {
    const auto& hint = p.diagonals(h);
    if (!hint) continue;
    const auto& offsets = hint->offsets;
    const auto& globals = hint->global_tokens;
    ASSERT_TRUE(std::is_sorted(offsets.begin(), offsets.end())) << what;
    ASSERT_TRUE(std::adjacent_find(offsets.begin(), offsets.end()) == offsets.end()) << what;
    for (int32_t o : offsets) {
      ASSERT_GE(o, 0) << what;
      ASSERT_LT(o, n) << what;
    }
    ASSERT_TRUE(std::is_sorted(globals.begin(), globals.end())) << what;
    ASSERT_TRUE(std::adjacent_find(globals.begin(), globals.end()) == globals.end()) << what;
    std::vector<char> is_offset(n, 0), is_global(n, 0);
    for (int32_t o : offsets) is_offset[o] = 1;
    for (int32_t g : globals) {
      ASSERT_GE(g, 0) << what;
      ASSERT_LT(g, n) << what;
      is_global[g] = 1;
    }
    int64_t expected_edges = 0;
    for (int32_t j = 0; j < n; ++j)
      for (int32_t k = 0; k < n; ++k) {
        const bool in = is_global[j] || is_global[k] || is_offset[std::abs(j - k)];
        expected_edges += in;
        ASSERT_EQ(p.contains(h, j, k), in) << what << " head " << h << " (" << j << "," << k << ")";
      }
    EXPECT_EQ(p.edges(h), expected_edges) << what << " head " << h;
  }
}

void expect_same_pattern(const Pattern& a, const Pattern& b, const std::string& what) {
  ASSERT_EQ(a.num_tokens(), b.num_tokens()) << what;
  ASSERT_EQ(a.num_heads(), b.num_heads()) << what;
  ASSERT_EQ(a.num_prefix_tokens(), b.num_prefix_tokens()) << what;
  for (int32_t h = 0; h < a.num_heads(); ++h) {
    EXPECT_EQ(a.row_ptr(h), b.row_ptr(h)) << what << " head " << h;
    EXPECT_EQ(a.col_idx(h), b.col_idx(h)) << what << " head " << h;
    EXPECT_EQ(a.window(h), b.window(h)) << what << " head " << h;
    ASSERT_EQ(a.diagonals(h).has_value(), b.diagonals(h).has_value()) << what << " head " << h;
    if (a.diagonals(h)) {
      EXPECT_EQ(a.diagonals(h)->offsets, b.diagonals(h)->offsets) << what << " head " << h;
      EXPECT_EQ(a.diagonals(h)->global_tokens, b.diagonals(h)->global_tokens) << what << " head " << h;
    }
  }
}

bool same_edges(const Pattern& a, const Pattern& b) {
  if (a.num_heads() != b.num_heads()) return false;
  for (int32_t h = 0; h < a.num_heads(); ++h)
    if (a.row_ptr(h) != b.row_ptr(h) || a.col_idx(h) != b.col_idx(h)) return false;
  return true;
}

bool same_head(const Pattern& p, int32_t a, int32_t b) {
  return p.row_ptr(a) == p.row_ptr(b) && p.col_idx(a) == p.col_idx(b);
}

// Patch edges of the symmetric diagonal set {0 if diag} ∪ {o : o in offsets} over P patches.
int64_t closed_form_patch_edges(const std::vector<int32_t>& offsets, int32_t patches) {
  int64_t e = 0;
  for (int32_t o : offsets) e += o == 0 ? patches : 2 * static_cast<int64_t>(patches - o);
  return e;
}

std::vector<int32_t> range_offsets(int32_t from, int32_t to, int32_t step = 1) {
  std::vector<int32_t> v;
  for (int32_t o = from; o <= to; o += step) v.push_back(o);
  return v;
}

template <class F>
std::string usage_error_message(F&& f) {
  try {
    f();
  } catch (const UsageError& e) {
    return e.what();
  } catch (const std::exception& e) {
    return std::string("<not a UsageError: ") + e.what() + ">";
  }
  return "<no exception>";
}

// Runs `f` in a forked child under a memory cap and an alarm, so a generator that tries to
// materialise a huge input fails this test instead of the machine. True when f returned true.
template <class F>
bool runs_bounded(F&& f, unsigned seconds = 10, rlim_t memory_bytes = rlim_t{1} << 30) {
  std::fflush(nullptr);
  const pid_t pid = ::fork();
  if (pid < 0) return false;
  if (pid == 0) {
    const struct rlimit cap = {memory_bytes, memory_bytes};
    ::setrlimit(RLIMIT_AS, &cap);
    ::alarm(seconds);
    int code = 3;
    try {
      code = f() ? 0 : 1;
    } catch (...) {
      code = 2;
    }
    ::_exit(code);
  }
  int status = 0;
  if (::waitpid(pid, &status, 0) != pid) return false;
  return WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

// ---------------------------------------------------------------------------------------------
// .npy writer for the pruning tests: float32 '<f4', C order, format version 1.0.

std::string npy_header(const std::vector<int64_t>& shape, const std::string& descr = "<f4") {
  // numpy writes "(2, 3, 4)" and, for one dimension, "(5,)".
  std::string dims;
  for (std::size_t i = 0; i < shape.size(); ++i) {
    if (i) dims += ", ";
    dims += std::to_string(shape[i]);
  }
  if (shape.size() == 1) dims += ",";
  std::string dict = "{'descr': '" + descr + "', 'fortran_order': False, 'shape': (" + dims + "), }";
  const std::size_t prefix = 10;
  std::size_t total = prefix + dict.size() + 1;
  const std::size_t padded = (total + 63) / 64 * 64;
  dict += std::string(padded - total, ' ');
  dict += '\n';
  std::string out = "\x93NUMPY";
  out += '\x01';
  out += '\x00';
  const uint16_t len = static_cast<uint16_t>(dict.size());
  out += static_cast<char>(len & 0xff);
  out += static_cast<char>(len >> 8);
  out += dict;
  return out;
}

std::string npy_bytes(const std::vector<int64_t>& shape, const std::vector<float>& data,
                      const std::string& descr = "<f4") {
  std::string out = npy_header(shape, descr);
  for (float v : data) {
    uint32_t bits;
    std::memcpy(&bits, &v, 4);
    for (int b = 0; b < 4; ++b) out += static_cast<char>((bits >> (8 * b)) & 0xff);  // little-endian
  }
  return out;
}

class TempDir {
 public:
  TempDir() {
    static int counter = 0;
    path_ = std::filesystem::temp_directory_path() /
            ("sparsevit_baseline_masks_" + std::to_string(::getpid()) + "_" + std::to_string(counter++));
    std::filesystem::create_directories(path_);
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  std::string file(const std::string& name, const std::string& bytes) const {
    const std::string p = (path_ / name).string();
    std::ofstream out(p, std::ios::binary);
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    return p;
  }

 private:
  std::filesystem::path path_;
};

// Distinct scores for L layers, H heads, N x N, reproducible.
std::vector<float> distinct_scores(int64_t count, uint64_t seed) {
  std::vector<float> v(count);
  for (int64_t i = 0; i < count; ++i) v[i] = static_cast<float>(i) / static_cast<float>(count);
  std::mt19937_64 rng(seed);
  for (int64_t i = count - 1; i > 0; --i) std::swap(v[i], v[rng() % static_cast<uint64_t>(i + 1)]);
  return v;
}

// =============================================================================================
// local

TEST(LocalMask, ClosedFormEdgeCountsWithAndWithoutDiagonal) {
  const int32_t n = 197, p = 196;
  for (int32_t w : {0, 1, 2, 5, 10, 30}) {
    for (bool diag : {true, false}) {
      MaskKwargs kw;
      kw.set_scalar("window", std::to_string(w)).set_scalar("include_diagonal", diag ? "true" : "false");
      const Pattern pat = build("local", n, 3, kw);
      int64_t patch = diag ? p : 0;
      for (int32_t o = 1; o <= w; ++o) patch += 2 * (p - o);
      for (int32_t h = 0; h < 3; ++h) {
        EXPECT_EQ(patch_edges(pat, h), patch) << "w=" << w << " diag=" << diag;
        EXPECT_EQ(pat.edges(h), patch + 2 * n - 1) << "w=" << w << " diag=" << diag;  // + class row and column
        EXPECT_EQ(pat.window(h).value(), w);
        EXPECT_EQ(pat.diagonals(h)->offsets, range_offsets(diag ? 0 : 1, w));
        EXPECT_EQ(pat.diagonals(h)->global_tokens, std::vector<int32_t>{0});
      }
      EXPECT_NEAR(pruning_ratio(pat), 1.0 - static_cast<double>(patch) / (p * p), 1e-12);
      EXPECT_NEAR(density(pat), static_cast<double>(patch + 2 * n - 1) / (n * n), 1e-12);
    }
  }
}

TEST(LocalMask, LiteraturePruningRatiosAt196Patches) {
  // The fixed local window |j-k| <= w without the main diagonal over 196 patch tokens.
  auto ratio = [](int w) {
    MaskKwargs kw;
    kw.set_scalar("window", std::to_string(w)).set_scalar("include_diagonal", "false");
    return pruning_ratio(build("local", 197, 12, kw));
  };
  EXPECT_NEAR(ratio(2), 0.9797, 5e-5);
  EXPECT_NEAR(ratio(10), 0.9008, 5e-5);
  EXPECT_DOUBLE_EQ(ratio(2), 1.0 - 778.0 / 38416.0);
  EXPECT_DOUBLE_EQ(ratio(10), 1.0 - 3810.0 / 38416.0);
}

TEST(LocalMask, Dilation) {
  for (bool diag : {true, false}) {
    MaskKwargs kw;
    kw.set_scalar("window", "10").set_scalar("dilation", "3").set_scalar("include_diagonal", diag ? "1" : "0");
    const Pattern pat = build("local", 40, 2, kw);
    std::vector<int32_t> expected = diag ? std::vector<int32_t>{0, 3, 6, 9} : std::vector<int32_t>{3, 6, 9};
    for (int32_t h = 0; h < 2; ++h) {
      EXPECT_EQ(pat.diagonals(h)->offsets, expected);
      EXPECT_EQ(patch_edges(pat, h), closed_form_patch_edges(expected, 39));
    }
    expect_hint_exact(pat, "local dilated");
    EXPECT_FALSE(pat.contains(0, 20, 22));
    EXPECT_TRUE(pat.contains(0, 20, 23));
    EXPECT_TRUE(pat.contains(0, 20, 11));
    EXPECT_FALSE(pat.contains(0, 20, 8));  // offset 12 > window
  }
}

TEST(LocalMask, HeadWindows) {
  MaskKwargs kw;
  kw.set_list("head_windows", {"1", "4", "0"});
  const Pattern pat = build("local", 30, 3, kw);
  const int64_t expected_windows[] = {1, 4, 0};
  for (int32_t h = 0; h < 3; ++h) {
    EXPECT_EQ(pat.window(h).value(), expected_windows[h]);
    EXPECT_EQ(pat.diagonals(h)->offsets, range_offsets(0, static_cast<int32_t>(expected_windows[h])));
    EXPECT_EQ(patch_edges(pat, h), closed_form_patch_edges(range_offsets(0, static_cast<int32_t>(expected_windows[h])), 29));
  }
  expect_hint_exact(pat, "local head_windows");
  MaskKwargs wrong;
  wrong.set_list("head_windows", {"1", "2"});
  EXPECT_THROW(build("local", 30, 3, wrong), UsageError);
  MaskKwargs negative;
  negative.set_list("head_windows", {"1", "-2", "3"});
  EXPECT_THROW(build("local", 30, 3, negative), UsageError);
}

TEST(LocalMask, LayerWindowsGrowWithDepth) {
  MaskKwargs kw;
  kw.set_list("layer_windows", {"1", "3", "6"});
  const auto layers = build_layer_masks("local", AttentionGeometry{30, 1, 2, 64, 3}, kw);
  ASSERT_EQ(layers.size(), 3u);
  const int32_t expected[] = {1, 3, 6};
  for (int32_t l = 0; l < 3; ++l)
    for (int32_t h = 0; h < 2; ++h) {
      EXPECT_EQ(layers[l].window(h).value(), expected[l]);
      EXPECT_EQ(layers[l].diagonals(h)->offsets, range_offsets(0, expected[l]));
    }
  MaskKwargs wrong;
  wrong.set_list("layer_windows", {"1", "3"});
  EXPECT_THROW(build_layer_masks("local", AttentionGeometry{30, 1, 2, 64, 3}, wrong), UsageError);
}

TEST(LocalMask, OnlyOneWindowSource) {
  MaskKwargs kw;
  kw.set_scalar("window", "2").set_list("head_windows", {"1", "1"});
  EXPECT_THROW(build("local", 30, 2, kw), UsageError);
  EXPECT_THROW(build("local", 30, 2, kwargs({{"window", "2"}, {"pruning_ratio", "0.9"}})), UsageError);
}

TEST(LocalMask, PruningRatioTargetMetWithinTheGranularity) {
  const int32_t n = 197, p = 196;
  for (double target : {0.98, 0.9, 0.75, 0.5, 0.0, 1.0}) {
    for (bool diag : {true, false}) {
      MaskKwargs kw;
      kw.set_scalar("pruning_ratio", std::to_string(target)).set_scalar("include_diagonal", diag ? "true" : "false");
      const Pattern pat = build("local", n, 2, kw);
      const int32_t w = static_cast<int32_t>(pat.window(0).value());
      auto ratio_of = [&](int32_t win) {
        return 1.0 - static_cast<double>(closed_form_patch_edges(range_offsets(diag ? 0 : 1, win), p)) / (p * p);
      };
      EXPECT_NEAR(pruning_ratio(pat), ratio_of(w), 1e-12);
      // No other window is strictly closer to the target.
      for (int32_t other = 0; other < p; ++other)
        EXPECT_LE(std::abs(ratio_of(w) - target), std::abs(ratio_of(other) - target) + 1e-12)
            << "target " << target << " diag " << diag << " chose " << w << " but " << other << " is closer";
    }
  }
  // 0.98 without the diagonal lands on w = 2 (0.9797).
  MaskKwargs kw;
  kw.set_scalar("pruning_ratio", "0.98").set_scalar("include_diagonal", "false");
  EXPECT_EQ(build("local", n, 1, kw).window(0).value(), 2);
}

TEST(LocalMask, WindowLargerThanTheSequenceIsClampedWithAWarning) {
  const Pattern pat = build("local", 17, 2, kwargs({{"window", "1000"}}));
  EXPECT_EQ(pat.window(0).value(), 16);
  EXPECT_FALSE(pat.warnings().empty());
  for (int32_t h = 0; h < 2; ++h) EXPECT_EQ(pat.edges(h), 17 * 17);
  EXPECT_NEAR(pruning_ratio(pat), 0.0, 1e-12);
  EXPECT_TRUE(build("local", 17, 2, kwargs({{"window", "3"}})).warnings().empty());
}

TEST(LocalMask, ClassTokenNoneTreatsTokenZeroAsAPatch) {
  const Pattern pat = build("local", 20, 1, kwargs({{"window", "1"}, {"class_token", "none"}}), 0, 1, 0);
  EXPECT_TRUE(pat.diagonals(0)->global_tokens.empty());
  EXPECT_EQ(row_keys(pat, 0, 0), (std::vector<int32_t>{0, 1}));
  EXPECT_EQ(pat.edges(0), closed_form_patch_edges({0, 1}, 20));
  // `global` needs a class token.
  EXPECT_THROW(build("local", 20, 1, kwargs({{"class_token", "global"}}), 0, 1, 0), UsageError);
  // A model with a class token may still choose `none`: row 0 is then an ordinary row.
  const Pattern none = build("local", 20, 1, kwargs({{"window", "1"}, {"class_token", "none"}}));
  EXPECT_EQ(row_keys(none, 0, 0), (std::vector<int32_t>{0, 1}));
  EXPECT_EQ(row_keys(none, 0, 5), (std::vector<int32_t>{4, 5, 6}));
}

TEST(LocalMask, InvalidValuesAreUsageErrors) {
  EXPECT_THROW(build("local", 20, 1, kwargs({{"window", "-1"}})), UsageError);
  EXPECT_THROW(build("local", 20, 1, kwargs({{"dilation", "0"}})), UsageError);
  EXPECT_THROW(build("local", 20, 1, kwargs({{"window", "two"}})), UsageError);
  EXPECT_THROW(build("local", 20, 1, kwargs({{"include_diagonal", "maybe"}})), UsageError);
  EXPECT_THROW(build("local", 20, 1, kwargs({{"pruning_ratio", "1.5"}})), UsageError);
  EXPECT_THROW(build("local", 20, 1, kwargs({{"class_token", "first"}})), UsageError);
}

// =============================================================================================
// random

TEST(RandomMask, ExactlyRDistinctKeysPerNonClassRow) {
  const int32_t n = 50, heads = 4;
  for (int32_t r : {0, 1, 5, 20, 49}) {
    const Pattern pat = build("random", n, heads, kwargs({{"keys_per_query", std::to_string(r).c_str()}}));
    expect_csr_well_formed(pat, "random");
    for (int32_t h = 0; h < heads; ++h) {
      EXPECT_EQ(row_keys(pat, h, 0).size(), static_cast<std::size_t>(n)) << "class row is global";
      for (int32_t j = 1; j < n; ++j) {
        const auto keys = row_keys(pat, h, j);
        ASSERT_FALSE(keys.empty());
        EXPECT_EQ(keys.front(), 0) << "class column is global";
        // The CSR deduplicates: r patch keys left means r distinct keys were drawn.
        EXPECT_EQ(static_cast<int32_t>(keys.size()) - 1, r) << "head " << h << " row " << j;
      }
      EXPECT_EQ(patch_edges(pat, h), static_cast<int64_t>(r) * (n - 1));
      EXPECT_EQ(pat.edges(h), static_cast<int64_t>(r) * (n - 1) + 2 * n - 1);
    }
  }
}

TEST(RandomMask, WithoutClassTokenEveryRowHasRKeys) {
  const Pattern pat = build("random", 30, 2, kwargs({{"keys_per_query", "7"}, {"class_token", "none"}}), 0, 1, 0);
  for (int32_t h = 0; h < 2; ++h)
    for (int32_t j = 0; j < 30; ++j) EXPECT_EQ(row_keys(pat, h, j).size(), 7u);
  // r above the candidates is clamped to every key.
  const Pattern full = build("random", 10, 1, kwargs({{"keys_per_query", "1000"}}));
  EXPECT_EQ(full.edges(0), 100);
}

TEST(RandomMask, DeterministicUnderSeedAndDifferentAcrossSeedsLayersHeads) {
  const MaskKwargs kw = kwargs({{"keys_per_query", "6"}, {"seed", "3"}});
  const Pattern a = build("random", 64, 4, kw, 1, 3);
  const Pattern b = build("random", 64, 4, kw, 1, 3);
  expect_same_pattern(a, b, "random seed 3");
  EXPECT_FALSE(same_edges(a, build("random", 64, 4, kwargs({{"keys_per_query", "6"}, {"seed", "4"}}), 1, 3)));
  EXPECT_FALSE(same_edges(a, build("random", 64, 4, kw, 0, 3)));
  EXPECT_FALSE(same_edges(a, build("random", 64, 4, kw, 2, 3)));
  EXPECT_FALSE(same_head(a, 0, 1));
  EXPECT_FALSE(same_head(a, 2, 3));
  // Rows within a head differ too (not one sample repeated).
  std::set<std::vector<int32_t>> rows;
  for (int32_t j = 1; j < 64; ++j) rows.insert(row_keys(a, 0, j));
  EXPECT_GT(rows.size(), 50u);
}

TEST(RandomMask, KeysAreRoughlyUniform) {
  const int32_t n = 41;
  const Pattern pat = build("random", n, 8, kwargs({{"keys_per_query", "4"}}), 0, 1);
  std::vector<int64_t> hits(n, 0);
  for (int32_t h = 0; h < 8; ++h)
    for (int32_t j = 1; j < n; ++j)
      for (int32_t k : row_keys(pat, h, j))
        if (k > 0) ++hits[k];
  // 8 heads * 40 rows * 4 keys over 40 patch keys: 32 per key on average.
  for (int32_t k = 1; k < n; ++k) {
    EXPECT_GT(hits[k], 8) << k;
    EXPECT_LT(hits[k], 70) << k;
  }
}

TEST(RandomMask, DensityAndPruningRatioTargets) {
  // density: r = round(density * candidate keys) = round(0.1 * 50) = 5.
  const Pattern d = build("random", 51, 2, kwargs({{"density", "0.1"}}));
  EXPECT_EQ(patch_edges(d, 0), 5 * 50);
  // pruning_ratio 0.98 at N = 197: r = round(0.02 * 196) = 4, ratio 1 - 4/196.
  const Pattern p = build("random", 197, 12, kwargs({{"pruning_ratio", "0.98"}}));
  EXPECT_NEAR(pruning_ratio(p), 1.0 - 4.0 / 196.0, 1e-12);
  for (double target : {0.5, 0.9, 0.95, 0.99}) {
    const Pattern t = build("random", 197, 2, kwargs({{"pruning_ratio", std::to_string(target).c_str()}}));
    EXPECT_LE(std::abs(pruning_ratio(t) - target), 0.5 / 196 + 1e-12) << target;
  }
  EXPECT_THROW(build("random", 51, 2, kwargs({{"density", "0.1"}, {"keys_per_query", "3"}})), UsageError);
  EXPECT_THROW(build("random", 51, 2, kwargs({{"density", "1.1"}})), UsageError);
  EXPECT_THROW(build("random", 51, 2, kwargs({{"keys_per_query", "-1"}})), UsageError);
  EXPECT_THROW(build("random", 51, 2, kwargs({{"seed", "-1"}})), UsageError);
}

// =============================================================================================
// sparse_transformer

TEST(SparseTransformerMask, DefaultStrideIsCeilSqrtN) {
  for (int32_t n : {2, 5, 16, 17, 50, 196, 197, 257}) {
    const int64_t expected = static_cast<int64_t>(std::ceil(std::sqrt(static_cast<double>(n))));
    const Pattern pat = build("sparse_transformer", n, 2, MaskKwargs());
    EXPECT_EQ(pat.window(0).value(), expected) << n;
    EXPECT_EQ(pat.window(1).value(), expected) << n;
  }
  EXPECT_EQ(build("sparse_transformer", 197, 2, MaskKwargs()).window(0).value(), 15);
  EXPECT_EQ(build("sparse_transformer", 196, 2, MaskKwargs()).window(0).value(), 14);
}

TEST(SparseTransformerMask, StridedMembership) {
  for (int32_t heads : {1, 2, 3, 4}) {
    for (int32_t stride : {1, 3, 4, 7}) {
      const int32_t n = 30;
      const Pattern pat = build("sparse_transformer", n, heads,
                                kwargs({{"mode", "strided"}, {"stride", std::to_string(stride).c_str()}}));
      const int32_t local_heads = (heads + 1) / 2;
      for (int32_t h = 0; h < heads; ++h) {
        const bool local = h < local_heads;
        for (int32_t j = 0; j < n; ++j)
          for (int32_t k = 0; k < n; ++k) {
            const int32_t d = std::abs(j - k);
            const bool expected = j == 0 || k == 0 || (local ? d < stride : d % stride == 0);
            ASSERT_EQ(pat.contains(h, j, k), expected)
                << "H=" << heads << " l=" << stride << " head " << h << " (" << j << "," << k << ")";
          }
      }
      expect_hint_exact(pat, "sparse_transformer strided");
    }
  }
}

TEST(SparseTransformerMask, FixedMembership) {
  for (int32_t summary : {1, 2}) {
    const int32_t n = 26, stride = 5, heads = 4;
    const Pattern pat = build("sparse_transformer", n, heads,
                              kwargs({{"mode", "fixed"}, {"stride", "5"}, {"summary", std::to_string(summary).c_str()}}));
    for (int32_t h = 0; h < heads; ++h) {
      const bool local = h < 2;
      for (int32_t j = 0; j < n; ++j)
        for (int32_t k = 0; k < n; ++k) {
          // Patch coordinates p = j - 1, q = k - 1 (class token global).
          const int32_t p = j - 1, q = k - 1;
          const bool expected =
              j == 0 || k == 0 || (local ? p / stride == q / stride : q % stride >= stride - summary);
          ASSERT_EQ(pat.contains(h, j, k), expected) << "summary " << summary << " head " << h << " (" << j << "," << k << ")";
        }
    }
  }
  EXPECT_THROW(build("sparse_transformer", 26, 2, kwargs({{"mode", "fixed"}, {"stride", "5"}, {"summary", "6"}})),
               UsageError);
  EXPECT_THROW(build("sparse_transformer", 26, 2, kwargs({{"mode", "banded"}})), UsageError);
  EXPECT_THROW(build("sparse_transformer", 26, 2, kwargs({{"stride", "0"}})), UsageError);
}

TEST(SparseTransformerMask, StridedClosedFormAt197) {
  // Local heads: |j-k| < 15 -> offsets 0..14; strided heads: offsets 0, 15, ..., 195.
  const int32_t p = 196;
  const Pattern pat = build("sparse_transformer", 197, 12, MaskKwargs());
  const int64_t local = closed_form_patch_edges(range_offsets(0, 14), p);
  const int64_t strided = closed_form_patch_edges(range_offsets(0, 195, 15), p);
  for (int32_t h = 0; h < 6; ++h) EXPECT_EQ(patch_edges(pat, h), local) << h;
  for (int32_t h = 6; h < 12; ++h) EXPECT_EQ(patch_edges(pat, h), strided) << h;
  EXPECT_NEAR(pruning_ratio(pat), 1.0 - (local + strided) / 2.0 / (p * p), 1e-12);
}

TEST(SparseTransformerMask, LocalWidthIsIndependentOfTheStride) {
  for (int32_t local : {1, 2, 5}) {
    const int32_t n = 30, stride = 7, heads = 4;
    const Pattern pat = build("sparse_transformer", n, heads,
                              kwargs({{"stride", "7"}, {"local", std::to_string(local).c_str()}}));
    for (int32_t h = 0; h < heads; ++h) {
      EXPECT_EQ(pat.window(h).value(), h < 2 ? local : stride) << h;
      for (int32_t j = 0; j < n; ++j)
        for (int32_t k = 0; k < n; ++k) {
          const int32_t d = std::abs(j - k);
          const bool expected = j == 0 || k == 0 || (h < 2 ? d < local : d % stride == 0);
          ASSERT_EQ(pat.contains(h, j, k), expected) << "local " << local << " head " << h << " (" << j << "," << k << ")";
        }
    }
  }
  EXPECT_THROW(build("sparse_transformer", 26, 2, kwargs({{"local", "0"}})), UsageError);
  EXPECT_THROW(build("sparse_transformer", 26, 2, kwargs({{"mode", "fixed"}, {"local", "2"}})), UsageError);
}

TEST(SparseTransformerMask, ReachesThePapersBudgetAt197) {
  // The budget the Fibottention comparison reports for Sparse Transformer on ViT-B (N = 197):
  // 98.47% of the patch pairs pruned. Local heads |j-k| < 2, strided heads offsets 0, 65, 130, 195.
  const int32_t p = 196;
  const Pattern pat = build("sparse_transformer", 197, 12, kwargs({{"local", "2"}, {"stride", "65"}}));
  const int64_t local = closed_form_patch_edges(range_offsets(0, 1), p);
  const int64_t strided = closed_form_patch_edges({0, 65, 130, 195}, p);
  for (int32_t h = 0; h < 6; ++h) EXPECT_EQ(patch_edges(pat, h), local) << h;
  for (int32_t h = 6; h < 12; ++h) EXPECT_EQ(patch_edges(pat, h), strided) << h;
  EXPECT_NEAR(pruning_ratio(pat), 0.9847, 5e-5);
  // With the local width tied to the stride (the only choice before `local`), no stride gets there.
  double best = 0;
  for (int32_t l = 1; l <= 197; ++l)
    best = std::max(best, pruning_ratio(build("sparse_transformer", 197, 12, kwargs({{"stride", std::to_string(l).c_str()}}))));
  EXPECT_LT(best, 0.91);
}

TEST(SparseTransformerMask, StrideBeyondTheSequence) {
  // A stride beyond the sequence means "every offset" for the local heads and "offset 0 only"
  // for the strided heads.
  const Pattern pat = build("sparse_transformer", 17, 2, kwargs({{"stride", "1000"}}));
  EXPECT_EQ(pat.edges(0), 17 * 17);
  EXPECT_EQ(patch_edges(pat, 1), 16);
  expect_hint_exact(pat, "sparse_transformer stride 1000");
}

TEST(SparseTransformerMask, HugeStrideBuildsInBoundedMemory) {
  // `stride: 1e12` in a config (or `--set stride=...`) must not materialise 1e12 offsets.
#if SPARSEVIT_TEST_UNDER_ASAN
  GTEST_SKIP() << "the address-space cap of runs_bounded() does not work under AddressSanitizer";
#endif
  EXPECT_TRUE(runs_bounded([] {
    const Pattern huge = build("sparse_transformer", 17, 2, kwargs({{"stride", "1000000000000"}}));
    return huge.edges(0) == 17 * 17 && patch_edges(huge, 1) == 16;
  })) << "stride 1e12 at N=17 must build in bounded time and memory (1 GiB, 10 s)";
}

// =============================================================================================
// bigbird

TEST(BigBirdMask, GlobalsWindowAndRandomKeysOutsideBoth) {
  const int32_t n = 40, heads = 3, w = 2, g = 3, r = 4;
  const Pattern pat = build("bigbird", n, heads,
                            kwargs({{"window", "2"}, {"num_global", "3"}, {"random_per_query", "4"}, {"seed", "7"}}));
  expect_csr_well_formed(pat, "bigbird");
  for (int32_t h = 0; h < heads; ++h) {
    EXPECT_EQ(pat.window(h).value(), w);
    for (int32_t j = 0; j < n; ++j) {
      const auto keys = row_keys(pat, h, j);
      if (j < g) {
        EXPECT_EQ(keys.size(), static_cast<std::size_t>(n)) << "global row " << j;
        continue;
      }
      std::set<int32_t> structured;
      for (int32_t k = 0; k < g; ++k) structured.insert(k);
      for (int32_t k = std::max(0, j - w); k <= std::min(n - 1, j + w); ++k) structured.insert(k);
      for (int32_t k : structured) EXPECT_TRUE(pat.contains(h, j, k)) << "head " << h << " (" << j << "," << k << ")";
      int32_t random = 0;
      for (int32_t k : keys) {
        if (structured.count(k)) continue;
        ++random;
        EXPECT_TRUE(k >= g && std::abs(j - k) > w);
      }
      EXPECT_EQ(random, r) << "head " << h << " row " << j;
      EXPECT_EQ(keys.size(), structured.size() + r);
    }
  }
}

TEST(BigBirdMask, RandomKeysClampedWhenFewCandidates) {
  // N = 8, window 3, 1 global: some rows have fewer than 10 candidates outside the window.
  const Pattern pat = build("bigbird", 8, 1, kwargs({{"window", "3"}, {"random_per_query", "10"}}));
  expect_csr_well_formed(pat, "bigbird clamp");
  EXPECT_EQ(pat.edges(0), 64);
}

TEST(BigBirdMask, DeterministicUnderSeed) {
  const MaskKwargs kw = kwargs({{"window", "1"}, {"random_per_query", "3"}, {"seed", "11"}});
  const Pattern a = build("bigbird", 60, 4, kw, 2, 4);
  expect_same_pattern(a, build("bigbird", 60, 4, kw, 2, 4), "bigbird");
  EXPECT_FALSE(same_edges(a, build("bigbird", 60, 4, kwargs({{"window", "1"}, {"random_per_query", "3"}, {"seed", "12"}}), 2, 4)));
  EXPECT_FALSE(same_edges(a, build("bigbird", 60, 4, kw, 1, 4)));
  EXPECT_FALSE(same_head(a, 0, 1));
}

TEST(BigBirdMask, PruningRatioTargetMetWithinTheGranularity) {
  const int32_t n = 197, p = 196;
  for (double target : {0.98, 0.95, 0.9}) {
    const Pattern pat = build("bigbird", n, 12,
                              kwargs({{"window", "1"}, {"num_global", "1"}, {"pruning_ratio", std::to_string(target).c_str()}}));
    // One more or one fewer random key per row moves the ratio by (N - g) / P^2.
    const double step = 196.0 / (static_cast<double>(p) * p);
    EXPECT_LE(std::abs(pruning_ratio(pat) - target), step / 2 + 1e-9) << target;
  }
  // The config's setting: window 1, 1 global, target 0.98 -> 1 random key: 1 - (586 + 196) / 196^2.
  const Pattern cfg = build("bigbird", n, 12, kwargs({{"window", "1"}, {"num_global", "1"}, {"pruning_ratio", "0.98"}}));
  EXPECT_NEAR(pruning_ratio(cfg), 1.0 - 782.0 / 38416.0, 1e-12);
  EXPECT_THROW(build("bigbird", n, 2, kwargs({{"pruning_ratio", "0.9"}, {"random_per_query", "2"}})), UsageError);
  EXPECT_THROW(build("bigbird", 10, 2, kwargs({{"num_global", "11"}})), UsageError);
  EXPECT_THROW(build("bigbird", 10, 2, kwargs({{"window", "-3"}})), UsageError);
}

TEST(BigBirdMask, NoRandomKeysIsAStructuredPattern) {
  const int32_t n = 25;
  const Pattern pat = build("bigbird", n, 2, kwargs({{"window", "2"}, {"num_global", "2"}, {"random_per_query", "0"}}));
  for (int32_t j = 0; j < n; ++j)
    for (int32_t k = 0; k < n; ++k)
      EXPECT_EQ(pat.contains(0, j, k), j < 2 || k < 2 || std::abs(j - k) <= 2) << j << "," << k;
}

// =============================================================================================
// longformer

TEST(LongformerMask, PerLayerWindowsAndDilatedHeadsInUpperLayers) {
  MaskKwargs kw;
  kw.set_list("window", {"1", "2", "3"})
      .set_scalar("dilation", "2")
      .set_scalar("dilated_heads", "2")
      .set_scalar("dilated_from_layer", "1");
  const auto layers = build_layer_masks("longformer", AttentionGeometry{40, 1, 4, 64, 3}, kw);
  ASSERT_EQ(layers.size(), 3u);
  const int32_t windows[] = {1, 2, 3};
  for (int32_t l = 0; l < 3; ++l) {
    expect_hint_exact(layers[l], "longformer layer " + std::to_string(l));
    for (int32_t h = 0; h < 4; ++h) {
      const bool dilated = l >= 1 && h < 2;
      const int32_t step = dilated ? 2 : 1;
      const auto expected = range_offsets(0, windows[l] * step, step);
      EXPECT_EQ(layers[l].diagonals(h)->offsets, expected) << "layer " << l << " head " << h;
      EXPECT_EQ(layers[l].diagonals(h)->global_tokens, std::vector<int32_t>{0});
      EXPECT_EQ(layers[l].window(h).value(), windows[l] * step);
      EXPECT_EQ(patch_edges(layers[l], h), closed_form_patch_edges(expected, 39));
    }
  }
}

TEST(LongformerMask, DefaultsScalarWindowAndErrors) {
  // Default dilated_from_layer = L / 2.
  const auto layers = build_layer_masks("longformer", AttentionGeometry{30, 1, 2, 64, 4}, kwargs({{"window", "2"}, {"dilated_heads", "1"}}));
  EXPECT_EQ(layers[1].diagonals(0)->offsets, (std::vector<int32_t>{0, 1, 2}));
  EXPECT_EQ(layers[2].diagonals(0)->offsets, (std::vector<int32_t>{0, 2, 4}));
  EXPECT_EQ(layers[3].diagonals(1)->offsets, (std::vector<int32_t>{0, 1, 2}));
  MaskKwargs wrong;
  wrong.set_list("window", {"1", "2"});
  EXPECT_THROW(build_layer_masks("longformer", AttentionGeometry{30, 1, 2, 64, 3}, wrong), UsageError);
  EXPECT_THROW(build("longformer", 30, 2, kwargs({{"dilated_heads", "3"}})), UsageError);
  EXPECT_THROW(build("longformer", 30, 2, kwargs({{"dilation", "0"}})), UsageError);
}

TEST(LongformerMask, ShippedConfigSettingAt197) {
  MaskKwargs kw;
  kw.set_list("window", {"1", "1", "1", "1", "1", "1", "2", "2", "2", "2", "2", "2"})
      .set_scalar("dilation", "2")
      .set_scalar("dilated_heads", "2")
      .set_scalar("dilated_from_layer", "6");
  const auto layers = build_layer_masks("longformer", AttentionGeometry{197, 1, 12, 64, 12}, kw);
  const int64_t low = closed_form_patch_edges({0, 1}, 196);
  const int64_t high = closed_form_patch_edges({0, 1, 2}, 196);
  const int64_t high_dilated = closed_form_patch_edges({0, 2, 4}, 196);
  double expected = 0;
  for (int32_t l = 0; l < 12; ++l) {
    double layer = 0;
    for (int32_t h = 0; h < 12; ++h) {
      const int64_t e = l < 6 ? low : (h < 2 ? high_dilated : high);
      EXPECT_EQ(patch_edges(layers[l], h), e) << l << " " << h;
      layer += 1.0 - e / 38416.0;
    }
    expected += layer / 12;
  }
  EXPECT_NEAR(pruning_ratio(layers), expected / 12, 1e-12);
}

// =============================================================================================
// pruning

TEST(PruningMask, KeepsTheHeaviestEdgesAndMeetsTheRatio) {
  const int32_t n = 13, heads = 3, patches = 12;
  const MaskContext ctx{{n, 1, heads, 64, 1}, 0};
  const auto flat = distinct_scores(static_cast<int64_t>(heads) * n * n, 5);
  LayerScores scores(heads);
  for (int32_t h = 0; h < heads; ++h) scores[h].assign(flat.begin() + h * n * n, flat.begin() + (h + 1) * n * n);
  for (double target : {0.5, 0.75, 0.9}) {
    const Pattern pat = prune_by_scores(ctx, scores, target, {0});
    expect_csr_well_formed(pat, "pruning");
    const int64_t budget = std::llround((1.0 - target) * patches * patches);
    for (int32_t h = 0; h < heads; ++h) {
      const auto& s = scores[h];
      // Each non-global row's best key is kept.
      std::set<std::pair<int32_t, int32_t>> row_best;
      for (int32_t j = 1; j < n; ++j) {
        const int32_t best = static_cast<int32_t>(std::max_element(s.begin() + j * n, s.begin() + (j + 1) * n) -
                                                  (s.begin() + j * n));
        EXPECT_TRUE(pat.contains(h, j, best)) << "row " << j;
        row_best.insert({j, best});
      }
      // Class row and column are global.
      EXPECT_EQ(row_keys(pat, h, 0).size(), static_cast<std::size_t>(n));
      for (int32_t j = 0; j < n; ++j) EXPECT_TRUE(pat.contains(h, j, 0));
      // The ratio: exactly the budget (the row-best keys fit in it here).
      EXPECT_EQ(patch_edges(pat, h), budget) << "target " << target;
      EXPECT_NEAR(head_pruning_ratio(pat, h), 1.0 - static_cast<double>(budget) / (patches * patches), 1e-12);
      // Heaviest: every kept patch pair beyond the row-best ones outweighs every dropped patch pair.
      float lightest_kept = std::numeric_limits<float>::infinity();
      float heaviest_dropped = -std::numeric_limits<float>::infinity();
      for (int32_t j = 1; j < n; ++j)
        for (int32_t k = 1; k < n; ++k) {
          const float v = s[j * n + k];
          if (pat.contains(h, j, k)) {
            if (!row_best.count({j, k})) lightest_kept = std::min(lightest_kept, v);
          } else {
            heaviest_dropped = std::max(heaviest_dropped, v);
          }
        }
      EXPECT_GT(lightest_kept, heaviest_dropped) << "head " << h << " target " << target;
    }
  }
}

TEST(PruningMask, AtLeastOneKeyPerRowEvenAtFullPruning) {
  const int32_t n = 9;
  const MaskContext ctx{{n, 1, 2, 64, 1}, 0};
  const auto flat = distinct_scores(2 * n * n, 9);
  LayerScores scores = {std::vector<float>(flat.begin(), flat.begin() + n * n),
                        std::vector<float>(flat.begin() + n * n, flat.end())};
  const Pattern pat = prune_by_scores(ctx, scores, 1.0, {});  // no globals
  for (int32_t h = 0; h < 2; ++h)
    for (int32_t j = 0; j < n; ++j) {
      const auto keys = row_keys(pat, h, j);
      ASSERT_EQ(keys.size(), 1u) << "head " << h << " row " << j;
      const auto& s = scores[h];
      EXPECT_EQ(keys[0], std::max_element(s.begin() + j * n, s.begin() + (j + 1) * n) - (s.begin() + j * n));
    }
  // All-equal scores: ties go to the lower key.
  LayerScores flat_scores(1, std::vector<float>(n * n, 1.0f));
  const Pattern tie = prune_by_scores(MaskContext{{n, 1, 1, 64, 1}, 0}, flat_scores, 1.0, {});
  for (int32_t j = 0; j < n; ++j) EXPECT_EQ(row_keys(tie, 0, j), std::vector<int32_t>{0});
  // Zero pruning keeps every pair.
  EXPECT_EQ(prune_by_scores(ctx, scores, 0.0, {0}).edges(0), n * n);
  // Wrong head count / shape.
  EXPECT_THROW(prune_by_scores(MaskContext{{n, 1, 3, 64, 1}, 0}, scores, 0.5, {0}), UsageError);
  LayerScores bad = {std::vector<float>(n * n - 1, 0.f), std::vector<float>(n * n, 0.f)};
  EXPECT_THROW(prune_by_scores(ctx, bad, 0.5, {0}), UsageError);
}

TEST(PruningMask, LoadLayerScoresReadsNpy) {
  TempDir dir;
  const int32_t layers = 2, heads = 2, n = 5;
  const auto data = distinct_scores(layers * heads * n * n, 1);
  const std::string path = dir.file("scores.npy", npy_bytes({layers, heads, n, n}, data));
  for (int32_t l = 0; l < layers; ++l) {
    const LayerScores s = load_layer_scores(path, MaskContext{{n, 1, heads, 64, layers}, l});
    ASSERT_EQ(s.size(), static_cast<std::size_t>(heads));
    for (int32_t h = 0; h < heads; ++h) {
      ASSERT_EQ(s[h].size(), static_cast<std::size_t>(n * n));
      for (int32_t i = 0; i < n * n; ++i) EXPECT_EQ(s[h][i], data[(l * heads + h) * n * n + i]);
    }
  }
  // [H, N, N]: shared by every layer.
  const std::vector<float> shared(data.begin(), data.begin() + heads * n * n);
  const std::string shared_path = dir.file("shared.npy", npy_bytes({heads, n, n}, shared));
  for (int32_t l = 0; l < 3; ++l) {
    const LayerScores s = load_layer_scores(shared_path, MaskContext{{n, 1, heads, 64, 3}, l});
    EXPECT_EQ(s[1][3], shared[n * n + 3]);
  }
}

TEST(PruningMask, LoadLayerScoresRejectsBadFiles) {
  TempDir dir;
  const int32_t heads = 2, n = 5;
  const MaskContext ctx{{n, 1, heads, 64, 1}, 0};
  const auto data = distinct_scores(heads * n * n, 2);
  const std::string good = npy_bytes({1, heads, n, n}, data);
  ASSERT_NO_THROW(load_layer_scores(dir.file("good.npy", good), ctx));

  std::string bad_magic = good;
  bad_magic[1] = 'X';
  EXPECT_THROW(load_layer_scores(dir.file("magic.npy", bad_magic), ctx), RuntimeError);
  EXPECT_THROW(load_layer_scores(dir.file("empty.npy", ""), ctx), RuntimeError);
  EXPECT_THROW(load_layer_scores(dir.file("short.npy", good.substr(0, 4)), ctx), RuntimeError);
  EXPECT_THROW(load_layer_scores(dir.file("header.npy", good.substr(0, 40)), ctx), RuntimeError);
  EXPECT_THROW(load_layer_scores(dir.file("truncated.npy", good.substr(0, good.size() - 4)), ctx), RuntimeError);
  EXPECT_THROW(load_layer_scores(dir.file("shape.npy", npy_bytes({1, heads, n, n - 1}, std::vector<float>(heads * n * (n - 1)))), ctx),
               RuntimeError);
  EXPECT_THROW(load_layer_scores(dir.file("heads.npy", npy_bytes({1, 3, n, n}, std::vector<float>(3 * n * n))), ctx),
               RuntimeError);
  EXPECT_THROW(load_layer_scores(dir.file("layers.npy", npy_bytes({2, heads, n, n}, std::vector<float>(2 * heads * n * n))), ctx),
               RuntimeError);
  EXPECT_THROW(load_layer_scores(dir.file("f8.npy", npy_bytes({1, heads, n, n}, data, "<f8")), ctx), RuntimeError);
  std::vector<float> with_nan = data;
  with_nan[7] = std::numeric_limits<float>::quiet_NaN();
  EXPECT_THROW(load_layer_scores(dir.file("nan.npy", npy_bytes({1, heads, n, n}, with_nan)), ctx), RuntimeError);
  EXPECT_THROW(load_layer_scores((std::filesystem::temp_directory_path() / "sparsevit_no_such_dir/x.npy").string(), ctx),
               RuntimeError);
  // The message names the file.
  try {
    load_layer_scores(dir.file("named.npy", bad_magic), ctx);
    FAIL() << "no exception";
  } catch (const RuntimeError& e) {
    EXPECT_NE(std::string(e.what()).find("named.npy"), std::string::npos) << e.what();
  }
}

TEST(PruningMask, GeneratorReadsScoresFile) {
  TempDir dir;
  const int32_t layers = 2, heads = 3, n = 11;
  const auto data = distinct_scores(layers * heads * n * n, 3);
  const std::string path = dir.file("scores.npy", npy_bytes({layers, heads, n, n}, data));
  MaskKwargs kw;
  kw.set_scalar("scores_file", path).set_scalar("pruning_ratio", "0.8");
  const auto built = build_layer_masks("pruning", AttentionGeometry{n, 1, heads, 64, layers}, kw);
  for (int32_t l = 0; l < layers; ++l) {
    const MaskContext ctx{{n, 1, heads, 64, layers}, l};
    const Pattern direct = prune_by_scores(ctx, load_layer_scores(path, ctx), 0.8, {0});
    expect_same_pattern(built[l], direct, "pruning layer " + std::to_string(l));
    expect_csr_well_formed(built[l], "pruning generator");
    EXPECT_NEAR(pruning_ratio(built[l]), 1.0 - std::llround(0.2 * 100) / 100.0, 1e-12);
  }
  EXPECT_FALSE(same_edges(built[0], built[1]));
  EXPECT_THROW(build("pruning", n, heads, kwargs({{"pruning_ratio", "0.9"}})), UsageError);  // no scores_file
  EXPECT_THROW(build("pruning", n, heads, kwargs({{"scores_file", (path + ".missing").c_str()}})), RuntimeError);
}

// =============================================================================================
// topk

TEST(TopkMask, KeysPerQuery) {
  const MaskContext ctx{{197, 1, 12, 64, 12}, 0};
  EXPECT_EQ(topk_keys_per_query(ctx, MaskKwargs()), 4);
  EXPECT_EQ(topk_keys_per_query(ctx, kwargs({{"k", "7"}})), 7);
  EXPECT_EQ(topk_keys_per_query(ctx, kwargs({{"k", "100000"}})), 197);  // clamped to N
  EXPECT_EQ(topk_keys_per_query(ctx, kwargs({{"pruning_ratio", "0.98"}})), 4);  // round(0.02 * 196)
  EXPECT_EQ(topk_keys_per_query(ctx, kwargs({{"pruning_ratio", "0.5"}})), 98);
  EXPECT_EQ(topk_keys_per_query(ctx, kwargs({{"pruning_ratio", "1.0"}})), 1);  // at least one key
  EXPECT_THROW(topk_keys_per_query(ctx, kwargs({{"k", "0"}})), UsageError);
  EXPECT_THROW(topk_keys_per_query(ctx, kwargs({{"k", "4"}, {"pruning_ratio", "0.9"}})), UsageError);
  EXPECT_THROW(topk_keys_per_query(ctx, kwargs({{"k", "4"}, {"k_end", "2"}})), UsageError);
  EXPECT_THROW(topk_keys_per_query(ctx, kwargs({{"k_schedule", "linear"}})), UsageError);
}

TEST(TopkMask, ScheduleEndpoints) {
  const MaskContext ctx{{197, 1, 12, 64, 12}, 0};
  for (const char* schedule : {"linear", "cosine"}) {
    const MaskKwargs kw = kwargs({{"k_start", "100"}, {"k_end", "4"}, {"k_schedule", schedule}});
    EXPECT_EQ(topk_keys_per_query(ctx, kw, 0.0), 100) << schedule;
    EXPECT_EQ(topk_keys_per_query(ctx, kw, 1.0), 4) << schedule;
    EXPECT_EQ(topk_keys_per_query(ctx, kw, 0.5), 52) << schedule;
    EXPECT_EQ(topk_keys_per_query(ctx, kw, -3.0), 100) << schedule;  // progress clamped
    EXPECT_EQ(topk_keys_per_query(ctx, kw, 7.0), 4) << schedule;
    int64_t previous = 1 << 30;
    for (int i = 0; i <= 20; ++i) {
      const int64_t k = topk_keys_per_query(ctx, kw, i / 20.0);
      EXPECT_LE(k, previous) << schedule << " " << i;
      previous = k;
    }
  }
  EXPECT_EQ(topk_keys_per_query(ctx, kwargs({{"k_start", "100"}, {"k_end", "4"}}), 0.25), 76);
  EXPECT_EQ(topk_keys_per_query(ctx, kwargs({{"k_start", "100"}, {"k_end", "4"}, {"k_schedule", "cosine"}}), 0.25),
            86);  // 100 - 96 * (1 - cos(pi/4)) / 2 = 85.94
  // k_start defaults to N.
  EXPECT_EQ(topk_keys_per_query(ctx, kwargs({{"k_end", "4"}}), 0.0), 197);
}

TEST(TopkMask, DynamicWithoutStaticPattern) {
  const MaskGenerator& g = find_mask("topk");
  EXPECT_TRUE(g.dynamic);
  EXPECT_THROW(build("topk", 197, 12, kwargs({{"k", "4"}})), UsageError);
  for (const auto& other : mask_generators())
    if (other.name != "topk") {
      EXPECT_FALSE(other.dynamic) << other.name;
    }
}

// =============================================================================================
// registry

TEST(MaskRegistry, ListsEveryGenerator) {
  const std::vector<std::string> expected = {"fibo",       "local",   "random", "sparse_transformer", "bigbird",
                                             "longformer", "pruning", "file",   "topk"};
  EXPECT_EQ(mask_names(), expected);
  for (const auto& g : mask_generators()) {
    EXPECT_FALSE(g.summary.empty()) << g.name;
    EXPECT_FALSE(g.kwargs.empty()) << g.name;
    EXPECT_TRUE(static_cast<bool>(g.build)) << g.name;
    EXPECT_EQ(&find_mask(g.name), &g);
  }
}

TEST(MaskRegistry, UnknownMaskSuggestsTheNearest) {
  const std::string msg = usage_error_message([] { find_mask("fibbo"); });
  EXPECT_NE(msg.find("did you mean 'fibo'"), std::string::npos) << msg;
  EXPECT_NE(msg.find("fibbo"), std::string::npos) << msg;
  const std::string built = usage_error_message([] { build("fibbo", 10, 1, MaskKwargs()); });
  EXPECT_NE(built.find("did you mean 'fibo'"), std::string::npos) << built;
  EXPECT_NE(usage_error_message([] { find_mask("bigbrid"); }).find("did you mean 'bigbird'"), std::string::npos);
  const std::string far = usage_error_message([] { find_mask("performer_xyz"); });
  EXPECT_NE(far.find("unknown mask"), std::string::npos) << far;
  EXPECT_EQ(far.find("did you mean"), std::string::npos) << far;
}

TEST(MaskRegistry, UnknownKwargSuggestsTheNearest) {
  const std::string msg = usage_error_message([] { build("local", 20, 1, kwargs({{"windw", "3"}})); });
  EXPECT_NE(msg.find("windw"), std::string::npos) << msg;
  EXPECT_NE(msg.find("did you mean 'window'"), std::string::npos) << msg;
  const std::string fibo = usage_error_message([] { build("fibo", 20, 1, kwargs({{"w_mn", "3"}})); });
  EXPECT_NE(fibo.find("did you mean 'w_min'"), std::string::npos) << fibo;
  // The place a kwarg came from is in the message.
  MaskKwargs placed;
  placed.set_scalar("keys_per_qery", "3", "cfg.yaml:7");
  const std::string where = usage_error_message([&] { build("random", 20, 1, placed); });
  EXPECT_NE(where.find("cfg.yaml:7"), std::string::npos) << where;
  EXPECT_NE(where.find("did you mean 'keys_per_query'"), std::string::npos) << where;
  // Every generator accepts exactly its documented kwargs.
  for (const auto& g : mask_generators()) {
    MaskKwargs bogus;
    bogus.set_scalar("definitely_not_a_kwarg", "1");
    EXPECT_THROW(validate_mask_kwargs(g, bogus), UsageError) << g.name;
    MaskKwargs documented;
    for (const auto& k : g.kwargs) documented.set_scalar(k.name, "1");
    EXPECT_NO_THROW(validate_mask_kwargs(g, documented)) << g.name;
  }
}

TEST(MaskRegistry, OutOfRangeValuesAreUsageErrors) {
  EXPECT_THROW(build("local", 20, 1, kwargs({{"window", "-1"}})), UsageError);
  EXPECT_THROW(build("fibo", 20, 2, kwargs({{"w_min", "10"}, {"w_max", "5"}})), UsageError);
  EXPECT_THROW(build("fibo", 20, 2, kwargs({{"w_min", "0"}})), UsageError);
  for (const auto& name : mask_names()) {
    if (name == "pruning") continue;  // needs a scores file before anything else
    EXPECT_THROW(build_mask(name, MaskContext{{20, 1, 0, 64, 1}, 0}, MaskKwargs()), UsageError) << name << " heads 0";
    EXPECT_THROW(build_mask(name, MaskContext{{20, 1, -3, 64, 1}, 0}, MaskKwargs()), UsageError) << name << " heads -3";
    EXPECT_THROW(build_mask(name, MaskContext{{0, 1, 2, 64, 1}, 0}, MaskKwargs()), UsageError) << name << " tokens 0";
    EXPECT_THROW(build_mask(name, MaskContext{{-5, 0, 2, 64, 1}, 0}, MaskKwargs()), UsageError) << name << " tokens -5";
    EXPECT_THROW(build_mask(name, MaskContext{{1, 1, 2, 64, 1}, 0}, MaskKwargs()), UsageError) << name << " N=1 + class";
    EXPECT_THROW(build_mask(name, MaskContext{{20, 1, 2, 64, 0}, 0}, MaskKwargs()), UsageError) << name << " layers 0";
    EXPECT_THROW(build_mask(name, MaskContext{{20, 1, 2, 64, 3}, 3}, MaskKwargs()), UsageError) << name << " layer 3 of 3";
    EXPECT_THROW(build_mask(name, MaskContext{{20, 1, 2, 64, 3}, -1}, MaskKwargs()), UsageError) << name << " layer -1";
    EXPECT_THROW(build_mask(name, MaskContext{{20, 2, 2, 64, 1}, 0}, MaskKwargs()), UsageError) << name << " prefix 2";
  }
  EXPECT_THROW(build_layer_masks("local", AttentionGeometry{20, 1, 0, 64, 2}, MaskKwargs()), UsageError);
  EXPECT_THROW(build_layer_masks("local", AttentionGeometry{0, 1, 2, 64, 2}, MaskKwargs()), UsageError);
}

TEST(MaskRegistry, FiboHugeWMaxIsClampedNotOverflowed) {
  // w_max near INT64_MAX: (i-1)(w_max-w_min) must not overflow into a negative window; every
  // head's window clamps to the largest offset N-1 (with a warning) like any too-large window.
  const Pattern fibo = build("fibo", 30, 3, kwargs({{"w_min", "5"}, {"w_max", "9223372036854775807"}, {"shuffle_layers", "false"}}));
  for (int32_t h = 1; h < 3; ++h) {
    EXPECT_EQ(fibo.window(h).value(), 29) << h;
    EXPECT_FALSE(fibo.diagonals(h)->offsets.empty()) << h;
  }
}

TEST(BigBirdMask, HugeWindowIsClampedNotOverflowed) {
  // j + window must not overflow: a window beyond the sequence covers every key.
  const Pattern bigbird = build("bigbird", 30, 1, kwargs({{"window", "9223372036854775807"}}));
  EXPECT_EQ(bigbird.edges(0), 900);
  expect_csr_well_formed(bigbird, "bigbird huge window");
}

TEST(MaskRegistry, HugeWindowsAreClampedNotOverflowed) {
  const Pattern local = build("local", 30, 1, kwargs({{"window", "9223372036854775807"}}));
  EXPECT_EQ(local.edges(0), 900);
  EXPECT_EQ(local.window(0).value(), 29);
}

TEST(LongformerMask, HugeWindowAndDilationStayBounded) {
  const Pattern longformer = build("longformer", 30, 2,
                                   kwargs({{"window", "9223372036854775807"}, {"dilation", "4611686018427387904"},
                                           {"dilated_heads", "1"}, {"dilated_from_layer", "0"}}));
  EXPECT_EQ(longformer.edges(1), 900);
  expect_hint_exact(longformer, "longformer huge");
  // The reported window (w * d for a dilated head) must not overflow into a negative number.
  for (int32_t h = 0; h < 2; ++h) EXPECT_GE(longformer.window(h).value(), 0) << h;
}

// Every static generator at several sizes: CSR well-formed, deterministic, hint exact.
struct GeneratorCase {
  std::string name;
  std::vector<std::pair<std::string, std::string>> scalars;
  std::vector<std::pair<std::string, std::vector<std::string>>> lists;
};

MaskKwargs kwargs_of(const GeneratorCase& c) {
  MaskKwargs kw;
  for (const auto& [k, v] : c.scalars) kw.set_scalar(k, v);
  for (const auto& [k, v] : c.lists) kw.set_list(k, v);
  return kw;
}

TEST(MaskRegistry, EveryGeneratorIsWellFormedDeterministicAndHintsAreExact) {
  const std::vector<GeneratorCase> cases = {
      {"fibo", {}, {}},
      {"fibo", {{"schedule", "wythoff_modified"}}, {}},
      {"fibo", {{"schedule", "fibonacci"}, {"w_min", "1"}, {"w_max", "8"}}, {}},
      {"fibo", {{"compat", "reference"}}, {}},
      {"fibo", {{"compat", "reference"}, {"schedule", "wythoff_modified"}}, {}},
      {"fibo", {{"sequence", "pow2"}, {"seed", "5"}}, {}},
      {"fibo", {{"sequence", "arithmetic"}, {"step", "3"}, {"shift_per_head", "true"}}, {}},
      {"fibo", {}, {{"sequence", {"1", "4", "9"}}}},
      {"local", {}, {}},
      {"local", {{"window", "3"}, {"dilation", "2"}, {"include_diagonal", "false"}}, {}},
      {"local", {{"pruning_ratio", "0.9"}}, {}},
      {"random", {{"keys_per_query", "3"}, {"seed", "1"}}, {}},
      {"random", {{"density", "0.3"}}, {}},
      {"sparse_transformer", {}, {}},
      {"sparse_transformer", {{"mode", "fixed"}, {"stride", "3"}}, {}},
      {"sparse_transformer", {{"mode", "strided"}, {"stride", "2"}}, {}},
      {"bigbird", {}, {}},
      {"bigbird", {{"window", "2"}, {"num_global", "2"}, {"random_per_query", "3"}, {"seed", "4"}}, {}},
      {"bigbird", {{"pruning_ratio", "0.7"}}, {}},
      {"longformer", {}, {}},
      {"longformer", {{"dilation", "3"}, {"dilated_heads", "1"}, {"dilated_from_layer", "0"}}, {}},
  };
  struct Size {
    int32_t n, heads, layers, prefix;
  };
  const std::vector<Size> sizes = {{2, 1, 1, 1}, {3, 2, 2, 1}, {17, 3, 2, 1}, {17, 3, 2, 0}, {50, 4, 3, 1}, {1, 1, 1, 0}};
  for (const auto& c : cases) {
    for (const auto& s : sizes) {
      MaskKwargs kw = kwargs_of(c);
      const bool class_none = s.prefix == 0;
      if (class_none) {
        if (c.scalars.size() && c.scalars[0].second == "reference") continue;  // reference needs the class token
        kw.set_scalar("class_token", "none");
      }
      if (c.name == "bigbird" && class_none) kw.set_scalar("num_global", "0");
      if (c.name == "bigbird" && kw.has("num_global") && s.n < 2) kw.set_scalar("num_global", "0");
      const std::string what = c.name + " #" + std::to_string(&c - cases.data()) + " N=" + std::to_string(s.n) +
                               " H=" + std::to_string(s.heads) + " prefix=" + std::to_string(s.prefix);
      std::vector<Pattern> first, second;
      try {
        first = build_layer_masks(c.name, AttentionGeometry{s.n, s.prefix, s.heads, 64, s.layers}, kw);
        second = build_layer_masks(c.name, AttentionGeometry{s.n, s.prefix, s.heads, 64, s.layers}, kw);
      } catch (const std::exception& e) {
        ADD_FAILURE() << what << ": " << e.what();
        continue;
      }
      ASSERT_EQ(first.size(), static_cast<std::size_t>(s.layers)) << what;
      for (int32_t l = 0; l < s.layers; ++l) {
        const std::string at = what + " layer " + std::to_string(l);
        EXPECT_EQ(first[l].num_tokens(), s.n) << at;
        EXPECT_EQ(first[l].num_heads(), s.heads) << at;
        EXPECT_EQ(first[l].num_prefix_tokens(), s.prefix) << at;
        expect_csr_well_formed(first[l], at);
        expect_hint_exact(first[l], at);
        expect_same_pattern(first[l], second[l], at);
        const double ratio = pruning_ratio(first[l]);
        EXPECT_GE(ratio, 0.0) << at;
        EXPECT_LE(ratio, 1.0) << at;
        const double dens = density(first[l]);
        EXPECT_GE(dens, 0.0) << at;
        EXPECT_LE(dens, 1.0) << at;
        if (s.prefix == 1) {
          // class_token: global (the default) connects row 0 and column 0 fully.
          for (int32_t h = 0; h < s.heads; ++h) {
            EXPECT_EQ(row_keys(first[l], h, 0).size(), static_cast<std::size_t>(s.n)) << at << " head " << h;
            for (int32_t j = 0; j < s.n; ++j) EXPECT_TRUE(first[l].contains(h, j, 0)) << at << " head " << h;
          }
        }
      }
    }
  }
}

TEST(MaskRegistry, ClassTokenConventionPruningExcludesItDensityIncludesIt) {
  // Dense local window: every pair computed. Pruning over patch pairs = 0, density over N x N = 1.
  const Pattern dense = build("local", 10, 2, kwargs({{"window", "9"}}));
  EXPECT_DOUBLE_EQ(pruning_ratio(dense), 0.0);
  EXPECT_DOUBLE_EQ(density(dense), 1.0);
  // Window 0 without diagonal: only the class row and column: pruning 1, density (2N-1)/N^2.
  const Pattern cls = build("local", 10, 2, kwargs({{"window", "0"}, {"include_diagonal", "false"}}));
  EXPECT_DOUBLE_EQ(pruning_ratio(cls), 1.0);
  EXPECT_DOUBLE_EQ(density(cls), 19.0 / 100.0);
  EXPECT_EQ(diagonal_patch_edges({0, 1, 2}, 9), 9 + 2 * 8 + 2 * 7);
  EXPECT_EQ(diagonal_patch_edges({0, 9, 12}, 9), 9);
}

}  // namespace
}  // namespace sparsevit::patterns
