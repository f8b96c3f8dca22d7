// The plotting canvas: pixels, text, the PNG it writes, and a chart with a legend.
#include "analysis/raster_plot.h"

#include <gtest/gtest.h>
#include <png.h>

#include <cstdio>
#include <filesystem>

namespace sparsevit::analysis {
namespace {

TEST(RasterPlot, DrawsAndWritesAnRgbPng) {
  Canvas c(40, 20);
  c.line(0, 0, 39, 19, {255, 0, 0});
  EXPECT_EQ(c.pixel(0, 0), (Rgb{255, 0, 0}));
  EXPECT_EQ(c.pixel(39, 19), (Rgb{255, 0, 0}));
  EXPECT_EQ(c.pixel(39, 0), (Rgb{255, 255, 255}));
  c.text(2, 10, "A1", {0, 0, 0});
  EXPECT_EQ(c.pixel(2 + 2, 10), (Rgb{0, 0, 0}));  // the top of the A
  EXPECT_EQ(Canvas::text_width("AB"), 11);
  c.set(-1, 100, {1, 2, 3});  // outside: ignored

  const auto path = (std::filesystem::temp_directory_path() / "sparsevit_raster_plot_test.png").string();
  c.write_png(path);
  FILE* fp = std::fopen(path.c_str(), "rb");
  ASSERT_NE(fp, nullptr);
  png_structp png = png_create_read_struct(PNG_LIBPNG_VER_STRING, nullptr, nullptr, nullptr);
  png_infop info = png_create_info_struct(png);
  png_init_io(png, fp);
  png_read_info(png, info);
  EXPECT_EQ(png_get_image_width(png, info), 40u);
  EXPECT_EQ(png_get_image_height(png, info), 20u);
  EXPECT_EQ(png_get_color_type(png, info), PNG_COLOR_TYPE_RGB);
  png_destroy_read_struct(&png, &info, nullptr);
  std::fclose(fp);
  std::filesystem::remove(path);
}

TEST(RasterPlot, ChartHasItsSeriesColoursAndLegend) {
  PlotSeries a{"dense", palette_color(0), {1, 2, 3}, {50, 60, 70}};
  PlotSeries b{"fibo", palette_color(1), {0.01}, {65}, false, true};
  PlotOptions o;
  o.log_x = true;
  const Canvas c = render_plot({a, b}, o);
  EXPECT_EQ(c.width(), 900);
  int seen_a = 0, seen_b = 0;
  for (int y = 0; y < c.height(); ++y)
    for (int x = 0; x < c.width(); ++x) {
      seen_a += c.pixel(x, y) == palette_color(0);
      seen_b += c.pixel(x, y) == palette_color(1);
    }
  EXPECT_GT(seen_a, 100);  // lines, markers and the swatch
  EXPECT_GT(seen_b, 40);   // a marker and the swatch
}

}  // namespace
}  // namespace sparsevit::analysis
