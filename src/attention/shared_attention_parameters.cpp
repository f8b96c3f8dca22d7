#include "attention/shared_attention_parameters.h"

#include "util/errors.h"

namespace sparsevit::attention {

at::Tensor SharedAttentionParameters::get_or_create(const std::string& name, c10::IntArrayRef sizes,
                                                    const std::function<at::Tensor()>& init) {
  if (const at::Tensor* existing = named_parameters(/*recurse=*/false).find(name)) {
    if (existing->sizes() != sizes)
      throw UsageError("shared attention parameter '" + name + "' has shape " + c10::str(existing->sizes()) +
                       ", a layer asked for " + c10::str(sizes));
    return *existing;
  }
  return register_parameter(name, init());
}

}  // namespace sparsevit::attention
