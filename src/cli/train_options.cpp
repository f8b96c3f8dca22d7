// The options generated from pipelines::for_each_field: one per TrainConfig field, both spellings,
// bools as flags, choices checked by CLI11.
#include <algorithm>
#include <stdexcept>
#include <type_traits>

#include "cli/commands.h"
#include "pipelines/train_config.h"

namespace sparsevit::cli {

namespace {

// The option of field `f`, bound to `value` (whose value is the default --help shows).
template <class T>
void add_field_option(CLI::App* cmd, const pipelines::FieldInfo& f, T& value) {
  if constexpr (std::is_same_v<T, bool>) {
    cmd->add_flag(option_names(f.name), value, f.help);
  } else {
    CLI::Option* o = show_default(cmd->add_option(option_names(f.name), value, f.help), value);
    if (!f.choices.empty()) o->check(CLI::IsMember(f.choices));
  }
}

template <class Keep>
void add_fields(CLI::App* cmd, pipelines::TrainConfig& config, Keep&& keep) {
  pipelines::for_each_field(config, [&](auto& value, const pipelines::FieldInfo& f) {
    if (keep(f)) add_field_option(cmd, f, value);
  });
}

}  // namespace

void add_train_config_options(CLI::App* cmd, pipelines::TrainConfig& config, bool recipe_only, unsigned command) {
  add_fields(cmd, config, [&](const pipelines::FieldInfo& f) {
    return (!recipe_only || f.group == pipelines::FieldGroup::recipe) && (f.commands & command) != 0;
  });
}

void add_train_config_fields(CLI::App* cmd, pipelines::TrainConfig& config, const std::vector<std::string>& names) {
  add_fields(cmd, config, [&](const pipelines::FieldInfo& f) {
    return std::find(names.begin(), names.end(), f.name) != names.end();
  });
}

void bind_train_config_fields(CLI::App* cmd, const std::vector<TrainConfigFieldTarget>& targets) {
  pipelines::TrainConfig fields;  // only its field list is read
  for (const TrainConfigFieldTarget& target : targets) {
    bool found = false;
    pipelines::for_each_field(fields, [&](auto& value, const pipelines::FieldInfo& f) {
      if (target.name != f.name) return;
      using T = std::decay_t<decltype(value)>;
      T* const* member = std::get_if<T*>(&target.member);
      // Registration runs at every start: a wrong name or type stops the binary, not one command.
      if (!member) throw std::logic_error("--" + target.name + " is bound to a member of another type than its TrainConfig field");
      add_field_option(cmd, f, **member);
      found = true;
    });
    if (!found) throw std::logic_error("--" + target.name + ": no TrainConfig field of that name");
  }
}

}  // namespace sparsevit::cli

namespace sparsevit::cli {

void add_mae_compatibility_flags(CLI::App* cmd) {
  const std::string why = "accepted for MAE's scripts; no effect here";
  static std::string ignored;  // values of the options below are not used
  cmd->add_flag("--pin_mem,--no_pin_mem", why)->group("MAE compatibility");
  cmd->add_flag("--dist_on_itp", why)->group("MAE compatibility");
  // torch.distributed.launch passes --local_rank; rank and world size come from the environment.
  cmd->add_option("--local_rank,--local-rank", ignored, why + " (rank and world size come from the environment)")
      ->group("MAE compatibility");
  cmd->add_option("--world_size", ignored, why)->group("MAE compatibility");
}

}  // namespace sparsevit::cli
