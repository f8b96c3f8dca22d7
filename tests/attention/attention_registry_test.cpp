// The config layer's backend table and the module registry agree, and every shipped config of a
// backend without a pattern costs Fibottention's attention GFLOPs on ViT-B/16 (within 10%).
#include <algorithm>

#include "attention/backend_test_util.h"
#include "config/attention_backends.h"
#include "patterns/pattern_stats.h"

namespace sparsevit::attention {
namespace {

using namespace testing;

TEST(AttentionRegistry, EveryConfigBackendIsRegistered) {
  auto configured = config::backend_names(), registered = attention_backend_names();
  std::sort(configured.begin(), configured.end());
  std::sort(registered.begin(), registered.end());
  EXPECT_EQ(configured, registered);
}

TEST(AttentionRegistry, NamesWithoutFactoriesFailTheStartUpCheck) {
  EXPECT_NO_THROW(check_backend_registry());
  EXPECT_EQ(attention_backend_names(), config::backend_names());  // one list, the config table's order
  EXPECT_NO_THROW(check_backend_names({"vit", "dense"}, {"dense", "vit"}));
  try {
    check_backend_names({"vit", "dense", "newbackend"}, {"vit", "dense", "orphan"});
    ADD_FAILURE() << "a name without a factory passed";
  } catch (const std::logic_error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("'newbackend' has no factory"), std::string::npos) << what;
    EXPECT_NE(what.find("factory 'orphan'"), std::string::npos) << what;
  }
  // An unknown backend is still the user's UsageError with a suggestion.
  config::AttentionSpec spec;
  spec.backend = "linformr";
  expect_usage_error([&] { make_attention(spec, dims_of(16, 2, 10), std::nullopt); }, "did you mean 'linformer'");
}

TEST(AttentionRegistry, ModulesReportTheConfigLayersCost) {
  for (const char* backend : {"linformer", "efficient", "performer", "imhsa", "reformer"}) {
    const auto spec = spec_of(std::string("attention: {backend: ") + backend + "}");
    const auto module = make_attention(spec, dims_of(32, 4, 50), std::nullopt);
    EXPECT_EQ(module->kernel_name(), backend);
    const auto expected = config::backend_pairs_per_head(backend, spec.backend_kwargs, AttentionGeometry{50, 1, 4, 8, 1});
    ASSERT_TRUE(expected.has_value()) << backend;
    EXPECT_DOUBLE_EQ(module->computed_pairs_per_head(50), *expected) << backend;
  }
  EXPECT_FALSE(config::backend_pairs_per_head("vit", {}, AttentionGeometry{}).has_value());
  expect_usage_error([] { spec_of("attention: {backend: vit, backend_kwargs: {k: 3}}"); }, "takes no backend_kwargs");
}

TEST(AttentionRegistry, ShippedConfigsMatchFibottentionsBudgetOnVitBase) {
  const AttentionGeometry vit_b{197, 1, 12, 64, 1};
  double fibottention = 0;
  const auto fib = config::load_attention_spec(SPARSEVIT_SOURCE_DIR "/configs/attention/vit_fibottention.yaml");
  for (const auto& layer : config::build_layer_patterns(fib, AttentionGeometry{197, 1, 12, 64, 12}))
    fibottention += patterns::attention_gflops(*layer, 64);
  for (const char* backend : {"linformer", "efficient", "performer", "imhsa", "reformer"}) {
    const auto spec = config::load_attention_spec(std::string(SPARSEVIT_SOURCE_DIR "/configs/attention/vit_") + backend + ".yaml");
    const double gflops =
        12 * 12 * patterns::attention_gflops_for_pairs(*config::backend_pairs_per_head(backend, spec.backend_kwargs, vit_b), 64);
    EXPECT_NEAR(gflops / fibottention, 1.0, 0.10) << backend << ": " << gflops << " vs " << fibottention;
  }
}

}  // namespace
}  // namespace sparsevit::attention
