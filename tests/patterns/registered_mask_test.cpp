// Masks registered at run time (what the Python package's register_mask does): found by name,
// validated and built like the built-in ones; built-in names are refused; a name registered
// again is replaced.
#include <gtest/gtest.h>

#include <algorithm>

#include "patterns/mask_registry.h"
#include "util/errors.h"

namespace sparsevit::patterns {
namespace {

MaskGenerator diagonal_plus(const std::string& name, int32_t extra) {
  MaskGenerator g;
  g.name = name;
  g.summary = "test";
  g.kwargs = {{"extra", "", ""}};
  g.build = [extra](const MaskContext& ctx, const MaskKwargs& kw) {
    const auto k = static_cast<int32_t>(kw.get_int("extra", extra, 0));
    Pattern p(static_cast<int32_t>(ctx.num_tokens), static_cast<int32_t>(ctx.num_heads),
              static_cast<int32_t>(ctx.num_prefix_tokens));
    for (int32_t h = 0; h < p.num_heads(); ++h)
      p.set_head(h, [&](int32_t row, std::vector<int32_t>& keys) {
        keys.push_back(row);
        if (row + k < p.num_tokens()) keys.push_back(row + k);
      });
    return p;
  };
  return g;
}

MaskContext context() {
  MaskContext c;
  c.num_tokens = 6;
  c.num_prefix_tokens = 1;
  c.num_heads = 2;
  c.head_dim = 4;
  c.num_layers = 1;
  return c;
}

TEST(RegisteredMask, IsFoundValidatedAndBuilt) {
  register_mask_generator(diagonal_plus("test_diagonal_plus", 1));
  const auto names = mask_names();
  EXPECT_NE(std::find(names.begin(), names.end(), "test_diagonal_plus"), names.end());
  MaskKwargs kw;
  kw.set_scalar("extra", "2");
  const Pattern p = build_mask("test_diagonal_plus", context(), kw);
  EXPECT_TRUE(p.contains(0, 1, 3));
  EXPECT_FALSE(p.contains(0, 1, 2));
  MaskKwargs bad;
  bad.set_scalar("extr", "2");
  EXPECT_THROW(build_mask("test_diagonal_plus", context(), bad), UsageError);
}

TEST(RegisteredMask, ReplacesAnEarlierRegistrationAndRefusesBuiltInNames) {
  register_mask_generator(diagonal_plus("test_replaced", 1));
  register_mask_generator(diagonal_plus("test_replaced", 3));
  const Pattern p = build_mask("test_replaced", context(), MaskKwargs());
  EXPECT_TRUE(p.contains(1, 0, 3));
  EXPECT_FALSE(p.contains(1, 0, 1));
  EXPECT_THROW(register_mask_generator(diagonal_plus("fibo", 1)), UsageError);
  MaskGenerator empty;
  empty.name = "test_empty";
  EXPECT_THROW(register_mask_generator(empty), UsageError);
}

}  // namespace
}  // namespace sparsevit::patterns
