// A small RGB rasteriser for environment observations: filled convex polygons and circles,
// anti-aliased by supersampling (each output pixel averages ss×ss point samples; shapes are
// painted in order, so later shapes cover earlier ones sample by sample).
// Coordinates are in output pixels: pixel (row r, column c) covers [c, c+1) × [r, r+1), x to the
// right, y down; the image is row-major HWC uint8.
#pragma once

#include <cstdint>
#include <vector>

#include "envs/convex_clip.h"

namespace sparsevit::envs {

struct Rgb {
  std::uint8_t r = 0, g = 0, b = 0;
};

class RasterCanvas {
 public:
  // UsageError unless width, height >= 1 and 1 <= supersample <= 16.
  RasterCanvas(int width, int height, Rgb background, int supersample = 4);

  void fill_convex_polygon(const Polygon2& polygon, Rgb color);
  void fill_circle(Point2 center, double radius, Rgb color);

  int width() const { return width_; }
  int height() const { return height_; }
  // The anti-aliased image, height × width × 3.
  std::vector<std::uint8_t> to_rgb() const;

 private:
  int width_, height_, ss_;
  std::vector<Rgb> samples_;  // (height·ss) × (width·ss)
};

}  // namespace sparsevit::envs
