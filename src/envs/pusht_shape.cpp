#include "envs/pusht_shape.h"

#include <cmath>

namespace sparsevit::envs {

std::array<Polygon2, 2> tee_parts_local() {
  const double s = kTeeScale, half_bar = kTeeLength * kTeeScale / 2.0;
  // The vertex orders of add_tee's vertices1 and vertices2.
  Polygon2 bar{{-half_bar, s}, {half_bar, s}, {half_bar, 0.0}, {-half_bar, 0.0}};
  Polygon2 stem{{-s / 2.0, s}, {-s / 2.0, kTeeLength * s}, {s / 2.0, kTeeLength * s}, {s / 2.0, s}};
  return {bar, stem};
}

Polygon2 tee_outline_local() {
  const double s = kTeeScale, half_bar = kTeeLength * kTeeScale / 2.0, tip = kTeeLength * s;
  return {{-half_bar, 0.0}, {half_bar, 0.0}, {half_bar, s},   {s / 2.0, s},
          {s / 2.0, tip},   {-s / 2.0, tip}, {-s / 2.0, s},   {-half_bar, s}};
}

Point2 to_world(const Pose2& pose, const Point2& local) {
  const double c = std::cos(pose.angle), s = std::sin(pose.angle);
  return {pose.x + c * local.x - s * local.y, pose.y + s * local.x + c * local.y};
}

Point2 to_local(const Pose2& pose, const Point2& world) {
  const double c = std::cos(pose.angle), s = std::sin(pose.angle);
  const double dx = world.x - pose.x, dy = world.y - pose.y;
  return {c * dx + s * dy, -s * dx + c * dy};
}

std::array<Polygon2, 2> tee_parts_world(const Pose2& pose) {
  std::array<Polygon2, 2> parts = tee_parts_local();
  for (Polygon2& part : parts)
    for (Point2& v : part) v = to_world(pose, v);
  return parts;
}

double tee_coverage(const Pose2& block, const Pose2& goal) {
  const auto block_parts = tee_parts_world(block);
  const auto goal_parts = tee_parts_world(goal);
  double inside = 0.0, goal_area = 0.0;
  for (const Polygon2& g : goal_parts) {
    goal_area += area(g);
    for (const Polygon2& b : block_parts) inside += convex_intersection_area(b, g);
  }
  return inside / goal_area;
}

}  // namespace sparsevit::envs
