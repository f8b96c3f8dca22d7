// The polygon clipper against hand-computed areas.
#include "envs/convex_clip.h"

#include <gtest/gtest.h>

#include <cmath>

namespace sparsevit::envs {
namespace {

Polygon2 rect(double x0, double y0, double x1, double y1) { return {{x0, y0}, {x1, y0}, {x1, y1}, {x0, y1}}; }

TEST(ConvexClip, AreaOfRectangleAndTriangle) {
  EXPECT_DOUBLE_EQ(area(rect(0, 0, 4, 3)), 12.0);
  EXPECT_DOUBLE_EQ(area(Polygon2{{0, 0}, {4, 0}, {0, 3}}), 6.0);
  EXPECT_GT(signed_area(rect(0, 0, 1, 1)), 0.0);                          // counter-clockwise (y up)
  EXPECT_LT(signed_area(Polygon2{{0, 0}, {0, 1}, {1, 1}, {1, 0}}), 0.0);  // clockwise
}

TEST(ConvexClip, OverlappingRectanglesByKnownAmounts) {
  // [0,4]x[0,3] ∩ [1,6]x[2,5] = [1,4]x[2,3]: 3 x 1.
  EXPECT_NEAR(convex_intersection_area(rect(0, 0, 4, 3), rect(1, 2, 6, 5)), 3.0, 1e-12);
  // Contained: the smaller one's area.
  EXPECT_NEAR(convex_intersection_area(rect(0, 0, 10, 10), rect(2, 3, 5, 4)), 3.0, 1e-12);
  // Disjoint and edge-touching: nothing.
  EXPECT_EQ(convex_intersection_area(rect(0, 0, 1, 1), rect(2, 2, 3, 3)), 0.0);
  EXPECT_NEAR(convex_intersection_area(rect(0, 0, 1, 1), rect(1, 0, 2, 1)), 0.0, 1e-12);
}

TEST(ConvexClip, OrientationOfEitherPolygonDoesNotMatter) {
  const Polygon2 a = rect(0, 0, 4, 3);
  const Polygon2 b_cw{{1, 2}, {1, 5}, {6, 5}, {6, 2}};
  EXPECT_NEAR(convex_intersection_area(a, b_cw), 3.0, 1e-12);
  EXPECT_NEAR(convex_intersection_area(b_cw, a), 3.0, 1e-12);
}

TEST(ConvexClip, RotatedSquareOverAxisSquare) {
  // The unit square rotated 45° about its centre (0.5, 0.5) clipped by the unit square: the
  // octagon of area 2(√2 − 1) (the square minus four corner triangles of legs 1 − 1/√2).
  const double h = std::sqrt(0.5);
  const Polygon2 diamond{{0.5, 0.5 - h}, {0.5 + h, 0.5}, {0.5, 0.5 + h}, {0.5 - h, 0.5}};
  const double leg = 1.0 - h;
  const double expected = 1.0 - 4.0 * (0.5 * leg * leg);
  EXPECT_NEAR(convex_intersection_area(rect(0, 0, 1, 1), diamond), expected, 1e-12);
  EXPECT_NEAR(expected, 2.0 * (std::sqrt(2.0) - 1.0), 1e-12);
}

TEST(ConvexClip, DegenerateInputsGiveEmpty) {
  EXPECT_TRUE(clip_convex({}, rect(0, 0, 1, 1)).empty());
  EXPECT_TRUE(clip_convex(rect(0, 0, 1, 1), Polygon2{{0, 0}, {1, 1}}).empty());
}

}  // namespace
}  // namespace sparsevit::envs
