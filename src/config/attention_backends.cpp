#include "config/attention_backends.h"

#include <algorithm>
#include <cmath>

#include "util/did_you_mean.h"
#include "util/errors.h"

namespace sparsevit::config {
namespace {

const std::vector<std::string> kLinformerShareChoices = {"none", "headwise", "kv", "layerwise"};

// The kwargs with a fixed default, declared once for the table and the readers below.
constexpr int64_t kLinformerMaxDefaultK = 64;  // k defaults to min(64, N)
constexpr patterns::ChoiceKwarg kLinformerShare{
    "share", "headwise",
    "`none`: E, F per head; `headwise`: E, F shared by the heads; `kv`: one E for keys and values, all heads; "
    "`layerwise`: one E for keys, values, all heads and all layers (the model's attn_shared.linformer_E)"};
constexpr patterns::IntKwarg kPerformerFeatures{"num_features", 256, "random features m (>= 1)"};
constexpr patterns::IntKwarg kPerformerRedraw{"redraw_interval", 1000,
                                              "training forward passes between feature redraws; 0 = never"};
constexpr patterns::IntKwarg kPerformerSeed{"seed", 0, "features are drawn from (seed, layer, draw)"};
constexpr patterns::IntKwarg kImhsaLandmarks{
    "landmarks", 49, "patch landmarks s*s, s <= the patch grid side (adaptive average pooling)"};
constexpr patterns::IntKwarg kReformerBuckets{"buckets", 8, "hash buckets (even, >= 2)"};
constexpr patterns::IntKwarg kReformerHashes{"hashes", 1, "hash rounds, combined by their log-sum-exp weights"};
constexpr patterns::IntKwarg kReformerSeed{"seed", 0, "rotations are drawn from (seed, layer)"};
constexpr patterns::ChoiceKwarg kReformerQk{"qk", "shared",
                                            "`shared`: keys are the length-normalised queries and a token skips "
                                            "its own key (the paper); `separate`: timm's own K"};

std::vector<std::string> names_of(const std::vector<AttentionBackend>& backends) {
  std::vector<std::string> names;
  for (const auto& b : backends) names.push_back(b.name);
  return names;
}

int64_t isqrt_exact(int64_t n) {
  if (n < 0) return -1;
  auto r = static_cast<int64_t>(std::llround(std::sqrt(static_cast<double>(n))));
  return r * r == n ? r : -1;
}

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

}  // namespace

const std::vector<AttentionBackend>& attention_backends() {
  static const std::vector<AttentionBackend> table = {
      {"vit", "softmax attention, optionally restricted to a static or dynamic mask", {}, true},
      {"dense", "plain softmax attention over every pair (no mask)", {}, false},
      {"topk", "per query the k largest scaled scores (mask: topk kwargs)", {}, true},
      {"linformer",
       "keys and values projected along the sequence N -> k by learned E, F (Wang et al. 2020)",
       {{"k", "min(" + std::to_string(kLinformerMaxDefaultK) + ", N)", "projected length (1..N)"}, kLinformerShare.doc_entry()},
       false},
      {"efficient",
       "Efficient Attention (Shen et al. 2021): softmax of Q over features, of K over tokens, rho_q(Q) (rho_k(K)^T V)",
       {{"key_dim", "", "query/key channels per head (default head_dim; the first key_dim channels of each head)"}},
       false},
      {"performer",
       "FAVOR+ positive orthogonal random features (Choromanski et al. 2021)",
       {kPerformerFeatures.doc_entry(), kPerformerRedraw.doc_entry(), kPerformerSeed.doc_entry()},
       false},
      {"imhsa",
       "interactive MHSA (Kang et al. 2024): pooled landmarks, cross-head mixing before/after each softmax",
       {kImhsaLandmarks.doc_entry()},
       false},
      {"reformer",
       "LSH attention (Kitaev et al. 2020): angular random-rotation hashes, sorted chunks + previous chunk",
       {kReformerBuckets.doc_entry(), kReformerHashes.doc_entry(),
        {"chunk", "", "queries per chunk (default ceil(N / buckets))"}, kReformerSeed.doc_entry(),
        kReformerQk.doc_entry()},
       false},
  };
  return table;
}

const AttentionBackend& find_backend(const std::string& name) {
  const auto& table = attention_backends();
  for (const auto& b : table)
    if (b.name == name) return b;
  throw UsageError(unknown_name_message("attention backend", name, names_of(table)));
}

namespace {

// The shape-free part of each backend's parameters.
// k defaults to min(64, N) (0 here until the shape is known).
LinformerParams read_linformer(const patterns::MaskKwargs& kw) {
  return {kw.get_int("k", 0, 1), kLinformerShare.read(kw, kLinformerShareChoices)};
}
int64_t linformer_k(const patterns::MaskKwargs& kw, int64_t num_tokens) {
  const int64_t k = read_linformer(kw).k;
  return k > 0 ? k : std::min<int64_t>(kLinformerMaxDefaultK, num_tokens);
}
std::optional<int64_t> read_key_dim(const patterns::MaskKwargs& kw) { return kw.get_optional_int("key_dim", 1); }
ImhsaParams read_imhsa(const patterns::MaskKwargs& kw) {
  ImhsaParams p;
  p.landmarks = kImhsaLandmarks.read(kw, 1);
  p.side = isqrt_exact(p.landmarks);
  if (p.side < 1) throw UsageError(kw.describe("landmarks") + ": must be a square s*s (1, 4, 9, ...), got " +
                                   std::to_string(p.landmarks));
  return p;
}
ReformerParams read_reformer(const patterns::MaskKwargs& kw) {
  ReformerParams p;
  p.buckets = kReformerBuckets.read(kw, 2);
  if (p.buckets % 2 != 0)
    throw UsageError(kw.describe("buckets") + ": must be even (angular LSH: buckets/2 rotations), got " +
                     std::to_string(p.buckets));
  p.hashes = kReformerHashes.read(kw, 1, 64);
  p.chunk = kw.get_int("chunk", 0, 1);  // 0: ceil(N / buckets), known with the shape
  p.seed = static_cast<uint64_t>(kReformerSeed.read(kw, 0));
  p.shared_qk = kReformerQk.read(kw, {"shared", "separate"}) == "shared";
  return p;
}

}  // namespace

void validate_backend_kwargs(const std::string& backend, const patterns::MaskKwargs& kwargs) {
  const AttentionBackend& b = find_backend(backend);
  std::vector<std::string> accepted;
  for (const auto& k : b.kwargs) accepted.push_back(k.name);
  for (const auto& name : kwargs.names()) {
    if (std::find(accepted.begin(), accepted.end(), name) == accepted.end()) {
      if (accepted.empty())
        throw UsageError(kwargs.describe(name) + ": backend '" + backend + "' takes no backend_kwargs");
      throw UsageError(kwargs.describe(name) + ": " +
                       unknown_name_message("kwarg for backend '" + backend + "'", name, accepted));
    }
  }
  if (backend == "linformer") read_linformer(kwargs);
  if (backend == "efficient") read_key_dim(kwargs);
  if (backend == "performer") performer_params(kwargs);
  if (backend == "imhsa") read_imhsa(kwargs);
  if (backend == "reformer") read_reformer(kwargs);
}

LinformerParams linformer_params(const patterns::MaskKwargs& kwargs, const AttentionGeometry& shape) {
  LinformerParams p = read_linformer(kwargs);
  if (shape.num_tokens < 1) throw UsageError("linformer needs the sequence length N at construction");
  p.k = linformer_k(kwargs, shape.num_tokens);
  if (p.k > shape.num_tokens)
    throw UsageError(kwargs.describe("k") + ": the projected length " + std::to_string(p.k) +
                     " exceeds the sequence length " + std::to_string(shape.num_tokens));
  return p;
}

EfficientParams efficient_params(const patterns::MaskKwargs& kwargs, const AttentionGeometry& shape) {
  const auto key_dim = read_key_dim(kwargs);
  if (key_dim && *key_dim > shape.head_dim)
    throw UsageError(kwargs.describe("key_dim") + ": must be <= the head dim " + std::to_string(shape.head_dim) +
                     ", got " + std::to_string(*key_dim));
  return {key_dim.value_or(shape.head_dim)};
}

PerformerParams performer_params(const patterns::MaskKwargs& kwargs) {
  PerformerParams p;
  p.num_features = kPerformerFeatures.read(kwargs, 1);
  p.redraw_interval = kPerformerRedraw.read(kwargs, 0);
  p.seed = static_cast<uint64_t>(kPerformerSeed.read(kwargs, 0));
  return p;
}

ImhsaParams imhsa_params(const patterns::MaskKwargs& kwargs, const AttentionGeometry& shape) {
  ImhsaParams p = read_imhsa(kwargs);
  const int64_t patches = shape.num_tokens - shape.num_prefix_tokens;
  p.grid = isqrt_exact(patches);
  if (p.grid < 1)
    throw UsageError("imhsa pools a square patch grid, but the layer has " + std::to_string(patches) +
                     " patch tokens (N " + std::to_string(shape.num_tokens) + ")");
  if (p.side > p.grid)
    throw UsageError(kwargs.describe("landmarks") + ": " + std::to_string(p.landmarks) + " landmarks (" +
                     std::to_string(p.side) + "x" + std::to_string(p.side) + ") do not fit the " +
                     std::to_string(p.grid) + "x" + std::to_string(p.grid) + " patch grid");
  return p;
}

ReformerParams reformer_params(const patterns::MaskKwargs& kwargs, const AttentionGeometry& shape) {
  ReformerParams p = read_reformer(kwargs);
  if (p.chunk == 0) p.chunk = std::max<int64_t>(1, ceil_div(shape.num_tokens, p.buckets));
  return p;
}

std::optional<double> backend_pairs_per_head(const std::string& backend, const patterns::MaskKwargs& kwargs,
                                             const AttentionGeometry& s) {
  const double n = static_cast<double>(s.num_tokens), d = static_cast<double>(s.head_dim);
  if (backend == "linformer") {
    // E.K and F.V (k x N x d each), Q.(EK)^T and P.(FV) (N x k x d each): 4 N k d. (k > N is
    // refused when the module is built; here it is clamped, so the patch-only count exists.)
    return 2.0 * n * static_cast<double>(std::min(linformer_k(kwargs, s.num_tokens), s.num_tokens));
  }
  if (backend == "efficient") {
    // rho_k(K)^T V (d_k x N x d) and rho_q(Q) times that (N x d_k x d): 2 N d_k d.
    return n * static_cast<double>(efficient_params(kwargs, s).key_dim);
  }
  if (backend == "performer") {
    // Features of Q and K (N x m x d each), phi(K)^T V and phi(Q) times that (N x m x d each),
    // and the normaliser phi(Q) (phi(K)^T 1) (2 N m): 4 N m d + 2 N m.
    const double m = static_cast<double>(performer_params(kwargs).num_features);
    return (4.0 * n * m * d + 2.0 * n * m) / (2.0 * d);
  }
  if (backend == "imhsa") {
    // Landmarks L' = L (+ the class token); queries Q_rows = patch tokens; keys all N tokens.
    // Q.K~^T and A_Q.(A_K V) (Q_rows x L' x d each), Q~.K^T and A_K.V (L' x N x d each),
    // cross-head mixing before and after both softmaxes (h per entry and head);
    // the class token's dense row: 2 N d.
    const ImhsaParams p = imhsa_params(kwargs, s);
    const double landmarks = static_cast<double>(p.landmarks + s.num_prefix_tokens);
    const double queries = static_cast<double>(s.num_tokens - s.num_prefix_tokens);
    const double h = static_cast<double>(s.num_heads);
    const double macs = (queries + n) * landmarks * (2.0 * d + 2.0 * h) + s.num_prefix_tokens * 2.0 * n * d;
    return macs / (2.0 * d);
  }
  if (backend == "reformer") {
    // Per hash round: the rotations (N x d x buckets/2), then per chunk of c sorted queries
    // Q.K^T and P.V against 2c keys (c when there is one chunk), padding included.
    const ReformerParams p = reformer_params(kwargs, s);
    const int64_t chunks = ceil_div(s.num_tokens, p.chunk);
    const double keys = static_cast<double>(chunks > 1 ? 2 * p.chunk : p.chunk);
    const double padded = static_cast<double>(chunks * p.chunk);
    const double macs = n * d * (p.buckets / 2.0) + 2.0 * padded * keys * d;
    return p.hashes * macs / (2.0 * d);
  }
  return std::nullopt;
}

}  // namespace sparsevit::config
