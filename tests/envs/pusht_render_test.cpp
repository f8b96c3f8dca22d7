// The PushT observation image and the rasteriser under it.
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "envs/pusht_env.h"
#include "envs/raster_canvas.h"
#include "util/errors.h"

namespace sparsevit::envs {
namespace {

struct Pixel {
  int r, g, b;
};

Pixel at(const std::vector<std::uint8_t>& rgb, int size, double world_x, double world_y) {
  const int col = static_cast<int>(world_x * size / 512.0), row = static_cast<int>(world_y * size / 512.0);
  const std::size_t i = (static_cast<std::size_t>(row) * size + col) * 3;
  return {rgb[i], rgb[i + 1], rgb[i + 2]};
}

TEST(RasterCanvas, FullyCoveredPixelsKeepTheColourAndEdgesBlend) {
  RasterCanvas canvas(8, 8, {255, 255, 255}, 4);
  canvas.fill_convex_polygon({{0, 0}, {4.5, 0}, {4.5, 8}, {0, 8}}, {0, 0, 0});
  const auto rgb = canvas.to_rgb();
  ASSERT_EQ(rgb.size(), 8u * 8u * 3u);
  EXPECT_EQ(rgb[(3 * 8 + 2) * 3], 0);     // inside
  EXPECT_EQ(rgb[(3 * 8 + 6) * 3], 255);   // outside
  EXPECT_EQ(rgb[(3 * 8 + 4) * 3], 128);   // column 4 is half covered: (0·8 + 255·8)/16 rounded
}

TEST(RasterCanvas, CircleAreaMatchesItsCoverage) {
  RasterCanvas canvas(40, 40, {0, 0, 0}, 8);
  canvas.fill_circle({20, 20}, 10, {255, 255, 255});
  const auto rgb = canvas.to_rgb();
  double covered = 0;
  for (std::size_t i = 0; i < rgb.size(); i += 3) covered += rgb[i] / 255.0;
  EXPECT_NEAR(covered, 3.14159265 * 100, 3.0);
}

TEST(RasterCanvas, BadSizesAreUsageErrors) {
  EXPECT_THROW(RasterCanvas(0, 4, {}), UsageError);
  EXPECT_THROW(RasterCanvas(4, 4, {}, 0), UsageError);
}

TEST(PushTRender, ImageSizeAndColoursAtKnownPoints) {
  PushTEnv env;
  // The block far from the goal: the goal's centre shows the goal colour.
  env.reset_to_state({100, 400, 400, 80, 0.0});
  const auto rgb = env.render();
  ASSERT_EQ(rgb.size(), 96u * 96u * 3u);
  // Agent centre: the lightened RoyalBlue.
  const Pixel agent = at(rgb, 96, 100, 400);
  EXPECT_EQ(agent.r, 78);
  EXPECT_EQ(agent.g, 126);
  EXPECT_EQ(agent.b, 255);
  // A point inside the goal T's stem (body frame (0, 75)): LightGreen.
  const Point2 goal_stem = to_world(kPushTGoal, {0, 75});
  const Pixel goal = at(rgb, 96, goal_stem.x, goal_stem.y);
  EXPECT_EQ(goal.r, 144);
  EXPECT_EQ(goal.g, 238);
  EXPECT_EQ(goal.b, 144);
  // The block's stem centre: slate gray (lightened fill).
  const Pixel block = at(rgb, 96, 400, 80 + 75);
  EXPECT_EQ(block.r, 142);
  EXPECT_EQ(block.g, 163);
  EXPECT_EQ(block.b, 183);
  // Background.
  const Pixel empty = at(rgb, 96, 300, 450);
  EXPECT_EQ(empty.r, 255);
  EXPECT_EQ(empty.g, 255);
  EXPECT_EQ(empty.b, 255);
}

TEST(PushTRender, EdgesAreAntiAliased) {
  PushTEnv env;
  env.reset_to_state({100, 400, 400, 80, 0.3});
  const auto rgb = env.render();
  // Somewhere along the agent's and the goal's rims, pixels lie strictly between the colours.
  int blended = 0;
  for (std::size_t i = 0; i < rgb.size(); i += 3) {
    const bool pure = (rgb[i] == 255 && rgb[i + 1] == 255 && rgb[i + 2] == 255) ||
                      (rgb[i] == 144 && rgb[i + 1] == 238 && rgb[i + 2] == 144) ||
                      (rgb[i] == 78 && rgb[i + 1] == 126 && rgb[i + 2] == 255) ||
                      (rgb[i] == 65 && rgb[i + 1] == 105 && rgb[i + 2] == 225) ||
                      (rgb[i] == 142 && rgb[i + 1] == 163 && rgb[i + 2] == 183) ||
                      (rgb[i] == 119 && rgb[i + 1] == 136 && rgb[i + 2] == 153) ||
                      (rgb[i] == 211 && rgb[i + 1] == 211 && rgb[i + 2] == 211);
    blended += pure ? 0 : 1;
  }
  EXPECT_GT(blended, 50);
}

TEST(PushTRender, OtherSizesAndTheBlockMovesTheImage) {
  PushTEnv env;
  env.reset_to_state({100, 400, 400, 80, 0.0});
  std::vector<std::uint8_t> big;
  env.render(big, 224);
  ASSERT_EQ(big.size(), 224u * 224u * 3u);
  const Pixel agent = at(big, 224, 100, 400);
  EXPECT_EQ(agent.b, 255);
  const auto before = env.render();
  env.reset_to_state({100, 400, 380, 80, 0.0});
  EXPECT_NE(env.render(), before);
}

}  // namespace
}  // namespace sparsevit::envs
