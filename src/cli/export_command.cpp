// `sparsevit export --resume CKPT --format safetensors|pth --output FILE`: a checkpoint's weights
// under timm's / MAE's names, for timm (pretrained_file=...) and torch.load.
#include <iostream>
#include <memory>

#include "cli/commands.h"
#include "inference/export_weights.h"

namespace sparsevit::cli {

void register_export_command(CLI::App& app) {
  struct State {
    std::string resume, format = "safetensors", output;
  };
  auto s = std::make_shared<State>();
  CLI::App* cmd = app.add_subcommand("export", "Write a checkpoint's weights with timm names (safetensors or .pth)");
  add_named_option(cmd, "resume", s->resume, "a sparsevit checkpoint (finetune or pretrain)")->required();
  add_named_option(cmd, "format", s->format, "safetensors | pth")->check(CLI::IsMember({"safetensors", "pth"}));
  add_named_option(cmd, "output", s->output, "the file to write (atomically)")->required();
  cmd->callback([s] {
    const inference::ExportSummary summary = inference::export_checkpoint(s->resume, s->format, s->output);
    std::cout << "wrote " << s->output << ": " << summary.tensors << " tensors, " << summary.parameters
              << " parameters (" << summary.model << ")" << std::endl;
  });
}

}  // namespace sparsevit::cli
