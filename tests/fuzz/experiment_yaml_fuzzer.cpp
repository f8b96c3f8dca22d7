// `sparsevit finetune --config FILE`: the experiment YAML applied to the generated training
// options, then the range checks. Any bytes either give a checked TrainConfig or a UsageError.
#include <CLI/CLI.hpp>

#include <cstdint>
#include <string>

#include "cli/commands.h"
#include "fuzz_support.h"
#include "pipelines/train_config.h"
#include "util/errors.h"

// train_config.cpp asks the distributed layer which backends exist; the harness needs no c10d.
namespace sparsevit::dist {
bool backend_available(const std::string& backend) { return backend == "gloo"; }
}  // namespace sparsevit::dist

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  sparsevit::fuzz::TempFile file(data, size, ".yaml");
  CLI::App app{"fuzz"};
  CLI::App* cmd = app.add_subcommand("finetune");
  sparsevit::pipelines::TrainConfig config;
  std::string config_file;
  sparsevit::cli::add_train_config_options(cmd, config, /*recipe_only=*/false);
  cmd->add_option("--config", config_file);
  std::string a0 = "sparsevit", a1 = "finetune", a2 = "--config", a3 = file.path();
  char* argv[] = {a0.data(), a1.data(), a2.data(), a3.data()};
  try {
    sparsevit::cli::apply_config_file_option(app, 4, argv);
    sparsevit::pipelines::resolve(config);
  } catch (const sparsevit::UsageError&) {
  }
  return 0;
}
