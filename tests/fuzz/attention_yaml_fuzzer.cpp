// The attention config parser and the mask generators behind it: any bytes either build
// per-layer patterns for a small model or fail with sparsevit::UsageError / RuntimeError.
#include <cstdint>
#include <string>

#include "config/attention_spec.h"
#include "util/attention_geometry.h"
#include "util/errors.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  try {
    sparsevit::config::AttentionSpec spec = sparsevit::config::parse_attention_spec(text, "<fuzz>");
    sparsevit::config::apply_mask_kwarg_overrides(spec, {});
    sparsevit::config::build_layer_patterns(spec, sparsevit::AttentionGeometry{50, 1, 4, 16, 2});
  } catch (const sparsevit::UsageError&) {
  } catch (const sparsevit::RuntimeError&) {
  }
  return 0;
}
