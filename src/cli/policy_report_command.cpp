// `sparsevit policy report`: the policy experiment's table over training seeds
// (experiments/policy_report.h): mean and 95% t interval per group, paired differences to a
// baseline, the floor, the expert.
#include <fmt/format.h>

#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "cli/policy_commands.h"
#include "experiments/policy_report.h"
#include "util/atomic_file.h"
#include "util/errors.h"

namespace sparsevit::cli {

void add_policy_report_command(CLI::App* policy) {
  struct State {
    std::vector<std::string> groups;
    std::string baseline, expert_log, output;
  };
  auto o = std::make_shared<State>();
  CLI::App* cmd = policy->add_subcommand("report", "Table of policy runs over training seeds: score, success, floor, "
                                                   "probe, with Student-t intervals and paired differences");
  cmd->add_option(option_names("group"), o->groups, "NAME=RUN_DIR,RUN_DIR,... (one per row; repeat)")->required();
  add_named_option(cmd, "baseline", o->baseline, "the group the others are paired against");
  add_named_option(cmd, "expert_log", o->expert_log, "`policy collect --all` output on the evaluation seeds");
  add_named_option(cmd, "output", o->output, "write OUTPUT.md and OUTPUT.json");
  cmd->callback([o] {
    experiments::PolicyReportOptions r;
    r.baseline = o->baseline;
    r.expert_log = o->expert_log;
    for (const std::string& g : o->groups) {
      const std::size_t eq = g.find('=');
      if (eq == std::string::npos || eq == 0 || eq + 1 == g.size())
        throw UsageError("--group must be NAME=RUN_DIR[,RUN_DIR...], got '" + g + "'");
      experiments::PolicyReportGroup group{g.substr(0, eq), {}};
      std::string rest = g.substr(eq + 1);
      for (std::size_t start = 0; start <= rest.size();) {
        const std::size_t comma = rest.find(',', start);
        const std::string run = rest.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
        if (!run.empty()) group.runs.push_back(run);
        if (comma == std::string::npos) break;
        start = comma + 1;
      }
      r.groups.push_back(group);
    }
    const nlohmann::json report = experiments::policy_report(r);
    const std::string md = experiments::policy_report_markdown(report);
    std::cout << md;
    if (!o->output.empty()) {
      write_file_atomically(o->output + ".json", report.dump(2) + "\n");
      write_file_atomically(o->output + ".md", "# Policy experiment\n\n" + md);
    }
  });
}

}  // namespace sparsevit::cli
