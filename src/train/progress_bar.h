// Per-epoch progress: rate (it/s, img/s), ETA, loss and lr. On a terminal one line is redrawn
// with '\r'; otherwise (logs, pipes) a plain line is printed every `percent_step` % and at the end.
// The formatting is pure functions so tests need no clock.
#pragma once

#include <cstdint>
#include <functional>
#include <limits>
#include <ostream>
#include <string>

namespace sparsevit::train {

struct ProgressSnapshot {
  std::string label;              // e.g. "Epoch 3/50" or "Test"
  int64_t done = 0;               // iterations finished
  int64_t total = 0;              // iterations in the epoch
  double elapsed_seconds = 0;     // since the epoch started
  int64_t batch_size = 0;         // images per iteration; 0 leaves out img/s
  double loss = std::numeric_limits<double>::quiet_NaN();      // NaN: left out
  double avg_loss = std::numeric_limits<double>::quiet_NaN();  // NaN: left out
  double lr = std::numeric_limits<double>::quiet_NaN();        // NaN: left out
};

// "0:07", "12:34", "1:02:03"; "--:--" when unknown (negative or not finite).
std::string format_duration(double seconds);

// One progress line, e.g.
// "Epoch 3/50 [120/469]  25% |#####               | 12.3 it/s 788 img/s ETA 0:28 loss 1.2345 (1.3000) lr 1.000e-03"
// bar_width 0 leaves out the bar. Rates and ETA show "-" until some time has passed.
std::string format_progress_line(const ProgressSnapshot& snapshot, int bar_width = 20);

// In plain-line mode: whether the line for `done` (1-based iterations finished) is printed —
// when it enters a new multiple of `percent_step` percent, and always at the end.
bool plain_line_due(int64_t done, int64_t total, int percent_step);

// Whether standard output is a terminal (isatty).
bool stdout_is_tty();

class ProgressBar {
 public:
  using Clock = std::function<double()>;  // seconds, monotonic

  // `redraw`: true on a terminal (see stdout_is_tty()). `clock` defaults to steady_clock.
  ProgressBar(std::string label, int64_t total, int64_t batch_size, std::ostream& out, bool redraw,
              int percent_step = 10, Clock clock = {});

  // Reports that `done` iterations are finished, the last one with `loss` at learning rate `lr`
  // (NaN leaves either out). The running mean of the reported losses is shown beside it.
  void update(int64_t done, double loss, double lr = std::numeric_limits<double>::quiet_NaN());

  // Ends the epoch: terminates the redrawn line, or prints the final plain line if update()
  // did not already. Called by the destructor if needed.
  void finish();
  ~ProgressBar();

  ProgressBar(const ProgressBar&) = delete;
  ProgressBar& operator=(const ProgressBar&) = delete;

  double elapsed_seconds() const;
  ProgressSnapshot snapshot() const { return snap_; }

 private:
  void print(bool final_line);

  std::ostream& out_;
  bool redraw_;
  int percent_step_;
  Clock clock_;
  double start_;
  double last_draw_ = -1;
  double loss_sum_ = 0;
  int64_t loss_count_ = 0;
  int64_t last_printed_ = -1;
  size_t last_width_ = 0;
  bool finished_ = false;
  ProgressSnapshot snap_;
};

}  // namespace sparsevit::train
