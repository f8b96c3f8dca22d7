// `sparsevit policy`: the group of robot imitation-learning subcommands (docs/policy.md).
#include "cli/commands.h"
#include "cli/policy_commands.h"

namespace sparsevit::cli {

void register_policy_command(CLI::App& app) {
  CLI::App* policy = app.add_subcommand("policy", "Robot imitation learning on PushT: demonstrations, policies");
  policy->require_subcommand(1);
  add_policy_collect_command(policy);
#ifdef SPARSEVIT_HAVE_POLICY_TRAIN
  // `policy train` and `policy eval` (they need LibTorch and the policy library) go here.
#endif
}

}  // namespace sparsevit::cli
