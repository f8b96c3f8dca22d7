// `sparsevit policy export`: a training checkpoint's evaluated weights (EMA) alone, a file to
// commit or share that `policy eval --resume` and `policy probe --resume` load
// (pipelines/policy_checkpoint.h).
#include <fmt/format.h>

#include <iostream>
#include <memory>
#include <string>

#include "cli/commands.h"
#include "cli/policy_commands.h"
#include "pipelines/policy_checkpoint.h"

namespace sparsevit::cli {

void add_policy_export_command(CLI::App* policy) {
  struct State {
    std::string resume, output;
  };
  auto o = std::make_shared<State>();
  CLI::App* cmd = policy->add_subcommand("export", "A policy checkpoint's evaluated (EMA) weights alone, loadable by "
                                                   "`policy eval` / `policy probe`");
  cmd->add_option(option_names("resume"), o->resume, "a checkpoint of `sparsevit policy train`")->required();
  add_named_option(cmd, "output", o->output, "the exported checkpoint (.pt)")->required();
  cmd->callback([o] {
    const int64_t bytes = pipelines::export_policy_weights(o->resume, o->output);
    std::cout << fmt::format("{}: the evaluated weights of {} ({:.1f} MB)", o->output, o->resume, bytes / 1e6)
              << std::endl;
  });
}

}  // namespace sparsevit::cli
