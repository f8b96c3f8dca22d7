// The geometry of one model's self-attention: how many tokens, how many of them are prefix
// tokens (class token, registers) before the patch grid, heads, head width and depth. Every
// layer that needs these numbers (mask generators, backend costs, reports, attention modules,
// the operator's shape checks, the ViT) takes this one struct, so the number of prefix tokens
// is a field everywhere, never a literal `1`. Standard library only.
#pragma once

#include <cstdint>

namespace sparsevit {

struct AttentionGeometry {
  int64_t num_tokens = 197;       // N, prefix tokens included
  int64_t num_prefix_tokens = 1;  // tokens before the patches (1: the class token)
  int64_t num_heads = 12;         // H
  int64_t head_dim = 64;          // D
  int64_t num_layers = 12;        // L

  int64_t num_patches() const { return num_tokens - num_prefix_tokens; }
  int64_t embed_dim() const { return num_heads * head_dim; }
  // The same model seen on its patch tokens alone (pruning ratios count patch pairs).
  AttentionGeometry patches_only() const {
    AttentionGeometry g = *this;
    g.num_tokens = num_patches();
    g.num_prefix_tokens = 0;
    return g;
  }
};

}  // namespace sparsevit
