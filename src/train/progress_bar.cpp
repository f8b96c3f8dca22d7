#include "train/progress_bar.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>

#include <fmt/format.h>

#include "util/errors.h"

namespace sparsevit::train {

std::string format_duration(double seconds) {
  if (!std::isfinite(seconds) || seconds < 0) return "--:--";
  const auto total = static_cast<int64_t>(std::llround(seconds));
  const int64_t h = total / 3600, m = (total / 60) % 60, s = total % 60;
  if (h > 0) return fmt::format("{}:{:02d}:{:02d}", h, m, s);
  return fmt::format("{}:{:02d}", m, s);
}

std::string format_progress_line(const ProgressSnapshot& p, int bar_width) {
  std::string line = p.label;
  const int64_t total = std::max<int64_t>(p.total, 0);
  const int64_t done = std::clamp<int64_t>(p.done, 0, total);
  const int digits = static_cast<int>(std::to_string(total).size());
  line += fmt::format(" [{:>{}}/{}]", done, digits, total);
  const double fraction = total > 0 ? static_cast<double>(done) / static_cast<double>(total) : 1.0;
  line += fmt::format(" {:>3d}%", static_cast<int>(std::floor(fraction * 100.0)));
  if (bar_width > 0) {
    const int filled = static_cast<int>(std::floor(fraction * bar_width));
    line += " |" + std::string(filled, '#') + std::string(bar_width - filled, ' ') + "|";
  }
  const bool timed = p.elapsed_seconds > 0 && done > 0;
  const double rate = timed ? static_cast<double>(done) / p.elapsed_seconds : 0.0;
  line += timed ? fmt::format(" {:.2f} it/s", rate) : std::string(" - it/s");
  if (p.batch_size > 0) {
    line += timed ? fmt::format(" {:.0f} img/s", rate * static_cast<double>(p.batch_size)) : std::string(" - img/s");
  }
  if (done >= total && total > 0) {
    line += " in " + format_duration(p.elapsed_seconds);
  } else {
    line += " ETA " + (timed ? format_duration(static_cast<double>(total - done) / rate) : format_duration(-1));
  }
  if (!std::isnan(p.loss)) {
    line += fmt::format(" loss {:.4f}", p.loss);
    if (!std::isnan(p.avg_loss)) line += fmt::format(" ({:.4f})", p.avg_loss);
  }
  if (!std::isnan(p.lr)) line += fmt::format(" lr {:.3e}", p.lr);
  return line;
}

bool plain_line_due(int64_t done, int64_t total, int percent_step) {
  if (total <= 0 || done <= 0) return false;
  if (done >= total) return true;
  const int64_t step = std::max(percent_step, 1);
  const int64_t now = done * 100 / total / step;
  const int64_t before = (done - 1) * 100 / total / step;
  return now != before;
}

bool stdout_is_tty() { return ::isatty(STDOUT_FILENO) == 1; }

namespace {
double steady_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}
}  // namespace

ProgressBar::ProgressBar(std::string label, int64_t total, int64_t batch_size, std::ostream& out, bool redraw,
                         int percent_step, Clock clock)
    : out_(out), redraw_(redraw), percent_step_(percent_step), clock_(clock ? std::move(clock) : Clock(steady_seconds)) {
  if (total < 0) throw UsageError("progress bar total must be >= 0");
  start_ = clock_();
  snap_.label = std::move(label);
  snap_.total = total;
  snap_.batch_size = batch_size;
}

ProgressBar::~ProgressBar() {
  try {
    finish();
  } catch (...) {
  }
}

double ProgressBar::elapsed_seconds() const { return clock_() - start_; }

void ProgressBar::update(int64_t done, double loss, double lr) {
  if (finished_) return;
  snap_.done = std::min(done, snap_.total);
  snap_.elapsed_seconds = elapsed_seconds();
  snap_.loss = loss;
  snap_.lr = lr;
  if (std::isfinite(loss)) {
    loss_sum_ += loss;
    ++loss_count_;
  }
  snap_.avg_loss = loss_count_ > 0 ? loss_sum_ / static_cast<double>(loss_count_)
                                   : std::numeric_limits<double>::quiet_NaN();
  if (redraw_) {
    // At most ~10 redraws a second, plus the last one.
    if (snap_.done >= snap_.total || last_draw_ < 0 || snap_.elapsed_seconds - last_draw_ >= 0.1) {
      print(false);
      last_draw_ = snap_.elapsed_seconds;
    }
  } else if (plain_line_due(snap_.done, snap_.total, percent_step_) && snap_.done != last_printed_) {
    print(false);
  }
}

void ProgressBar::print(bool final_line) {
  if (redraw_) {
    std::string line = format_progress_line(snap_, 20);
    const size_t width = line.size();
    if (width < last_width_) line += std::string(last_width_ - width, ' ');  // erase the previous tail
    last_width_ = width;
    out_ << '\r' << line;
    if (final_line) out_ << '\n';
  } else {
    out_ << format_progress_line(snap_, 0) << '\n';
  }
  last_printed_ = snap_.done;
  out_.flush();
}

void ProgressBar::finish() {
  if (finished_) return;
  finished_ = true;
  snap_.elapsed_seconds = elapsed_seconds();
  if (redraw_) {
    print(true);
  } else if (last_printed_ != snap_.done) {
    print(true);
  }
}

}  // namespace sparsevit::train
