// A kwarg's default has one source, its declaration (patterns/kwarg_declaration.h): the
// registry lists it, and a generator given no value builds exactly what it builds when the
// config writes the listed default. (docs/masks.md is compared with the registry by
// masks_doc_test.cpp.)
#include <gtest/gtest.h>

#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include <unistd.h>

#include "patterns/kwarg_declaration.h"
#include "patterns/mask_registry.h"
#include "patterns/pattern_equality.h"
#include "patterns/topk_mask.h"
#include "util/errors.h"
#include "util/npy_file.h"

namespace sparsevit::patterns {
namespace {

TEST(KwargDeclaration, ReadsTheDefaultWhenAbsentAndChecksAGivenValue) {
  constexpr IntKwarg window{"window", 2, "half-width"};
  MaskKwargs kw;
  EXPECT_EQ(window.read(kw, 0), 2);
  kw.set_scalar("window", "7", "cfg.yaml:3");
  EXPECT_EQ(window.read(kw, 0), 7);
  EXPECT_THROW(window.read(kw, 0, 5), UsageError);

  constexpr DoubleKwarg ratio{"pruning_ratio", 0.98, "target"};
  EXPECT_EQ(ratio.read(MaskKwargs(), 0.0, 1.0), 0.98);
  EXPECT_THROW(ratio.read(MaskKwargs().set_scalar("pruning_ratio", "1.5"), 0.0, 1.0), UsageError);

  constexpr BoolKwarg shuffle{"shuffle_layers", true, "permute"};
  EXPECT_TRUE(shuffle.read(MaskKwargs()));
  EXPECT_FALSE(shuffle.read(MaskKwargs().set_scalar("shuffle_layers", "false")));

  constexpr ChoiceKwarg mode{"mode", "strided", "`strided` | `fixed`"};
  EXPECT_EQ(mode.read(MaskKwargs(), {"strided", "fixed"}), "strided");
  EXPECT_EQ(mode.read(MaskKwargs().set_scalar("mode", "fixed"), {"strided", "fixed"}), "fixed");
  EXPECT_THROW(mode.read(MaskKwargs().set_scalar("mode", "fixd"), {"strided", "fixed"}), UsageError);
}

TEST(KwargDeclaration, ListsTheDefaultAsAUserWritesIt) {
  const KwargDoc entry = IntKwarg{"w_min", 5, "smallest head window"}.doc_entry();
  EXPECT_EQ(entry.name, "w_min");
  EXPECT_EQ(entry.default_value, "5");
  EXPECT_EQ(entry.doc, "smallest head window");
  EXPECT_EQ((IntKwarg{"x", -3, ""}.doc_entry().default_value), "-3");
  EXPECT_EQ((DoubleKwarg{"x", 0.98, ""}.doc_entry().default_value), "0.98");
  EXPECT_EQ((DoubleKwarg{"x", 1.0, ""}.doc_entry().default_value), "1");
  EXPECT_EQ((BoolKwarg{"x", true, ""}.doc_entry().default_value), "true");
  EXPECT_EQ((BoolKwarg{"x", false, ""}.doc_entry().default_value), "false");
  EXPECT_EQ((ChoiceKwarg{"x", "paper", ""}.doc_entry().default_value), "paper");
}

// Defaults that are rules of the geometry or of another kwarg, not values to write back.
const std::set<std::string> kDerivedDefaults = {"ceil(sqrt(N))", "stride", "L/2", "N"};

// Kwargs that only matter beside another setting: they are compared under it, so a wrong
// default cannot hide behind an unused kwarg.
const std::map<std::string, std::map<std::string, std::string>> kCompanions = {
    {"fibo.step", {{"sequence", "arithmetic"}}},
    {"fibo.shift_per_head", {{"sequence", "arithmetic"}, {"step", "3"}}},
    {"fibo.shift", {{"sequence", "fib_shifted"}}},
    {"sparse_transformer.summary", {{"mode", "fixed"}}},
    {"topk.k_end", {{"k_start", "40"}}},
    {"topk.k_schedule", {{"k_start", "40"}, {"k_end", "3"}}},
};

// A scores file for `pruning` (whose other kwargs need one): distinct values per pair.
std::string write_scores(const AttentionGeometry& g) {
  const std::string path = (std::filesystem::temp_directory_path() /
                            ("sparsevit_kwarg_defaults_" + std::to_string(::getpid()) + ".npy"))
                               .string();
  const int64_t count = g.num_layers * g.num_heads * g.num_tokens * g.num_tokens;
  std::vector<float> values(static_cast<size_t>(count));
  for (int64_t i = 0; i < count; ++i) values[i] = static_cast<float>((i * 7919) % 1009) / 1009.0f;
  write_npy_float32(path, {g.num_layers, g.num_heads, g.num_tokens, g.num_tokens}, values);
  return path;
}

std::vector<std::optional<Pattern>> layers_of(const std::string& mask, const AttentionGeometry& g,
                                              const MaskKwargs& kw) {
  std::vector<std::optional<Pattern>> layers;
  for (Pattern& p : build_layer_masks(mask, g, kw)) layers.emplace_back(std::move(p));
  return layers;
}

TEST(MaskDefaults, EveryListedDefaultIsTheOneTheGeneratorUses) {
  const AttentionGeometry geometry{50, 1, 4, 16, 4};
  const std::string scores = write_scores(geometry);
  int compared = 0;
  for (const MaskGenerator& g : mask_generators()) {
    for (const KwargDoc& k : g.kwargs) {
      if (k.default_value.empty() || kDerivedDefaults.count(k.default_value)) continue;
      SCOPED_TRACE(g.name + "." + k.name + " = " + k.default_value);
      MaskKwargs without;
      if (g.name == "pruning") without.set_scalar("scores_file", scores);
      const auto companions = kCompanions.find(g.name + "." + k.name);
      if (companions != kCompanions.end())
        for (const auto& [name, value] : companions->second) without.set_scalar(name, value);
      MaskKwargs with = without;
      with.set_scalar(k.name, k.default_value);
      if (g.dynamic) {
        const MaskContext ctx{geometry, 0};
        for (double progress : {0.0, 0.3, 1.0})
          EXPECT_EQ(topk_keys_per_query(ctx, without, progress), topk_keys_per_query(ctx, with, progress));
      } else {
        EXPECT_TRUE(same_pairs(layers_of(g.name, geometry, without), layers_of(g.name, geometry, with)));
      }
      ++compared;
    }
  }
  std::filesystem::remove(scores);
  EXPECT_GE(compared, 30);  // every mask's literal defaults, not a vacuous pass
}

// The comparison above notices a default that is not the one the generator uses.
TEST(MaskDefaults, ADifferentValueBuildsADifferentPattern) {
  const AttentionGeometry geometry{50, 1, 4, 16, 4};
  for (const auto& [mask, kwarg, other] : std::vector<std::tuple<std::string, std::string, std::string>>{
           {"local", "window", "3"}, {"fibo", "w_min", "4"}, {"bigbird", "random_per_query", "3"},
           {"longformer", "dilated_heads", "1"}}) {
    SCOPED_TRACE(mask + "." + kwarg);
    EXPECT_FALSE(same_pairs(layers_of(mask, geometry, MaskKwargs()),
                            layers_of(mask, geometry, MaskKwargs().set_scalar(kwarg, other))));
  }
}

}  // namespace
}  // namespace sparsevit::patterns
