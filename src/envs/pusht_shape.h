// The PushT block's geometry: the T of Diffusion Policy's `add_tee` (scale 30, length 4) as two
// rectangles in the body's frame, placed by a pose, and the coverage score on the exact polygons.
// Frame: workspace pixels, x right, y down (pymunk with pygame's convention); a pose's angle
// turns +x toward +y.
#pragma once

#include <array>

#include "envs/convex_clip.h"

namespace sparsevit::envs {

// Body-origin position and angle (radians) of a T.
struct Pose2 {
  double x = 0.0, y = 0.0, angle = 0.0;
};

inline constexpr double kTeeScale = 30.0;   // add_tee's `scale`
inline constexpr double kTeeLength = 4.0;   // add_tee's `length`: the bar is 4·30 wide
inline constexpr double kTeeMass = 1.0;     // add_tee's `mass`
// add_tee computes both rectangles' inertia from the bar's vertices (inertia2 reuses
// vertices1): 2 · moment_for_poly(1, bar) about the body origin = 2 · 1500.
inline constexpr double kTeeInertia = 3000.0;
// add_tee's centre of gravity: the mean of the two rectangles' centroids, (0, 15) and (0, 75)
// (not area-weighted), in the body frame. The block rotates about it.
inline constexpr Point2 kTeeCenterOfGravity{0.0, 45.0};

// The bar (x in [-60, 60], y in [0, 30]) and the stem (x in [-15, 15], y in [30, 120]).
std::array<Polygon2, 2> tee_parts_local();
// The T's outline (8 vertices, the union of the two parts), in the body frame.
Polygon2 tee_outline_local();

Point2 to_world(const Pose2& pose, const Point2& local);
Point2 to_local(const Pose2& pose, const Point2& world);
std::array<Polygon2, 2> tee_parts_world(const Pose2& pose);

// area(T at block ∩ T at goal) / area(T at goal), exact on the polygons (the parts meet only
// along an edge, so the union's area is the sum of the pairwise intersections).
double tee_coverage(const Pose2& block, const Pose2& goal);

}  // namespace sparsevit::envs
