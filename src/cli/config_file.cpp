// `--config FILE` for any subcommand that has it (finetune, eval, sweep): the YAML's keys are the
// subcommand's option names; the values go through the options themselves, so the file gets the
// same conversions and checks as the flags, and flags on the command line win.
#include <yaml-cpp/yaml.h>

#include "cli/commands.h"
#include "util/did_you_mean.h"
#include "util/errors.h"

namespace sparsevit::cli {
namespace {

void apply_config_file(CLI::App* cmd, const std::string& path) {
  YAML::Node root;
  try {
    root = YAML::LoadFile(path);
  } catch (const YAML::BadFile&) {
    throw UsageError("cannot read --config file '" + path + "'");
  } catch (const YAML::Exception& e) {
    throw UsageError(path + ":" + std::to_string(e.mark.line + 1) + ": invalid YAML: " + e.msg);
  }
  if (root.IsNull()) return;
  if (!root.IsMap()) throw UsageError(path + ": expected a mapping of flag names to values");
  std::vector<std::string> known;
  for (const CLI::Option* o : cmd->get_options())
    for (const auto& n : o->get_lnames()) known.push_back(n);
  for (const auto& item : root) {
    if (!item.first.IsScalar()) throw UsageError(path + ":" + std::to_string(item.first.Mark().line + 1) + ": keys must be flag names");
    const std::string key = item.first.as<std::string>();
    const std::string where = path + ":" + std::to_string(item.first.Mark().line + 1);
    CLI::Option* o = cmd->get_option_no_throw("--" + key);
    if (o == nullptr || key == "config" || key == "help")
      throw UsageError(where + ": " + unknown_name_message("key", key, known));
    std::vector<std::string> values;
    if (item.second.IsSequence()) {
      for (const auto& v : item.second) {
        if (!v.IsScalar()) throw UsageError(where + ": '" + key + "' must be a value or a list of values");
        values.push_back(v.Scalar());
      }
    } else if (item.second.IsScalar()) {
      values.push_back(item.second.Scalar());
    } else {
      throw UsageError(where + ": '" + key + "' must be a value or a list");
    }
    try {
      for (const auto& v : values) o->add_result(v);
      o->run_callback();
    } catch (const CLI::ParseError& e) {
      throw UsageError(where + ": " + key + ": " + e.what());
    }
    o->clear();  // a flag given on the command line still overrides the file
  }
}

}  // namespace

void apply_config_file_option(CLI::App& app, int argc, char** argv) {
  if (argc < 2) return;
  CLI::App* cmd = nullptr;
  try {
    cmd = app.get_subcommand(argv[1]);
  } catch (const CLI::OptionNotFound&) {
    return;  // not a subcommand: the parser reports it
  }
  if (cmd->get_option_no_throw("--config") == nullptr) return;
  for (int i = 2; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--config" && i + 1 < argc) return apply_config_file(cmd, argv[i + 1]);
    if (a.rfind("--config=", 0) == 0) return apply_config_file(cmd, a.substr(9));
  }
}

}  // namespace sparsevit::cli
