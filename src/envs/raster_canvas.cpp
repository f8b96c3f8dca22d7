#include "envs/raster_canvas.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "util/errors.h"

namespace sparsevit::envs {

RasterCanvas::RasterCanvas(int width, int height, Rgb background, int supersample)
    : width_(width), height_(height), ss_(supersample) {
  if (width < 1 || height < 1 || width > 16384 || height > 16384)
    throw UsageError("RasterCanvas: size " + std::to_string(width) + "x" + std::to_string(height) +
                     " must be within 1..16384");
  if (supersample < 1 || supersample > 16)
    throw UsageError("RasterCanvas: supersample " + std::to_string(supersample) + " must be within 1..16");
  samples_.assign(static_cast<std::size_t>(width) * ss_ * height * ss_, background);
}

void RasterCanvas::fill_convex_polygon(const Polygon2& polygon, Rgb color) {
  if (polygon.size() < 3) return;
  const double orientation = signed_area(polygon) >= 0.0 ? 1.0 : -1.0;
  double x0 = polygon[0].x, x1 = x0, y0 = polygon[0].y, y1 = y0;
  for (const Point2& p : polygon) {
    x0 = std::min(x0, p.x), x1 = std::max(x1, p.x);
    y0 = std::min(y0, p.y), y1 = std::max(y1, p.y);
  }
  const int sw = width_ * ss_, sh = height_ * ss_;
  // Samples sit at the centres of the sub-pixel cells.
  const int c0 = std::max(0, static_cast<int>(std::floor(x0 * ss_ - 0.5)));
  const int c1 = std::min(sw - 1, static_cast<int>(std::ceil(x1 * ss_ - 0.5)));
  const int r0 = std::max(0, static_cast<int>(std::floor(y0 * ss_ - 0.5)));
  const int r1 = std::min(sh - 1, static_cast<int>(std::ceil(y1 * ss_ - 0.5)));
  const std::size_t n = polygon.size();
  for (int r = r0; r <= r1; ++r) {
    const double y = (r + 0.5) / ss_;
    for (int c = c0; c <= c1; ++c) {
      const double x = (c + 0.5) / ss_;
      bool inside = true;
      for (std::size_t i = 0; i < n && inside; ++i) {
        const Point2& a = polygon[i];
        const Point2& b = polygon[(i + 1) % n];
        inside = orientation * ((b.x - a.x) * (y - a.y) - (b.y - a.y) * (x - a.x)) >= 0.0;
      }
      if (inside) samples_[static_cast<std::size_t>(r) * sw + c] = color;
    }
  }
}

void RasterCanvas::fill_circle(Point2 center, double radius, Rgb color) {
  if (!(radius > 0.0)) return;
  const int sw = width_ * ss_, sh = height_ * ss_;
  const int c0 = std::max(0, static_cast<int>(std::floor((center.x - radius) * ss_ - 0.5)));
  const int c1 = std::min(sw - 1, static_cast<int>(std::ceil((center.x + radius) * ss_ - 0.5)));
  const int r0 = std::max(0, static_cast<int>(std::floor((center.y - radius) * ss_ - 0.5)));
  const int r1 = std::min(sh - 1, static_cast<int>(std::ceil((center.y + radius) * ss_ - 0.5)));
  const double r2 = radius * radius;
  for (int r = r0; r <= r1; ++r) {
    const double dy = (r + 0.5) / ss_ - center.y;
    for (int c = c0; c <= c1; ++c) {
      const double dx = (c + 0.5) / ss_ - center.x;
      if (dx * dx + dy * dy <= r2) samples_[static_cast<std::size_t>(r) * sw + c] = color;
    }
  }
}

std::vector<std::uint8_t> RasterCanvas::to_rgb() const {
  std::vector<std::uint8_t> rgb(static_cast<std::size_t>(width_) * height_ * 3);
  const int sw = width_ * ss_;
  const int count = ss_ * ss_;
  for (int row = 0; row < height_; ++row) {
    for (int col = 0; col < width_; ++col) {
      int sum_r = 0, sum_g = 0, sum_b = 0;
      for (int i = 0; i < ss_; ++i) {
        const Rgb* line = &samples_[static_cast<std::size_t>(row * ss_ + i) * sw + col * ss_];
        for (int j = 0; j < ss_; ++j) sum_r += line[j].r, sum_g += line[j].g, sum_b += line[j].b;
      }
      std::uint8_t* out = &rgb[(static_cast<std::size_t>(row) * width_ + col) * 3];
      // Rounded mean: a pixel fully inside one colour keeps it exactly.
      out[0] = static_cast<std::uint8_t>((sum_r + count / 2) / count);
      out[1] = static_cast<std::uint8_t>((sum_g + count / 2) / count);
      out[2] = static_cast<std::uint8_t>((sum_b + count / 2) / count);
    }
  }
  return rgb;
}

}  // namespace sparsevit::envs
