// AttentionSpec: the attention config format (docs/conventions.md), its errors (naming the key and
// file:line), --set overrides, the layer patterns it builds, and a deterministic fuzz of every
// shipped config: malformed YAML must end in a UsageError, never a crash or another exception.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <optional>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "config/attention_backends.h"
#include "config/attention_spec.h"
#include "patterns/mask_registry.h"
#include "patterns/pattern_stats.h"
#include "util/errors.h"

namespace sparsevit::config {
namespace {

namespace fs = std::filesystem;

const fs::path kConfigDir = fs::path(SPARSEVIT_SOURCE_DIR) / "configs" / "attention";

std::string read_file(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

std::vector<fs::path> config_files() {
  std::vector<fs::path> files;
  for (const auto& entry : fs::directory_iterator(kConfigDir))
    if (entry.path().extension() == ".yaml") files.push_back(entry.path());
  std::sort(files.begin(), files.end());
  return files;
}

// The UsageError message of parse_attention_spec(yaml, source), or a marker when it does not throw one.
std::string parse_error(const std::string& yaml, const std::string& source = "cfg.yaml") {
  try {
    parse_attention_spec(yaml, source);
  } catch (const UsageError& e) {
    return e.what();
  } catch (const std::exception& e) {
    return std::string("<not a UsageError: ") + e.what() + ">";
  }
  return "<no exception>";
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

bool contains(const std::string& haystack, const std::string& needle) {
  return haystack.find(needle) != std::string::npos;
}

// =============================================================================================

TEST(AttentionSpec, EveryShippedConfigParses) {
  const auto files = config_files();
  ASSERT_GE(files.size(), 11u) << kConfigDir;
  const std::vector<std::string> expected = {
      "vit_bigbird.yaml",    "vit_dense.yaml",      "vit_fibonacci.yaml",         "vit_fibottention.yaml",
      "vit_fibottention_modified.yaml", "vit_longformer.yaml", "vit_pruning.yaml", "vit_random.yaml",
      "vit_sparse_transformer.yaml",    "vit_structured_local.yaml", "vit_topk.yaml"};
  for (const auto& name : expected) EXPECT_TRUE(fs::exists(kConfigDir / name)) << name;
  for (const auto& file : files) {
    SCOPED_TRACE(file.string());
    AttentionSpec spec;
    ASSERT_NO_THROW(spec = load_attention_spec(file.string()));
    EXPECT_EQ(spec.source, file.string());
    // vit configs, or a backend without a pattern and its own kwargs (linformer, performer, ...).
    EXPECT_TRUE(spec.backend == "vit" || spec.has_mask() == false) << spec.backend;
    EXPECT_NO_THROW(validate_backend_kwargs(spec.backend, spec.backend_kwargs));
    // Parsing the text directly gives the same spec.
    const AttentionSpec again = parse_attention_spec(read_file(file), file.string());
    EXPECT_EQ(again.mask, spec.mask);
    EXPECT_EQ(again.mask_kwargs.names(), spec.mask_kwargs.names());
    if (spec.has_mask()) {
      // The mask and its kwargs are known to the registry.
      EXPECT_NO_THROW(patterns::validate_mask_kwargs(patterns::find_mask(spec.mask), spec.mask_kwargs));
    }
    // Every config but the pruning one (which needs a calibration file) builds at small sizes
    // (12 layers: the Longformer config lists one window per layer of a ViT-B).
    if (spec.mask != "pruning") {
      std::vector<std::optional<patterns::Pattern>> layers;
      ASSERT_NO_THROW(layers = build_layer_patterns(spec, AttentionGeometry{17, 1, 3, 64, 12}));
      EXPECT_EQ(layers.size(), 12u);
    }
  }
  EXPECT_EQ(load_attention_spec((kConfigDir / "vit_dense.yaml").string()).has_mask(), false);
  EXPECT_EQ(load_attention_spec((kConfigDir / "vit_topk.yaml").string()).has_dynamic_mask(), true);
  EXPECT_EQ(load_attention_spec((kConfigDir / "vit_fibottention.yaml").string()).mask, "fibo");
  EXPECT_EQ(load_attention_spec((kConfigDir / "vit_longformer.yaml").string()).mask_kwargs.is_list("window"), true);
}

TEST(AttentionSpec, ShippedSparseConfigsNearTheirDocumentedPruning) {
  auto ratio = [](const std::string& name) {
    const AttentionSpec spec = load_attention_spec((kConfigDir / name).string());
    std::vector<patterns::Pattern> layers;
    for (auto& p : build_layer_patterns(spec, AttentionGeometry{197, 1, 12, 64, 12})) layers.push_back(std::move(*p));
    return patterns::pruning_ratio(layers);
  };
  EXPECT_NEAR(ratio("vit_fibottention.yaml"), 0.9801, 5e-5);
  EXPECT_NEAR(ratio("vit_fibottention_modified.yaml"), 0.9622, 5e-5);
  EXPECT_NEAR(ratio("vit_structured_local.yaml"), 0.9797, 5e-5);
  EXPECT_NEAR(ratio("vit_random.yaml"), 0.98, 0.005);
  EXPECT_NEAR(ratio("vit_bigbird.yaml"), 0.98, 0.005);
}

TEST(AttentionSpec, TheDocumentedFormat) {
  // docs/conventions.md "Attention configs", verbatim (comment included).
  const std::string yaml =
      "attention:\n"
      "  backend: vit\n"
      "  mask: fibo\n"
      "  mask_kwargs:\n"
      "    w_min: 5\n"
      "    w_max: 65\n"
      "    schedule: wythoff      # or: wythoff_modified, fibonacci\n";
  const AttentionSpec spec = parse_attention_spec(yaml, "doc.yaml");
  EXPECT_EQ(spec.backend, "vit");
  EXPECT_EQ(spec.mask, "fibo");
  EXPECT_EQ(spec.kernel, AttentionKernel::kAuto);
  EXPECT_EQ(kernel_name(spec.kernel), "auto");
  EXPECT_EQ(spec.source, "doc.yaml");
  EXPECT_TRUE(spec.has_mask());
  EXPECT_FALSE(spec.has_dynamic_mask());
  EXPECT_EQ(spec.mask_kwargs.names(), (std::vector<std::string>{"schedule", "w_max", "w_min"}));
  EXPECT_EQ(spec.mask_kwargs.get_int("w_min", 0), 5);
  EXPECT_EQ(spec.mask_kwargs.get_int("w_max", 0), 65);
  EXPECT_EQ(spec.mask_kwargs.get_choice("schedule", "", {"wythoff", "wythoff_modified", "fibonacci"}), "wythoff");
  // Each kwarg remembers where it was written.
  EXPECT_TRUE(contains(spec.mask_kwargs.describe("w_max"), "doc.yaml:6")) << spec.mask_kwargs.describe("w_max");

  // Flow style, kernel, `mask: none` / `mask: dense` mean dense, backend alone.
  const AttentionSpec flow =
      parse_attention_spec("attention: {backend: vit, mask: local, mask_kwargs: {window: 3}, kernel: masked}\n", "f");
  EXPECT_EQ(flow.mask, "local");
  EXPECT_EQ(flow.kernel, AttentionKernel::kMasked);
  EXPECT_EQ(flow.mask_kwargs.get_int("window", 0), 3);
  EXPECT_FALSE(parse_attention_spec("attention:\n  backend: vit\n  mask: none\n", "n").has_mask());
  EXPECT_FALSE(parse_attention_spec("attention:\n  backend: vit\n  mask: dense\n", "n").has_mask());
  EXPECT_FALSE(parse_attention_spec("attention:\n  backend: dense\n", "n").has_mask());
  EXPECT_FALSE(parse_attention_spec("attention:\n  mask:\n", "n").has_mask());
  EXPECT_EQ(parse_attention_spec("attention:\n  mask: fibo\n", "n").backend, "vit");  // default backend
  EXPECT_EQ(parse_attention_spec("attention: {backend: topk, mask: topk, mask_kwargs: {k: 8}}\n", "t").backend, "topk");
  for (const auto& backend : backend_names())
    EXPECT_NO_THROW(parse_attention_spec("attention:\n  backend: " + backend + "\n", "b")) << backend;
  for (const auto& kernel : kernel_names())
    EXPECT_NO_THROW(parse_attention_spec("attention:\n  kernel: " + kernel + "\n", "k")) << kernel;
}

TEST(AttentionSpec, MaskKwargsLists) {
  const AttentionSpec block = parse_attention_spec(
      "attention:\n"
      "  mask: longformer\n"
      "  mask_kwargs:\n"
      "    window:\n"
      "      - 1\n"
      "      - 2\n"
      "    dilated_heads: 1\n",
      "list.yaml");
  EXPECT_TRUE(block.mask_kwargs.is_list("window"));
  EXPECT_FALSE(block.mask_kwargs.is_list("dilated_heads"));
  EXPECT_EQ(block.mask_kwargs.get_int_list("window"), (std::vector<int64_t>{1, 2}));
  const AttentionSpec flow = parse_attention_spec(
      "attention:\n  mask: local\n  mask_kwargs:\n    head_windows: [1, 2, 3]\n", "flow.yaml");
  EXPECT_EQ(flow.mask_kwargs.get_int_list("head_windows"), (std::vector<int64_t>{1, 2, 3}));
  const auto layers = build_layer_patterns(flow, AttentionGeometry{20, 1, 3, 64, 1});
  ASSERT_TRUE(layers[0].has_value());
  EXPECT_EQ(layers[0]->window(2).value(), 3);
  // A list where a scalar is expected, and a list item that is not a value.
  const std::string scalar_expected = usage_error_message([] {
    const AttentionSpec spec =
        parse_attention_spec("attention:\n  mask: local\n  mask_kwargs:\n    window: [1, 2]\n", "s.yaml");
    build_layer_patterns(spec, AttentionGeometry{20, 1, 2, 64, 1});
  });
  EXPECT_TRUE(contains(scalar_expected, "window")) << scalar_expected;
  EXPECT_TRUE(contains(scalar_expected, "s.yaml:4")) << scalar_expected;
  const std::string nested = parse_error("attention:\n  mask: local\n  mask_kwargs:\n    head_windows: [[1], 2]\n");
  EXPECT_TRUE(contains(nested, "cfg.yaml:4")) << nested;
  const std::string map_value = parse_error("attention:\n  mask: local\n  mask_kwargs:\n    window: {a: 1}\n");
  EXPECT_TRUE(contains(map_value, "window")) << map_value;
  EXPECT_TRUE(contains(map_value, "cfg.yaml:4")) << map_value;
}

TEST(AttentionSpec, BackendNamesAreCaseInsensitive) {
  // The reference implementation's configs write `backend: ViT`.
  EXPECT_EQ(parse_attention_spec("attention:\n  backend: ViT\n  mask: fibo\n", "<test>").backend, "vit");
  EXPECT_EQ(parse_attention_spec("attention:\n  backend: LINFORMER\n", "<test>").backend, "linformer");
  EXPECT_THROW(parse_attention_spec("attention:\n  backend: ViTT\n", "<test>"), UsageError);
}

TEST(AttentionSpec, UnknownTopLevelKey) {
  const std::string msg = parse_error("attention:\n  backend: vit\nmodel: vit_base\n", "top.yaml");
  EXPECT_TRUE(contains(msg, "'model'")) << msg;
  EXPECT_TRUE(contains(msg, "top.yaml:3")) << msg;
  const std::string typo = parse_error("# comment\nattenton:\n  backend: vit\n", "typo.yaml");
  EXPECT_TRUE(contains(typo, "attenton")) << typo;
  EXPECT_TRUE(contains(typo, "typo.yaml:2")) << typo;
  EXPECT_TRUE(contains(typo, "did you mean 'attention'")) << typo;
}

TEST(AttentionSpec, UnknownAttentionKey) {
  const std::string msg = parse_error("attention:\n  backend: vit\n  mask: fibo\n  mask_kwarg:\n    w_min: 3\n");
  EXPECT_TRUE(contains(msg, "mask_kwarg")) << msg;
  EXPECT_TRUE(contains(msg, "cfg.yaml:4")) << msg;
  EXPECT_TRUE(contains(msg, "did you mean 'mask_kwargs'")) << msg;
}

TEST(AttentionSpec, UnknownBackend) {
  const std::string msg = parse_error("attention:\n\n  backend: vitt\n");
  EXPECT_TRUE(contains(msg, "vitt")) << msg;
  EXPECT_TRUE(contains(msg, "backend")) << msg;
  EXPECT_TRUE(contains(msg, "cfg.yaml:3")) << msg;
  EXPECT_TRUE(contains(msg, "did you mean 'vit'")) << msg;
  const std::string kernel = parse_error("attention:\n  kernel: fastest\n");
  EXPECT_TRUE(contains(kernel, "fastest")) << kernel;
  EXPECT_TRUE(contains(kernel, "cfg.yaml:2")) << kernel;
  const std::string list = parse_error("attention:\n  backend: [vit]\n");
  EXPECT_TRUE(contains(list, "backend")) << list;
  EXPECT_TRUE(contains(list, "cfg.yaml:2")) << list;
}

TEST(AttentionSpec, UnknownMask) {
  const std::string msg = parse_error("attention:\n  backend: vit\n  mask: fibbo\n", "m.yaml");
  EXPECT_TRUE(contains(msg, "fibbo")) << msg;
  EXPECT_TRUE(contains(msg, "did you mean 'fibo'")) << msg;
  EXPECT_TRUE(contains(msg, "m.yaml:3")) << msg;
}

TEST(AttentionSpec, UnknownKwarg) {
  const std::string msg = parse_error("attention:\n  mask: fibo\n  mask_kwargs:\n    w_min: 5\n    w_mx: 65\n", "k.yaml");
  EXPECT_TRUE(contains(msg, "w_mx")) << msg;
  EXPECT_TRUE(contains(msg, "k.yaml:5")) << msg;
  EXPECT_TRUE(contains(msg, "did you mean 'w_max'")) << msg;
}

TEST(AttentionSpec, BadValuesNameTheKwargAndItsLineWhenBuilt) {
  const AttentionSpec spec =
      parse_attention_spec("attention:\n  mask: fibo\n  mask_kwargs:\n    w_min: 70\n    w_max: 65\n", "v.yaml");
  const std::string order = usage_error_message([&] { build_layer_patterns(spec, AttentionGeometry{197, 1, 12, 64, 2}); });
  EXPECT_TRUE(contains(order, "w_min")) << order;
  EXPECT_TRUE(contains(order, "v.yaml:4")) << order;
  const AttentionSpec negative =
      parse_attention_spec("attention:\n  mask: local\n  mask_kwargs:\n    window: -1\n", "w.yaml");
  const std::string neg = usage_error_message([&] { build_layer_patterns(negative, AttentionGeometry{50, 1, 2, 64, 1}); });
  EXPECT_TRUE(contains(neg, "window")) << neg;
  EXPECT_TRUE(contains(neg, "w.yaml:4")) << neg;
  const AttentionSpec word =
      parse_attention_spec("attention:\n  mask: random\n  mask_kwargs:\n    keys_per_query: many\n", "r.yaml");
  const std::string w = usage_error_message([&] { build_layer_patterns(word, AttentionGeometry{50, 1, 2, 64, 1}); });
  EXPECT_TRUE(contains(w, "keys_per_query")) << w;
  EXPECT_TRUE(contains(w, "r.yaml:4")) << w;
}

TEST(AttentionSpec, StructuralErrors) {
  for (const std::string& yaml : {
           std::string(""),                                    // empty document
           std::string("# only a comment\n"),
           std::string("attention\n"),                         // a scalar
           std::string("- attention\n"),                       // a list
           std::string("backend: vit\n"),                      // no attention section (unknown key)
           std::string("attention: vit\n"),                    // not a mapping
           std::string("attention: [vit]\n"),
           std::string("attention:\n  mask_kwargs: {window: 2}\n"),             // kwargs without a mask
           std::string("attention:\n  backend: dense\n  mask: fibo\n"),          // dense takes no mask
           std::string("attention:\n  mask: fibo\n  mask_kwargs: [w_min, 5]\n"),  // kwargs not a mapping
           std::string("attention:\n  mask: {name: fibo}\n"),
           std::string("attention:\n  backend: vit\n backend: vit\n"),           // bad indentation
           std::string("attention: {backend: vit\n"),                           // unbalanced
           std::string("attention:\n  backend: \"vit\n"),                       // unterminated string
           std::string("attention:\n  mask: *anchor\n"),                        // unknown alias
           std::string("? [a, b]\n: 1\n"),                                      // complex key
           std::string("attention:\n  ? [a]\n  : 1\n"),
           std::string("attention:\n  mask: fibo\n  mask_kwargs:\n    ? [w]\n    : 1\n"),
           std::string("\t attention:\n"),
       }) {
    const std::string msg = parse_error(yaml, "bad.yaml");
    EXPECT_FALSE(contains(msg, "<no exception>")) << "accepted: " << yaml;
    EXPECT_FALSE(contains(msg, "<not a UsageError")) << yaml << " -> " << msg;
    EXPECT_TRUE(contains(msg, "bad.yaml")) << yaml << " -> " << msg;
  }
  // Syntax errors carry the 1-based line.
  const std::string unbalanced = parse_error("attention:\n  backend: vit\n  mask: [fibo\n", "u.yaml");
  EXPECT_TRUE(contains(unbalanced, "u.yaml:")) << unbalanced;
  EXPECT_TRUE(contains(unbalanced, "invalid YAML")) << unbalanced;
}

TEST(AttentionSpec, LoadMissingFileIsAUsageError) {
  const std::string path = (fs::temp_directory_path() / "sparsevit_no_such_dir" / "none.yaml").string();
  const std::string msg = usage_error_message([&] { load_attention_spec(path); });
  EXPECT_TRUE(contains(msg, path)) << msg;
  // A directory is not a config either.
  EXPECT_THROW(load_attention_spec(kConfigDir.string()), UsageError);
}

TEST(AttentionSpec, SparseTransformerBudgetConfigPrunesThePapersShare) {
  // configs/attention/vit_sparse_transformer_budget.yaml at ViT-B's geometry: 98.47% of the
  // patch pairs pruned, the budget the paper compares Sparse Transformer at.
  const AttentionSpec spec = load_attention_spec((kConfigDir / "vit_sparse_transformer_budget.yaml").string());
  std::vector<patterns::Pattern> layers;
  for (auto& p : build_layer_patterns(spec, AttentionGeometry{197, 1, 12, 64, 12})) layers.push_back(std::move(*p));
  ASSERT_EQ(layers.size(), 12u);
  EXPECT_NEAR(patterns::pruning_ratio(layers), 0.9847, 5e-5);
  // The shipped default-stride config keeps its number.
  const AttentionSpec classic = load_attention_spec((kConfigDir / "vit_sparse_transformer.yaml").string());
  std::vector<patterns::Pattern> classic_layers;
  for (auto& p : build_layer_patterns(classic, AttentionGeometry{197, 1, 12, 64, 12}))
    classic_layers.push_back(std::move(*p));
  EXPECT_NEAR(patterns::pruning_ratio(classic_layers), 0.8954, 5e-5);
}

TEST(AttentionSpec, SetOverrides) {
  AttentionSpec spec = load_attention_spec((kConfigDir / "vit_structured_local.yaml").string());
  apply_mask_kwarg_overrides(spec, {"window=10"});
  EXPECT_EQ(spec.mask_kwargs.get_int("window", 0), 10);
  std::vector<patterns::Pattern> layers;
  for (auto& p : build_layer_patterns(spec, AttentionGeometry{197, 1, 12, 64, 12})) layers.push_back(std::move(*p));
  EXPECT_NEAR(patterns::pruning_ratio(layers), 0.9008, 5e-5);
  // Overrides name the command line as their origin.
  EXPECT_TRUE(contains(spec.mask_kwargs.describe("window"), "command line")) << spec.mask_kwargs.describe("window");

  AttentionSpec fibo = default_attention_spec();
  apply_mask_kwarg_overrides(fibo, {"w_max=33", " schedule = wythoff_modified "});
  EXPECT_EQ(fibo.mask_kwargs.get_int("w_max", 0), 33);
  EXPECT_EQ(fibo.mask_kwargs.get_choice("schedule", "", {"wythoff_modified"}), "wythoff_modified");
  apply_mask_kwarg_overrides(fibo, {});  // nothing to do

  AttentionSpec lists = load_attention_spec((kConfigDir / "vit_structured_local.yaml").string());
  apply_mask_kwarg_overrides(lists, {"head_windows=[1, 2,3]"});
  EXPECT_EQ(lists.mask_kwargs.get_int_list("head_windows"), (std::vector<int64_t>{1, 2, 3}));
  // window and head_windows together are refused when built.
  EXPECT_THROW(build_layer_patterns(lists, AttentionGeometry{20, 1, 3, 64, 1}), UsageError);

  AttentionSpec bad = default_attention_spec();
  const std::string typo = usage_error_message([&] { apply_mask_kwarg_overrides(bad, {"w_mx=3"}); });
  EXPECT_TRUE(contains(typo, "w_mx")) << typo;
  EXPECT_TRUE(contains(typo, "did you mean 'w_max'")) << typo;
  EXPECT_THROW(apply_mask_kwarg_overrides(bad, {"w_max"}), UsageError);
  EXPECT_THROW(apply_mask_kwarg_overrides(bad, {"=3"}), UsageError);
  AttentionSpec dense = load_attention_spec((kConfigDir / "vit_dense.yaml").string());
  EXPECT_THROW(apply_mask_kwarg_overrides(dense, {"window=3"}), UsageError);
}

TEST(AttentionSpec, BuildLayerPatterns) {
  const AttentionSpec dense = load_attention_spec((kConfigDir / "vit_dense.yaml").string());
  const auto none = build_layer_patterns(dense, AttentionGeometry{197, 1, 12, 64, 12});
  ASSERT_EQ(none.size(), 12u);
  for (const auto& l : none) EXPECT_FALSE(l.has_value());

  const AttentionSpec topk = load_attention_spec((kConfigDir / "vit_topk.yaml").string());
  const auto dynamic = build_layer_patterns(topk, AttentionGeometry{197, 1, 12, 64, 4});
  ASSERT_EQ(dynamic.size(), 4u);
  for (const auto& l : dynamic) EXPECT_FALSE(l.has_value());

  const AttentionSpec fibo = load_attention_spec((kConfigDir / "vit_fibottention.yaml").string());
  const auto layers = build_layer_patterns(fibo, AttentionGeometry{197, 1, 12, 64, 12});
  ASSERT_EQ(layers.size(), 12u);
  for (int32_t l = 0; l < 12; ++l) {
    ASSERT_TRUE(layers[l].has_value()) << l;
    EXPECT_EQ(layers[l]->num_tokens(), 197);
    EXPECT_EQ(layers[l]->num_heads(), 12);
    EXPECT_EQ(layers[l]->num_prefix_tokens(), 1);
  }
  // Each layer is the registry's build for that layer index.
  const auto direct = patterns::build_layer_masks("fibo", AttentionGeometry{197, 1, 12, 64, 12}, fibo.mask_kwargs);
  for (int32_t l = 0; l < 12; ++l)
    for (int32_t h = 0; h < 12; ++h) EXPECT_EQ(layers[l]->col_idx(h), direct[l].col_idx(h)) << l << " " << h;

  AttentionSpec forced_dense = fibo;
  forced_dense.kernel = AttentionKernel::kDense;
  for (const auto& l : build_layer_patterns(forced_dense, AttentionGeometry{197, 1, 12, 64, 3})) EXPECT_FALSE(l.has_value());

  EXPECT_THROW(build_layer_patterns(fibo, AttentionGeometry{197, 1, 0, 64, 2}), UsageError);
  EXPECT_THROW(build_layer_patterns(fibo, AttentionGeometry{0, 1, 12, 64, 2}), UsageError);
}

TEST(AttentionSpec, DefaultIsFibottention5To65) {
  const AttentionSpec spec = default_attention_spec();
  EXPECT_EQ(spec.backend, "vit");
  EXPECT_EQ(spec.mask, "fibo");
  EXPECT_EQ(spec.mask_kwargs.get_int("w_min", 0), 5);
  EXPECT_EQ(spec.mask_kwargs.get_int("w_max", 0), 65);
  EXPECT_EQ(spec.mask_kwargs.get_choice("schedule", "", {"wythoff"}), "wythoff");
  EXPECT_FALSE(default_attention_yaml().empty());
  const AttentionSpec reparsed = parse_attention_spec(default_attention_yaml(), "again");
  EXPECT_EQ(reparsed.mask_kwargs.names(), spec.mask_kwargs.names());
  // Same as the shipped Fibottention config.
  const AttentionSpec shipped = load_attention_spec((kConfigDir / "vit_fibottention.yaml").string());
  const auto a = build_layer_patterns(spec, AttentionGeometry{197, 1, 12, 64, 12});
  const auto b = build_layer_patterns(shipped, AttentionGeometry{197, 1, 12, 64, 12});
  for (int32_t l = 0; l < 12; ++l)
    for (int32_t h = 0; h < 12; ++h) EXPECT_EQ(a[l]->col_idx(h), b[l]->col_idx(h));
}

// =============================================================================================
// fuzz

// One deterministic mutation of `text`, drawn from `rng`.
std::string mutate(const std::string& text, std::mt19937_64& rng) {
  auto below = [&](uint64_t n) { return n == 0 ? uint64_t{0} : rng() % n; };
  std::string s = text;
  static const std::vector<std::string> fragments = {
      "---\n", "...\n", "&a ", "*a", "<<: *a\n", "[", "]", "{", "}", ":", ": ", "- ", "? ", "!!str ", "!!int ",
      "!!binary ", "|", ">", "\"", "'", "#", "%YAML 1.2\n", "\t", "\n", "  ", ",", "null", "~", "true",
      "99999999999999999999999999", "-9223372036854775808", "9223372036854775807", "1e308", "-1", "0", "nan",
      ".inf", "0x10", "1_000", "\xef\xbb\xbf", "\xff\xfe", "\x00", "\r\n", "attention:", "mask_kwargs:",
      "window: ", "mask: ", "backend: ", "[1, 2, 3]", "{a: 1}", "&x [1, *x]", "@", "`", "%"};
  const int ops = 1 + static_cast<int>(below(3));
  for (int op = 0; op < ops; ++op) {
    const uint64_t pos = below(s.size() + 1);
    switch (below(12)) {
      case 0:  // truncate
        s.resize(pos);
        break;
      case 1: {  // insert random bytes
        const int count = 1 + static_cast<int>(below(8));
        std::string bytes;
        for (int i = 0; i < count; ++i) bytes += static_cast<char>(below(256));
        s.insert(pos, bytes);
        break;
      }
      case 2:  // flip a character
        if (!s.empty()) s[below(s.size())] ^= static_cast<char>(1 << below(8));
        break;
      case 3:  // replace a character with a printable one
        if (!s.empty()) s[below(s.size())] = static_cast<char>(32 + below(95));
        break;
      case 4: {  // duplicate a line
        std::vector<std::string> lines;
        std::stringstream in(s);
        for (std::string l; std::getline(in, l);) lines.push_back(l);
        if (lines.empty()) break;
        const uint64_t i = below(lines.size());
        lines.insert(lines.begin() + static_cast<std::ptrdiff_t>(i), lines[i]);
        s.clear();
        for (const auto& l : lines) s += l + "\n";
        break;
      }
      case 5: {  // delete a line
        std::vector<std::string> lines;
        std::stringstream in(s);
        for (std::string l; std::getline(in, l);) lines.push_back(l);
        if (lines.empty()) break;
        lines.erase(lines.begin() + static_cast<std::ptrdiff_t>(below(lines.size())));
        s.clear();
        for (const auto& l : lines) s += l + "\n";
        break;
      }
      case 6:  // insert a YAML-significant fragment
      case 7:
        s.insert(pos, fragments[below(fragments.size())]);
        break;
      case 8: {  // replace every space of a line's indentation with a tab
        const auto line_start = s.rfind('\n', pos == 0 ? 0 : pos - 1);
        const std::size_t b = line_start == std::string::npos ? 0 : line_start + 1;
        for (std::size_t i = b; i < s.size() && s[i] == ' '; ++i) s[i] = '\t';
        break;
      }
      case 9: {  // replace a number with a huge or odd one
        const auto digit = s.find_first_of("0123456789", pos);
        if (digit == std::string::npos) break;
        auto end = s.find_first_not_of("0123456789.", digit);
        if (end == std::string::npos) end = s.size();
        static const std::vector<std::string> numbers = {"99999999999999999999", "9223372036854775807",
                                                         "2147483648", "-1", "0", "1e9", "1000000000000",
                                                         "4294967296", "65536", "0.5", "-0", "+7"};
        s.replace(digit, end - digit, numbers[below(numbers.size())]);
        break;
      }
      case 10: {  // a second document or an anchor / alias pair
        static const std::vector<std::string> tails = {"---\nattention:\n  backend: vit\n", "---\n", "--- [1\n",
                                                       "x: &a {b: *a}\n", "...\n---\n"};
        s += tails[below(tails.size())];
        break;
      }
      case 11: {  // pure binary
        if (below(4) == 0) {
          s.assign(below(64), '\0');
          for (char& c : s) c = static_cast<char>(below(256));
        } else {
          s.insert(pos, std::string(1 + below(3), static_cast<char>(below(2) ? '[' : '{')));
        }
        break;
      }
    }
  }
  return s;
}

TEST(AttentionSpecFuzz, MutatedConfigsParseOrThrowUsageError) {
  const auto files = config_files();
  ASSERT_FALSE(files.empty());
  const auto start = std::chrono::steady_clock::now();
  int parsed = 0, rejected = 0, built = 0, build_rejected = 0;
  constexpr int kPerFile = 1000;
  for (std::size_t f = 0; f < files.size(); ++f) {
    const std::string original = read_file(files[f]);
    std::mt19937_64 rng(0x5eed0000ULL + f);
    for (int i = 0; i < kPerFile; ++i) {
      const std::string text = mutate(original, rng);
      const std::string source = files[f].filename().string() + "#" + std::to_string(i);
      AttentionSpec spec;
      try {
        spec = parse_attention_spec(text, source);
        ++parsed;
      } catch (const UsageError& e) {
        ++rejected;
        EXPECT_TRUE(contains(e.what(), source)) << "message does not name the source: " << e.what();
        continue;
      } catch (const std::exception& e) {
        ADD_FAILURE() << source << ": not a UsageError: " << e.what() << "\n--- input ---\n" << text;
        continue;
      } catch (...) {
        ADD_FAILURE() << source << ": non-standard exception\n--- input ---\n" << text;
        continue;
      }
      // A spec that parses builds at small sizes or fails with a UsageError / RuntimeError.
      try {
        const auto layers = build_layer_patterns(spec, AttentionGeometry{17, 1, 3, 64, 2});
        EXPECT_EQ(layers.size(), 2u);
        ++built;
      } catch (const UsageError&) {
        ++build_rejected;
      } catch (const RuntimeError&) {
        ++build_rejected;
      } catch (const std::exception& e) {
        ADD_FAILURE() << source << ": build threw neither UsageError nor RuntimeError: " << e.what()
                      << "\n--- input ---\n" << text;
      }
    }
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  // The mutations exercise both paths.
  EXPECT_GT(parsed, 100);
  EXPECT_GT(rejected, 100);
  EXPECT_GT(built, 50);
  RecordProperty("parsed", parsed);
  RecordProperty("rejected", rejected);
  std::printf("fuzz: %d parsed (%d built, %d build errors), %d rejected, %.2f s\n", parsed, built,
              build_rejected, rejected, seconds);
}

TEST(AttentionSpecFuzz, HandwrittenHostileDocuments) {
  const std::vector<std::string> docs = {
      std::string("attention:\n  backend: vit\n", 20) + std::string(1, '\0') + "garbage",
      "attention: &a\n  backend: vit\n  mask: *a\n",
      "a: &a [*a]\n",
      "attention: &x {backend: vit, mask_kwargs: *x}\n",
      "base: &b {w_min: 5}\nattention:\n  mask: fibo\n  mask_kwargs:\n    <<: *b\n",
      "attention:\n  mask: fibo\n  mask_kwargs:\n    w_min: 99999999999999999999999\n",
      "attention:\n  mask: fibo\n  mask_kwargs:\n    w_min: 1\n    w_max: 9223372036854775807\n",
      "attention:\n  mask: local\n  mask_kwargs:\n    window: 9223372036854775807\n",
      "attention:\n  mask: random\n  mask_kwargs:\n    keys_per_query: 9223372036854775807\n",
      "attention:\n  mask: bigbird\n  mask_kwargs:\n    random_per_query: 9223372036854775807\n",
      "attention:\n  mask: longformer\n  mask_kwargs:\n    window: 9223372036854775807\n    dilation: 9223372036854775807\n    dilated_heads: 1\n",
      "attention:\n  mask: topk\n  mask_kwargs:\n    k: 9223372036854775807\n",
      "attention:\n  mask: fibo\n  mask_kwargs:\n    sequence: [9223372036854775807, 0, 1]\n",
      "attention:\n  mask: fibo\n  mask_kwargs:\n    w_min: 1.5\n",
      "attention:\n  mask: fibo\n  mask_kwargs:\n    w_min: .nan\n",
      "attention:\n  mask: random\n  mask_kwargs:\n    density: .inf\n",
      "attention:\n  mask: random\n  mask_kwargs:\n    density: nan\n",
      "attention:\n  mask: fibo\n  mask_kwargs:\n    w_min: !!binary aGVsbG8=\n",
      "attention:\n  mask: fibo\n  mask_kwargs:\n    w_min: \"\"\n",
      "attention:\n  mask: fibo\n  mask_kwargs:\n    w_min: []\n",
      "attention:\n  mask: fibo\n  mask_kwargs:\n    w_min:\n",
      "---\nattention:\n  backend: vit\n---\nattention:\n  backend: vitt\n",
      "attention:\n  backend: vit\n...\n",
      "%YAML 1.2\n---\nattention:\n  backend: vit\n",
      "%YAML 9.9\n---\nattention: {}\n",
      "attention: {}\n",
      "attention:\n",
      std::string(10000, '['),
      std::string(10000, '{'),
      [] {
        std::string nested;
        for (int i = 0; i < 5000; ++i) nested += "- ";
        return nested + "x\n";
      }(),
      "\xef\xbb\xbf" "attention:\n  backend: vit\n",
      "attention:\r\n  backend: vit\r\n",
  };
  for (const auto& doc : docs) {
    try {
      const AttentionSpec spec = parse_attention_spec(doc, "hostile.yaml");
      try {
        build_layer_patterns(spec, AttentionGeometry{17, 1, 3, 64, 2});
      } catch (const UsageError&) {
      } catch (const RuntimeError&) {
      } catch (const std::exception& e) {
        ADD_FAILURE() << "build threw " << e.what() << " for:\n" << doc.substr(0, 200);
      }
    } catch (const UsageError&) {
    } catch (const std::exception& e) {
      ADD_FAILURE() << "parse threw a non-UsageError " << e.what() << " for:\n" << doc.substr(0, 200);
    }
  }
}

}  // namespace
}  // namespace sparsevit::config

namespace sparsevit::config {
namespace {

TEST(AttentionSpec, DuplicateKeysAreErrorsWithTheirLine) {
  for (const std::string yaml : {"attention:\n  backend: vit\n  backend: dense\n",
                                 "attention:\n  mask: local\n  mask_kwargs:\n    window: 2\n    window: 70\n"}) {
    try {
      parse_attention_spec(yaml, "dup.yaml");
      ADD_FAILURE() << "accepted duplicate keys:\n" << yaml;
    } catch (const UsageError& e) {
      const std::string msg = e.what();
      EXPECT_NE(msg.find("duplicate key"), std::string::npos) << msg;
      EXPECT_NE(msg.find(yaml.find("window: 70") != std::string::npos ? "dup.yaml:5" : "dup.yaml:3"), std::string::npos)
          << msg;
    }
  }
}

TEST(AttentionSpec, YamlWriterRoundTripsEveryShippedConfig) {
  // What a sweep writes for its matched configs must read back to the same spec: the same
  // backend, mask, kernel and kwargs (lists included), and the same patterns.
  int checked = 0;
  for (const auto& entry : fs::recursive_directory_iterator(kConfigDir)) {
    if (entry.path().extension() != ".yaml") continue;
    const AttentionSpec spec = load_attention_spec(entry.path().string());
    const std::string yaml = attention_spec_yaml(spec);
    const AttentionSpec back = parse_attention_spec(yaml, "written.yaml");
    EXPECT_EQ(back.backend, spec.backend) << entry.path();
    EXPECT_EQ(back.mask, spec.mask) << entry.path();
    EXPECT_EQ(back.kernel, spec.kernel) << entry.path();
    for (const auto* pair : {&spec.mask_kwargs, &spec.backend_kwargs}) {
      const auto& mine = pair == &spec.mask_kwargs ? back.mask_kwargs : back.backend_kwargs;
      ASSERT_EQ(mine.names(), pair->names()) << entry.path();
      for (const auto& [name, value] : pair->values()) {
        EXPECT_EQ(mine.values().at(name).items, value.items) << entry.path() << " " << name;
        EXPECT_EQ(mine.values().at(name).is_list, value.is_list) << entry.path() << " " << name;
      }
    }
    EXPECT_EQ(attention_spec_yaml(back), yaml);
    ++checked;
  }
  EXPECT_GT(checked, 20);
  AttentionSpec masked = parse_attention_spec("attention:\n  mask: local\n  kernel: masked\n", "k.yaml");
  EXPECT_EQ(parse_attention_spec(attention_spec_yaml(masked), "w.yaml").kernel, AttentionKernel::kMasked);
}

}  // namespace
}  // namespace sparsevit::config
