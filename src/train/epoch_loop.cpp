#include "train/epoch_loop.h"

#include <chrono>

#include <fmt/format.h>

namespace sparsevit::train {

std::string save_epoch_checkpoints(const TrainState& state, const EpochCheckpoints& checkpoints, int64_t epoch,
                                   const ProcessContext& process, bool best) {
  if (checkpoints.output_dir.empty() || !process.main_rank()) return "";
  const std::string path = checkpoints.output_dir + "/checkpoint.pt";
  state.save_checkpoint(path, epoch, checkpoints.metadata);
  if (checkpoints.save_ckpt_freq > 0 && (epoch + 1) % checkpoints.save_ckpt_freq == 0)
    state.save_checkpoint(checkpoints.output_dir + "/checkpoint-" + std::to_string(epoch) + ".pt", epoch,
                          checkpoints.metadata);
  if (best) state.save_checkpoint(checkpoints.output_dir + "/checkpoint-best.pt", epoch, checkpoints.metadata);
  return path;
}

EpochsRun run_epochs(TrainTask& task, TrainState& state, data::BatchSource& loader, ProcessContext& process,
                   int64_t first_epoch, const EpochCheckpoints& checkpoints, MetricsLog* metrics,
                   const EpochHooks& hooks) {
  const int64_t epochs = state.options().epochs;
  EpochsRun run;
  for (int64_t epoch = first_epoch; epoch < epochs; ++epoch) {
    const auto t0 = std::chrono::steady_clock::now();
    const EpochStats train = train_one_epoch(task, state, loader, epoch, process);
    EpochReport report = hooks.report ? hooks.report(epoch, train) : EpochReport{};
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    nlohmann::json record = {{"epoch", epoch},
                             {"train_loss", train.loss},
                             {"lr", train.lr},
                             {"epoch_seconds", seconds},
                             {"attention_gflops", train.attention_gflops}};
    record[hooks.throughput_key] = train.train_seconds > 0 ? train.images / train.train_seconds : 0.0;  // all ranks
    if (!report.fields.is_null()) record.update(report.fields);  // EpochReport{{}, text}: no fields
    process.out() << fmt::format("Epoch {}/{}: {}  ({:.1f} s)", epoch + 1, epochs, report.text, seconds) << std::endl;
    if (metrics) metrics->append(record);
    const std::string written = save_epoch_checkpoints(state, checkpoints, epoch, process, report.best);
    if (!written.empty()) run.checkpoint = written;
    if (run.epochs == 0) run.first_loss = train.loss;
    run.last_loss = train.loss;
    ++run.epochs;
  }
  return run;
}

}  // namespace sparsevit::train
