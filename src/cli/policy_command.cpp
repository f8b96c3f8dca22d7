// `sparsevit policy`: the group of robot imitation-learning subcommands (docs/policy.md).
#include "cli/commands.h"
#include "cli/policy_commands.h"

namespace sparsevit::cli {

void register_policy_command(CLI::App& app) {
  CLI::App* policy = app.add_subcommand("policy", "Robot imitation learning on PushT: demonstrations, policies");
  policy->require_subcommand(1);
  add_policy_collect_command(policy);
  add_policy_dataset_info_command(policy);
#ifdef SPARSEVIT_HAVE_POLICY_TRAIN
  add_policy_train_command(policy);
  add_policy_eval_command(policy);
  add_policy_probe_command(policy);
  add_policy_pose_fit_command(policy);
  add_policy_export_command(policy);
  add_policy_report_command(policy);
#endif
}

}  // namespace sparsevit::cli
