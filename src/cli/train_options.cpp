// The options generated from train::for_each_field: one per TrainConfig field, both spellings,
// bools as flags, choices checked by CLI11.
#include <type_traits>

#include "cli/commands.h"
#include "train/train_config.h"

namespace sparsevit::cli {

void add_train_config_options(CLI::App* cmd, train::TrainConfig& config, bool recipe_only) {
  train::for_each_field(config, [&](auto& value, const train::FieldInfo& f) {
    if (recipe_only && f.group != train::FieldGroup::recipe) return;
    using T = std::decay_t<decltype(value)>;
    if constexpr (std::is_same_v<T, bool>) {
      cmd->add_flag(option_names(f.name), value, f.help);
    } else {
      CLI::Option* o = cmd->add_option(option_names(f.name), value, f.help)->capture_default_str();
      if (!f.choices.empty()) o->check(CLI::IsMember(f.choices));
    }
  });
}

}  // namespace sparsevit::cli
