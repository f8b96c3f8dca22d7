// The attention backends as configs name them: their kwargs (`backend_kwargs:`), the typed,
// range-checked parameters the modules read, and the attention cost of the backends that
// have no pattern to count. Standard library only, so reports need no LibTorch.
//
//   attention:
//     backend: linformer
//     backend_kwargs: {k: 3, share: headwise}
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "patterns/mask_kwargs.h"
#include "patterns/mask_registry.h"
#include "util/attention_geometry.h"

namespace sparsevit::config {

struct AttentionBackend {
  std::string name;
  std::string summary;
  std::vector<patterns::KwargDoc> kwargs;
  bool takes_mask = false;  // vit, topk: the score step is a (static or dynamic) mask
};

// Every backend, in the order the docs list them.
const std::vector<AttentionBackend>& attention_backends();
// Throws UsageError "unknown attention backend 'x' (did you mean 'y'?)".
const AttentionBackend& find_backend(const std::string& name);
// Names, then the ranges that need no sequence shape; throws UsageError naming the kwarg.
void validate_backend_kwargs(const std::string& backend, const patterns::MaskKwargs& kwargs);

// What the modules read. The defaults are the backends' kwarg declarations
// (attention_backends.cpp, listed by attention_backends()); these members are always filled by
// the *_params functions below, so they carry no second copy.
struct LinformerParams {
  int64_t k = 0;      // projected length (default min(64, N))
  std::string share;  // none | headwise | kv | layerwise (one E for every layer)
};
struct EfficientParams {
  int64_t key_dim = 0;  // query/key channels per head (<= head_dim); the values keep head_dim
};
struct PerformerParams {
  int64_t num_features = 0;
  int64_t redraw_interval = 0;  // training steps between feature redraws; 0 = never
  uint64_t seed = 0;
};
struct ImhsaParams {
  int64_t landmarks = 0;  // pooled patch landmarks, a square s x s with s <= the grid side
  int64_t grid = 0;       // side of the patch grid
  int64_t side = 0;       // s
};
struct ReformerParams {
  int64_t buckets = 0;  // even: hash = argmax([xR, -xR]) over buckets/2 rotations
  int64_t hashes = 0;
  int64_t chunk = 0;    // queries per chunk; each chunk attends itself and the previous one
  uint64_t seed = 0;
  bool shared_qk = false;  // keys = the normalised queries (the paper); false: timm's separate K
};

// Typed parameters for a layer of the given geometry; every violation is a one-line UsageError.
LinformerParams linformer_params(const patterns::MaskKwargs& kwargs, const AttentionGeometry& geometry);
EfficientParams efficient_params(const patterns::MaskKwargs& kwargs, const AttentionGeometry& geometry);
PerformerParams performer_params(const patterns::MaskKwargs& kwargs);
ImhsaParams imhsa_params(const patterns::MaskKwargs& kwargs, const AttentionGeometry& geometry);
ReformerParams reformer_params(const patterns::MaskKwargs& kwargs, const AttentionGeometry& geometry);

// One head's attention multiply-adds (everything between the qkv and output projections that
// is a product), expressed as equivalent pairs: MACs / (2 * head_dim), the unit of
// patterns::attention_gflops_for_pairs (Q.K and P.V, head_dim each, per pair).
// nullopt for the pattern backends (vit, dense, topk): reports count their patterns.
std::optional<double> backend_pairs_per_head(const std::string& backend, const patterns::MaskKwargs& kwargs,
                                             const AttentionGeometry& geometry);

}  // namespace sparsevit::config
