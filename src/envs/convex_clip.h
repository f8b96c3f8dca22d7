// Convex polygon clipping (Sutherland–Hodgman) and areas: PushT's coverage is the exact area
// of the block's T inside the goal's T, and each T is two rectangles.
#pragma once

#include <vector>

namespace sparsevit::envs {

struct Point2 {
  double x = 0.0, y = 0.0;
};

// Vertices in order (either orientation); convex where a function says so.
using Polygon2 = std::vector<Point2>;

// Shoelace formula: positive for counter-clockwise vertices in a y-up frame.
double signed_area(const Polygon2& polygon);
double area(const Polygon2& polygon);

// The part of `subject` inside the convex `clip` (Sutherland–Hodgman). `subject` may be any
// simple polygon, but only convex subjects give a single correct polygon. Empty when disjoint.
Polygon2 clip_convex(const Polygon2& subject, const Polygon2& clip);

// Area of the intersection of two convex polygons.
double convex_intersection_area(const Polygon2& a, const Polygon2& b);

}  // namespace sparsevit::envs
