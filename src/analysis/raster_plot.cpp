#include "analysis/raster_plot.h"

#include <unistd.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <csetjmp>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <map>

#include "analysis/png_file.h"
#include "util/errors.h"

namespace sparsevit::analysis {
namespace {

// 5x7 glyphs, one byte per row (bit 4 = leftmost column).
using Glyph = std::array<uint8_t, 7>;
const std::map<char, Glyph>& font() {
  static const std::map<char, Glyph> glyphs = {
      {'0', {0x0E, 0x11, 0x13, 0x15, 0x19, 0x11, 0x0E}}, {'1', {0x04, 0x0C, 0x04, 0x04, 0x04, 0x04, 0x0E}},
      {'2', {0x0E, 0x11, 0x01, 0x02, 0x04, 0x08, 0x1F}}, {'3', {0x1F, 0x02, 0x04, 0x02, 0x01, 0x11, 0x0E}},
      {'4', {0x02, 0x06, 0x0A, 0x12, 0x1F, 0x02, 0x02}}, {'5', {0x1F, 0x10, 0x1E, 0x01, 0x01, 0x11, 0x0E}},
      {'6', {0x06, 0x08, 0x10, 0x1E, 0x11, 0x11, 0x0E}}, {'7', {0x1F, 0x01, 0x02, 0x04, 0x08, 0x08, 0x08}},
      {'8', {0x0E, 0x11, 0x11, 0x0E, 0x11, 0x11, 0x0E}}, {'9', {0x0E, 0x11, 0x11, 0x0F, 0x01, 0x02, 0x0C}},
      {'A', {0x0E, 0x11, 0x11, 0x11, 0x1F, 0x11, 0x11}}, {'B', {0x1E, 0x11, 0x11, 0x1E, 0x11, 0x11, 0x1E}},
      {'C', {0x0E, 0x11, 0x10, 0x10, 0x10, 0x11, 0x0E}}, {'D', {0x1C, 0x12, 0x11, 0x11, 0x11, 0x12, 0x1C}},
      {'E', {0x1F, 0x10, 0x10, 0x1E, 0x10, 0x10, 0x1F}}, {'F', {0x1F, 0x10, 0x10, 0x1E, 0x10, 0x10, 0x10}},
      {'G', {0x0E, 0x11, 0x10, 0x17, 0x11, 0x11, 0x0F}}, {'H', {0x11, 0x11, 0x11, 0x1F, 0x11, 0x11, 0x11}},
      {'I', {0x0E, 0x04, 0x04, 0x04, 0x04, 0x04, 0x0E}}, {'J', {0x07, 0x02, 0x02, 0x02, 0x02, 0x12, 0x0C}},
      {'K', {0x11, 0x12, 0x14, 0x18, 0x14, 0x12, 0x11}}, {'L', {0x10, 0x10, 0x10, 0x10, 0x10, 0x10, 0x1F}},
      {'M', {0x11, 0x1B, 0x15, 0x15, 0x11, 0x11, 0x11}}, {'N', {0x11, 0x11, 0x19, 0x15, 0x13, 0x11, 0x11}},
      {'O', {0x0E, 0x11, 0x11, 0x11, 0x11, 0x11, 0x0E}}, {'P', {0x1E, 0x11, 0x11, 0x1E, 0x10, 0x10, 0x10}},
      {'Q', {0x0E, 0x11, 0x11, 0x11, 0x15, 0x12, 0x0D}}, {'R', {0x1E, 0x11, 0x11, 0x1E, 0x14, 0x12, 0x11}},
      {'S', {0x0F, 0x10, 0x10, 0x0E, 0x01, 0x01, 0x1E}}, {'T', {0x1F, 0x04, 0x04, 0x04, 0x04, 0x04, 0x04}},
      {'U', {0x11, 0x11, 0x11, 0x11, 0x11, 0x11, 0x0E}}, {'V', {0x11, 0x11, 0x11, 0x11, 0x11, 0x0A, 0x04}},
      {'W', {0x11, 0x11, 0x11, 0x15, 0x15, 0x15, 0x0A}}, {'X', {0x11, 0x11, 0x0A, 0x04, 0x0A, 0x11, 0x11}},
      {'Y', {0x11, 0x11, 0x11, 0x0A, 0x04, 0x04, 0x04}}, {'Z', {0x1F, 0x01, 0x02, 0x04, 0x08, 0x10, 0x1F}},
      {' ', {0, 0, 0, 0, 0, 0, 0}},                      {'.', {0, 0, 0, 0, 0, 0x0C, 0x0C}},
      {',', {0, 0, 0, 0, 0x0C, 0x04, 0x08}},             {'-', {0, 0, 0, 0x1F, 0, 0, 0}},
      {'+', {0, 0x04, 0x04, 0x1F, 0x04, 0x04, 0}},       {'_', {0, 0, 0, 0, 0, 0, 0x1F}},
      {'(', {0x02, 0x04, 0x08, 0x08, 0x08, 0x04, 0x02}}, {')', {0x08, 0x04, 0x02, 0x02, 0x02, 0x04, 0x08}},
      {'/', {0, 0x01, 0x02, 0x04, 0x08, 0x10, 0}},       {':', {0, 0x0C, 0x0C, 0, 0x0C, 0x0C, 0}},
      {'%', {0x18, 0x19, 0x02, 0x04, 0x08, 0x13, 0x03}}, {'=', {0, 0, 0x1F, 0, 0x1F, 0, 0}},
      {'#', {0x0A, 0x0A, 0x1F, 0x0A, 0x1F, 0x0A, 0x0A}}, {'?', {0x0E, 0x11, 0x01, 0x02, 0x04, 0, 0x04}},
  };
  return glyphs;
}

constexpr int32_t kGlyphAdvance = 6;  // 5 columns + 1 of spacing

// Tick positions ~`target` per axis at 1, 2, 5 x 10^k steps.
std::vector<double> nice_ticks(double lo, double hi, int target) {
  const double raw = (hi - lo) / std::max(1, target);
  const double mag = std::pow(10.0, std::floor(std::log10(raw)));
  double step = mag;
  for (double m : {1.0, 2.0, 5.0, 10.0})
    if (raw <= m * mag) {
      step = m * mag;
      break;
    }
  std::vector<double> ticks;
  for (double t = std::ceil(lo / step) * step; t <= hi + step * 1e-9; t += step) ticks.push_back(std::abs(t) < step * 1e-9 ? 0 : t);
  return ticks;
}

std::string tick_text(double v) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.3g", v);
  return buf;
}

}  // namespace

Canvas::Canvas(int32_t width, int32_t height, Rgb background) : width_(width), height_(height) {
  if (width < 1 || height < 1 || width > 20000 || height > 20000)
    throw UsageError("plot: canvas size " + std::to_string(width) + "x" + std::to_string(height) + " out of range");
  rgb_.resize(static_cast<std::size_t>(width) * height * 3);
  for (std::size_t i = 0; i < rgb_.size(); i += 3) {
    rgb_[i] = background.r;
    rgb_[i + 1] = background.g;
    rgb_[i + 2] = background.b;
  }
}

Rgb Canvas::pixel(int32_t x, int32_t y) const {
  const std::size_t i = (static_cast<std::size_t>(y) * width_ + x) * 3;
  return {rgb_.at(i), rgb_.at(i + 1), rgb_.at(i + 2)};
}

void Canvas::set(int32_t x, int32_t y, Rgb c) {
  if (x < 0 || y < 0 || x >= width_ || y >= height_) return;
  const std::size_t i = (static_cast<std::size_t>(y) * width_ + x) * 3;
  rgb_[i] = c.r;
  rgb_[i + 1] = c.g;
  rgb_[i + 2] = c.b;
}

void Canvas::fill_rect(int32_t x, int32_t y, int32_t w, int32_t h, Rgb c) {
  for (int32_t j = y; j < y + h; ++j)
    for (int32_t i = x; i < x + w; ++i) set(i, j, c);
}

void Canvas::line(int32_t x0, int32_t y0, int32_t x1, int32_t y1, Rgb c, int32_t thickness) {
  // Bresenham; thickness as a square brush.
  const int32_t dx = std::abs(x1 - x0), dy = -std::abs(y1 - y0);
  const int32_t sx = x0 < x1 ? 1 : -1, sy = y0 < y1 ? 1 : -1;
  int32_t err = dx + dy;
  const int32_t lo = -(thickness - 1) / 2, hi = thickness / 2;
  while (true) {
    for (int32_t a = lo; a <= hi; ++a)
      for (int32_t b = lo; b <= hi; ++b) set(x0 + a, y0 + b, c);
    if (x0 == x1 && y0 == y1) break;
    const int32_t e2 = 2 * err;
    if (e2 >= dy) {
      err += dy;
      x0 += sx;
    }
    if (e2 <= dx) {
      err += dx;
      y0 += sy;
    }
  }
}

void Canvas::marker(int32_t x, int32_t y, int32_t radius, Rgb c) {
  for (int32_t j = -radius; j <= radius; ++j)
    for (int32_t i = -radius; i <= radius; ++i)
      if (i * i + j * j <= radius * radius + radius) set(x + i, y + j, c);
}

void Canvas::text(int32_t x, int32_t y, const std::string& s, Rgb c, int32_t scale) {
  const auto& glyphs = font();
  for (std::size_t n = 0; n < s.size(); ++n) {
    char ch = static_cast<char>(std::toupper(static_cast<unsigned char>(s[n])));
    auto it = glyphs.find(ch);
    if (it == glyphs.end()) it = glyphs.find('?');
    const int32_t gx = x + static_cast<int32_t>(n) * kGlyphAdvance * scale;
    for (int32_t row = 0; row < 7; ++row)
      for (int32_t col = 0; col < 5; ++col)
        if (it->second[row] & (0x10 >> col)) fill_rect(gx + col * scale, y + row * scale, scale, scale, c);
  }
}

int32_t Canvas::text_width(const std::string& s, int32_t scale) {
  return s.empty() ? 0 : (static_cast<int32_t>(s.size()) * kGlyphAdvance - 1) * scale;
}

void Canvas::write_png(const std::string& path) const {
  struct Rows {
    static void row(void* context, uint32_t y, uint8_t* out) {
      const Canvas& c = *static_cast<const Canvas*>(context);
      const std::size_t bytes = static_cast<std::size_t>(c.width_) * 3;
      std::memcpy(out, c.rgb_.data() + static_cast<std::size_t>(y) * bytes, bytes);
    }
  };
  write_rgb_png(path, static_cast<uint32_t>(width_), static_cast<uint32_t>(height_), &Rows::row,
                const_cast<Canvas*>(this));
}

Rgb palette_color(std::size_t index) {
  static const Rgb colors[] = {{0x1F, 0x77, 0xB4}, {0xFF, 0x7F, 0x0E}, {0x2C, 0xA0, 0x2C}, {0xD6, 0x27, 0x28},
                               {0x94, 0x67, 0xBD}, {0x8C, 0x56, 0x4B}, {0xE3, 0x77, 0xC2}, {0x7F, 0x7F, 0x7F},
                               {0xBC, 0xBD, 0x22}, {0x17, 0xBE, 0xCF}, {0x00, 0x00, 0x00}, {0xAE, 0xC7, 0xE8},
                               {0xFF, 0xBB, 0x78}, {0x98, 0xDF, 0x8A}, {0xFF, 0x98, 0x96}, {0xC5, 0xB0, 0xD5}};
  return colors[index % (sizeof(colors) / sizeof(colors[0]))];
}

Canvas render_plot(const std::vector<PlotSeries>& series, const PlotOptions& o) {
  const Rgb black{0, 0, 0}, grid{0xE4, 0xE4, 0xE4}, grey{0x60, 0x60, 0x60};
  int32_t legend_width = 0;
  for (const auto& s : series) legend_width = std::max(legend_width, Canvas::text_width(s.name) + 30);
  const int32_t left = 70, top = 52, bottom = 55, right = legend_width + 30;
  Canvas canvas(o.width, o.height);
  const int32_t pw = o.width - left - right, ph = o.height - top - bottom;
  if (pw < 50 || ph < 50) throw UsageError("plot: too small for its legend");

  auto tx = [&](double x) { return o.log_x ? std::log10(x) : x; };
  double xlo = std::numeric_limits<double>::infinity(), xhi = -xlo, ylo = xlo, yhi = -xlo;
  for (const auto& s : series)
    for (std::size_t i = 0; i < s.x.size() && i < s.y.size(); ++i) {
      if (!std::isfinite(s.x[i]) || !std::isfinite(s.y[i]) || (o.log_x && s.x[i] <= 0)) continue;
      xlo = std::min(xlo, tx(s.x[i]));
      xhi = std::max(xhi, tx(s.x[i]));
      ylo = std::min(ylo, s.y[i]);
      yhi = std::max(yhi, s.y[i]);
      if (i < s.y_low.size() && std::isfinite(s.y_low[i])) ylo = std::min(ylo, s.y_low[i]);
      if (i < s.y_high.size() && std::isfinite(s.y_high[i])) yhi = std::max(yhi, s.y_high[i]);
    }
  if (!std::isfinite(xlo)) xlo = 0, xhi = 1, ylo = 0, yhi = 1;
  auto pad = [](double& lo, double& hi) {
    const double span = hi - lo > 0 ? hi - lo : std::max(std::abs(hi), 1.0) * 0.1;
    lo -= span * 0.08;
    hi += span * 0.08;
  };
  pad(xlo, xhi);
  pad(ylo, yhi);
  auto px = [&](double x) { return left + static_cast<int32_t>(std::lround((tx(x) - xlo) / (xhi - xlo) * pw)); };
  auto py = [&](double y) { return top + ph - static_cast<int32_t>(std::lround((y - ylo) / (yhi - ylo) * ph)); };

  // Grid, ticks and their labels.
  for (double t : nice_ticks(ylo, yhi, 6)) {
    const int32_t y = py(t);
    canvas.line(left, y, left + pw, y, grid);
    const std::string label = tick_text(t);
    canvas.text(left - 6 - Canvas::text_width(label), y - 3, label, grey);
  }
  std::vector<double> xticks;
  if (o.log_x) {
    for (int e = static_cast<int>(std::floor(xlo)); e <= static_cast<int>(std::ceil(xhi)); ++e)
      for (double m : {1.0, 2.0, 5.0}) {
        const double v = m * std::pow(10.0, e);
        if (std::log10(v) >= xlo && std::log10(v) <= xhi) xticks.push_back(v);
      }
  } else {
    xticks = nice_ticks(xlo, xhi, 7);
  }
  for (double t : xticks) {
    const int32_t x = px(t);
    canvas.line(x, top, x, top + ph, grid);
    const std::string label = tick_text(t);
    canvas.text(x - Canvas::text_width(label) / 2, top + ph + 8, label, grey);
  }
  canvas.line(left, top + ph, left + pw, top + ph, black);
  canvas.line(left, top, left, top + ph, black);
  canvas.text(left, 10, o.title, black, 2);
  canvas.text(left + pw / 2 - Canvas::text_width(o.x_label) / 2, o.height - 22, o.x_label, black);
  canvas.text(8, top - 14, o.y_label, black);

  // Intervals first, so every series' line stays visible over the bands.
  for (const auto& s : series) {
    const std::size_t n = std::min({s.x.size(), s.y.size(), s.y_low.size(), s.y_high.size()});
    const Rgb tint{static_cast<uint8_t>((s.color.r + 3 * 0xFF) / 4), static_cast<uint8_t>((s.color.g + 3 * 0xFF) / 4),
                   static_cast<uint8_t>((s.color.b + 3 * 0xFF) / 4)};
    for (std::size_t i = 0; i < n; ++i) {
      if (!std::isfinite(s.y_low[i]) || !std::isfinite(s.y_high[i]) || (o.log_x && s.x[i] <= 0)) continue;
      if (!s.lines) {  // error bar with caps
        const int32_t x = px(s.x[i]), y0 = py(s.y_low[i]), y1 = py(s.y_high[i]);
        canvas.line(x, y0, x, y1, s.color);
        canvas.line(x - 4, y0, x + 4, y0, s.color);
        canvas.line(x - 4, y1, x + 4, y1, s.color);
        continue;
      }
      if (i + 1 >= n || !std::isfinite(s.y_low[i + 1]) || !std::isfinite(s.y_high[i + 1])) continue;
      const int32_t x0 = px(s.x[i]), x1 = px(s.x[i + 1]);
      for (int32_t x = std::min(x0, x1); x <= std::max(x0, x1); ++x) {
        const double f = x1 == x0 ? 0.0 : static_cast<double>(x - x0) / (x1 - x0);
        const int32_t lo = py(s.y_low[i] + f * (s.y_low[i + 1] - s.y_low[i]));
        const int32_t hi = py(s.y_high[i] + f * (s.y_high[i + 1] - s.y_high[i]));
        canvas.line(x, hi, x, lo, tint);
      }
    }
  }
  for (const auto& s : series) {
    const std::size_t n = std::min(s.x.size(), s.y.size());
    for (std::size_t i = 0; i < n; ++i) {
      if (!std::isfinite(s.y[i]) || (o.log_x && s.x[i] <= 0)) continue;
      if (s.lines && i + 1 < n && std::isfinite(s.y[i + 1]))
        canvas.line(px(s.x[i]), py(s.y[i]), px(s.x[i + 1]), py(s.y[i + 1]), s.color, 2);
      if (s.markers) canvas.marker(px(s.x[i]), py(s.y[i]), 4, s.color);
      if (o.point_labels) canvas.text(px(s.x[i]) + 7, py(s.y[i]) - 3, s.name, s.color);
    }
  }
  // Legend: a swatch and the name per series, right of the plot.
  int32_t ly = top;
  for (const auto& s : series) {
    canvas.fill_rect(left + pw + 20, ly, 14, 8, s.color);
    canvas.text(left + pw + 40, ly, s.name, black);
    ly += 16;
  }
  return canvas;
}

}  // namespace sparsevit::analysis
