// Every option in both spellings, as MAE's scripts accept them.
#include <string>

#include "cli/commands.h"

namespace sparsevit::cli {

std::string option_names(const std::string& name) {
  std::string dashed = name, underscored = name;
  for (char& c : dashed) c = c == '_' ? '-' : c;
  for (char& c : underscored) c = c == '-' ? '_' : c;
  return dashed == underscored ? "--" + dashed : "--" + dashed + ",--" + underscored;
}

}  // namespace sparsevit::cli
