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

TEST(RasterPlot, IntervalsAreBandsForLinesAndErrorBarsForPoints) {
  // A flat line at 50 with a band 40..60, and a single point with an error bar.
  PlotSeries band{"band", palette_color(0), {1, 2, 3}, {50, 50, 50}};
  band.y_low = {40, 40, 40};
  band.y_high = {60, 60, 60};
  PlotSeries bar{"bar", palette_color(1), {2}, {45}, false, true, {30}, {55}};
  const Canvas c = render_plot({band, bar}, PlotOptions{});
  const Rgb col = palette_color(0);
  const Rgb tint{static_cast<uint8_t>((col.r + 3 * 255) / 4), static_cast<uint8_t>((col.g + 3 * 255) / 4),
                 static_cast<uint8_t>((col.b + 3 * 255) / 4)};
  int tinted = 0, bar_pixels = 0;
  for (int y = 0; y < c.height(); ++y)
    for (int x = 0; x < c.width(); ++x) {
      tinted += c.pixel(x, y) == tint;
      bar_pixels += c.pixel(x, y) == palette_color(1);
    }
  // The band spans the plot's width between 40 and 60: many thousand pixels, the line over it.
  EXPECT_GT(tinted, 20000);
  EXPECT_GT(bar_pixels, 60);  // the bar (30..55 is most of the height) + caps + marker + swatch
  // Without intervals nothing is tinted.
  const Canvas plain = render_plot({PlotSeries{"band", col, {1, 2, 3}, {50, 50, 50}}}, PlotOptions{});
  int plain_tinted = 0;
  for (int y = 0; y < plain.height(); ++y)
    for (int x = 0; x < plain.width(); ++x) plain_tinted += plain.pixel(x, y) == tint;
  EXPECT_EQ(plain_tinted, 0);
}

}  // namespace
}  // namespace sparsevit::analysis
