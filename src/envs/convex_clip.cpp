#include "envs/convex_clip.h"

#include <cmath>
#include <cstddef>

namespace sparsevit::envs {

double signed_area(const Polygon2& polygon) {
  double twice = 0.0;
  const std::size_t n = polygon.size();
  for (std::size_t i = 0; i < n; ++i) {
    const Point2& a = polygon[i];
    const Point2& b = polygon[(i + 1) % n];
    twice += a.x * b.y - b.x * a.y;
  }
  return 0.5 * twice;
}

double area(const Polygon2& polygon) { return std::fabs(signed_area(polygon)); }

namespace {

// > 0 when p is left of the directed edge a→b.
double side(const Point2& a, const Point2& b, const Point2& p) {
  return (b.x - a.x) * (p.y - a.y) - (b.y - a.y) * (p.x - a.x);
}

Point2 crossing(const Point2& p, const Point2& q, double sp, double sq) {
  const double t = sp / (sp - sq);
  return {p.x + t * (q.x - p.x), p.y + t * (q.y - p.y)};
}

}  // namespace

Polygon2 clip_convex(const Polygon2& subject, const Polygon2& clip) {
  if (subject.size() < 3 || clip.size() < 3) return {};
  // Inside means "left of every edge" for a counter-clockwise clip; flip for clockwise.
  const double orientation = signed_area(clip) >= 0.0 ? 1.0 : -1.0;
  Polygon2 output = subject;
  const std::size_t m = clip.size();
  for (std::size_t e = 0; e < m && !output.empty(); ++e) {
    const Point2& a = clip[e];
    const Point2& b = clip[(e + 1) % m];
    Polygon2 input;
    input.swap(output);
    const std::size_t n = input.size();
    for (std::size_t i = 0; i < n; ++i) {
      const Point2& p = input[i];
      const Point2& q = input[(i + 1) % n];
      const double sp = orientation * side(a, b, p);
      const double sq = orientation * side(a, b, q);
      if (sp >= 0.0) output.push_back(p);
      if ((sp >= 0.0) != (sq >= 0.0)) output.push_back(crossing(p, q, sp, sq));
    }
  }
  if (output.size() < 3) return {};
  return output;
}

double convex_intersection_area(const Polygon2& a, const Polygon2& b) { return area(clip_convex(a, b)); }

}  // namespace sparsevit::envs
