// sparsevit: command-line entry point. Exit codes: 0 ok, 2 usage/config error, 1 runtime error.
#include <spdlog/sinks/stdout_sinks.h>
#include <spdlog/spdlog.h>

#include <cstdio>
#include <exception>

#include "cli/commands.h"
#include "util/errors.h"

int main(int argc, char** argv) {
  // Logs go to stderr so that stdout carries only results (tables, JSON).
  spdlog::set_default_logger(spdlog::stderr_logger_st("sparsevit"));
  spdlog::set_pattern("%^%l%$: %v");

  CLI::App app{"sparsevit: sparse multi-head self-attention for vision transformers"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "sparsevit 0.1.0");
  // A repeated option keeps its last value, as argparse does: a wrapper script's defaults can be
  // overridden by appending (scripts/reproduce ... --seeds 0). Multi-value options keep them all.
  app.option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  sparsevit::cli::register_masks_command(app);
  sparsevit::cli::register_flops_command(app);
#ifdef SPARSEVIT_HAVE_BENCH
  sparsevit::cli::register_bench_command(app);
#endif
#ifdef SPARSEVIT_HAVE_TRAIN
  sparsevit::cli::register_finetune_command(app);
  sparsevit::cli::register_pretrain_command(app);
#endif
#ifdef SPARSEVIT_HAVE_INFERENCE
  sparsevit::cli::register_predict_command(app);
  sparsevit::cli::register_export_command(app);
#endif
#ifdef SPARSEVIT_HAVE_EXPERIMENTS
  sparsevit::cli::register_sweep_command(app);
  sparsevit::cli::register_calibrate_command(app);
  sparsevit::cli::register_diversity_command(app);
  sparsevit::cli::register_attention_map_command(app);
#endif
#ifdef SPARSEVIT_HAVE_POLICY
  sparsevit::cli::register_policy_command(app);
#endif
  sparsevit::cli::register_cli_reference_command(app);
  try {
    sparsevit::cli::apply_config_file_option(app, argc, argv);
    app.parse(argc, argv);
  } catch (const CLI::Success& e) {  // --help, --version
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    std::fprintf(stderr, "sparsevit: error: %s (run with --help for usage)\n", e.what());
    return 2;
  } catch (const sparsevit::UsageError& e) {
    std::fprintf(stderr, "sparsevit: error: %s\n", e.what());
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "sparsevit: error: %s\n", e.what());
    return 1;
  }
  return 0;
}
