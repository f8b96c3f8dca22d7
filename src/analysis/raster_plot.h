// A small raster plotting helper for reports: an RGB canvas (lines, markers, rectangles, text
// in a built-in 5x7 bitmap font) written as an 8-bit PNG, and two chart kinds on top of it
// (scatter with labels, line charts with a legend). Standard library + libpng; no LibTorch.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "analysis/mask_png.h"  // Rgb

namespace sparsevit::analysis {

class Canvas {
 public:
  Canvas(int32_t width, int32_t height, Rgb background = {0xFF, 0xFF, 0xFF});
  int32_t width() const { return width_; }
  int32_t height() const { return height_; }
  Rgb pixel(int32_t x, int32_t y) const;
  void set(int32_t x, int32_t y, Rgb c);  // ignores pixels outside the canvas
  void fill_rect(int32_t x, int32_t y, int32_t w, int32_t h, Rgb c);
  void line(int32_t x0, int32_t y0, int32_t x1, int32_t y1, Rgb c, int32_t thickness = 1);
  void marker(int32_t x, int32_t y, int32_t radius, Rgb c);  // filled disc
  // Text in the 5x7 font (letters are drawn upper-case), `scale` pixels per font pixel.
  void text(int32_t x, int32_t y, const std::string& s, Rgb c, int32_t scale = 1);
  static int32_t text_width(const std::string& s, int32_t scale = 1);
  // Atomic (temporary file + rename); RuntimeError naming the path on failure.
  void write_png(const std::string& path) const;

 private:
  int32_t width_, height_;
  std::vector<uint8_t> rgb_;
};

// A fixed palette of distinguishable colours (cycled).
Rgb palette_color(std::size_t index);

struct PlotSeries {
  std::string name;
  Rgb color;
  std::vector<double> x, y;
  bool lines = true;    // join the points
  bool markers = true;  // draw a disc per point
  // Optional interval per point (e.g. a 95% confidence interval over seeds): a tinted band
  // between the points when `lines`, otherwise an error bar. Empty: none.
  std::vector<double> y_low, y_high;
};

struct PlotOptions {
  std::string title, x_label, y_label;
  int32_t width = 900, height = 600;
  bool log_x = false;      // logarithmic x axis (positive x only)
  bool point_labels = false;  // write each series' name beside its (single) point
};

// Axes with ticks and numeric labels, the series, and a legend (colour swatch + name).
Canvas render_plot(const std::vector<PlotSeries>& series, const PlotOptions& options);

}  // namespace sparsevit::analysis
