#include "envs/pusht_expert.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <vector>

namespace sparsevit::envs {

namespace {

constexpr double kR = kPushTAgentRadius;
constexpr double kInf = std::numeric_limits<double>::infinity();

Point2 operator+(Point2 a, Point2 b) { return {a.x + b.x, a.y + b.y}; }
Point2 operator-(Point2 a, Point2 b) { return {a.x - b.x, a.y - b.y}; }
Point2 operator*(double s, Point2 a) { return {s * a.x, s * a.y}; }
double dot(Point2 a, Point2 b) { return a.x * b.x + a.y * b.y; }
double cross(Point2 a, Point2 b) { return a.x * b.y - a.y * b.x; }
double norm(Point2 a) { return std::sqrt(dot(a, a)); }

double wrap_angle(double a) { return std::remainder(a, 2.0 * M_PI); }

double point_segment_distance(Point2 p, Point2 a, Point2 b) {
  const Point2 ab = b - a;
  const double len2 = dot(ab, ab);
  const double t = len2 > 0.0 ? std::clamp(dot(p - a, ab) / len2, 0.0, 1.0) : 0.0;
  return norm(p - (a + t * ab));
}

bool inside_convex(Point2 p, const Polygon2& poly) {
  const double orientation = signed_area(poly) >= 0.0 ? 1.0 : -1.0;
  for (std::size_t i = 0; i < poly.size(); ++i) {
    const Point2 a = poly[i], b = poly[(i + 1) % poly.size()];
    if (orientation * cross(b - a, p - a) < 0.0) return false;
  }
  return true;
}

double point_polygon_distance(Point2 p, const Polygon2& poly) {
  if (inside_convex(p, poly)) return 0.0;
  double d = kInf;
  for (std::size_t i = 0; i < poly.size(); ++i) d = std::min(d, point_segment_distance(p, poly[i], poly[(i + 1) % poly.size()]));
  return d;
}

bool segments_cross(Point2 a, Point2 b, Point2 c, Point2 d) {
  const double d1 = cross(b - a, c - a), d2 = cross(b - a, d - a);
  const double d3 = cross(d - c, a - c), d4 = cross(d - c, b - c);
  return ((d1 > 0) != (d2 > 0)) && ((d3 > 0) != (d4 > 0));
}

double segment_polygon_distance(Point2 a, Point2 b, const Polygon2& poly) {
  double d = std::min(point_polygon_distance(a, poly), point_polygon_distance(b, poly));
  for (std::size_t i = 0; i < poly.size(); ++i) {
    const Point2 c = poly[i], e = poly[(i + 1) % poly.size()];
    if (segments_cross(a, b, c, e)) return 0.0;
    d = std::min(d, point_segment_distance(c, a, b));
  }
  return d;
}

struct Obstacle {
  std::array<Polygon2, 2> parts;
  double distance(Point2 p) const {
    return std::min(point_polygon_distance(p, parts[0]), point_polygon_distance(p, parts[1]));
  }
  double distance(Point2 a, Point2 b) const {
    return std::min(segment_polygon_distance(a, b, parts[0]), segment_polygon_distance(a, b, parts[1]));
  }
};

// Where to go to stand `gap` clear of the T, moving along the normal of its nearest outline
// point: the direction contacts push the agent anyway, so leaving that way never drags the block
// (moving away from the block's centre can, when the agent is in one of the T's inner corners
// or overlaps it after a reset).
Point2 exit_point(const Pose2& pose, const Obstacle& tee, Point2 agent, double gap) {
  const Polygon2 outline = tee_outline_local();
  Point2 closest = agent;
  double best = kInf;
  for (std::size_t i = 0; i < outline.size(); ++i) {
    const Point2 a = to_world(pose, outline[i]), b = to_world(pose, outline[(i + 1) % outline.size()]);
    const Point2 ab = b - a;
    const double t = std::clamp(dot(agent - a, ab) / dot(ab, ab), 0.0, 1.0);
    const Point2 q = a + t * ab;
    const double d = norm(agent - q);
    if (d < best) best = d, closest = q;
  }
  const bool inside = tee.distance(agent) == 0.0;
  Point2 out = inside ? closest - agent : agent - closest;
  const double len = norm(out);
  if (len < 1e-9) return agent;
  return closest + (gap / len) * out;
}

// Contacts on the T's outline in the body frame: a point and the inward normal a push there
// acts along. Only points the agent's circle can touch from outside (the inner corners of the T
// keep it away from parts of the bar's underside and the stem's sides).
struct Contact {
  Point2 point, normal;
};

std::vector<Contact> make_contacts() {
  const Polygon2 outline = tee_outline_local();
  const Obstacle tee{tee_parts_local()};
  std::vector<Contact> contacts;
  constexpr double kSpacing = 5.0, kCornerMargin = 3.0;
  for (std::size_t i = 0; i < outline.size(); ++i) {
    const Point2 a = outline[i], b = outline[(i + 1) % outline.size()];
    const double len = norm(b - a);
    const Point2 along = (1.0 / len) * (b - a);
    const Point2 outward{along.y, -along.x};  // the outline runs counter-clockwise (y up)
    for (double t = kCornerMargin; t <= len - kCornerMargin + 1e-9; t += kSpacing) {
      const Point2 p = a + t * along;
      if (tee.distance(p + kR * outward) < kR - 0.01) continue;
      contacts.push_back({p, -1.0 * outward});
    }
  }
  return contacts;
}

constexpr double kApproach = 20.0;  // the approach point lies this far behind the pre-contact point

bool in_workspace(Point2 p) { return p.x >= 0.0 && p.y >= 0.0 && p.x <= kPushTWorkspace && p.y <= kPushTWorkspace; }
Point2 clamp_to_workspace(Point2 p) {
  return {std::clamp(p.x, 0.0, kPushTWorkspace), std::clamp(p.y, 0.0, kPushTWorkspace)};
}

// The next waypoint from the agent to `approach` around the block; false when none is clear.
bool plan_path(const Pose2& pose, const Obstacle& tee, double clearance, Point2 agent, Point2 approach, Point2* next) {
  // Go around the block to the approach point by the shortest path through rings of waypoints
  // whose straight legs keep `clearance` from the T.
  const double keep = kR + clearance;
  if (tee.distance(agent) < keep - 1.0 && tee.distance(agent) < tee.distance(approach) + 1e-9) {
    // Too close to steer around: step clear of the block first.
    *next = exit_point(pose, tee, agent, keep + 20.0);
    return true;
  }
  const Point2 cog = to_world(pose, kTeeCenterOfGravity);
  std::vector<Point2> nodes{agent, approach};
  constexpr int kRing = 24;
  for (double radius : {100.0, 120.0, 145.0}) {
    for (int i = 0; i < kRing; ++i) {
      const double a = 2.0 * M_PI * (i + (radius > 110.0 ? 0.5 : 0.0)) / kRing;
      const Point2 q{cog.x + radius * std::cos(a), cog.y + radius * std::sin(a)};
      if (!in_workspace(q) || tee.distance(q) < keep) continue;
      nodes.push_back(q);
    }
  }
  // Dijkstra from the agent (node 0) to the approach point (node 1) on the visibility graph;
  // legs from the agent or into the approach point may start or end closer than `keep`.
  const std::size_t m = nodes.size();
  std::vector<double> dist(m, kInf);
  std::vector<int> prev(m, -1);
  std::vector<bool> done(m, false);
  dist[0] = 0.0;
  for (std::size_t iter = 0; iter < m; ++iter) {
    int u = -1;
    for (std::size_t i = 0; i < m; ++i)
      if (!done[i] && dist[i] < kInf && (u < 0 || dist[i] < dist[u])) u = static_cast<int>(i);
    if (u < 0 || u == 1) break;
    done[u] = true;
    for (std::size_t v = 0; v < m; ++v) {
      if (done[v]) continue;
      const double need =
          (u == 0 || v == 1) ? std::min(keep, std::min(tee.distance(nodes[u]), tee.distance(nodes[v])) - 0.5) : keep;
      if (tee.distance(nodes[u], nodes[v]) < need) continue;
      const double d = dist[u] + norm(nodes[v] - nodes[u]);
      if (d < dist[v]) dist[v] = d, prev[v] = u;
    }
  }
  if (prev[1] < 0) return false;
  int node = 1;
  while (prev[node] != 0) node = prev[node];
  *next = nodes[node];
  return true;
}

}  // namespace

PushTExpertConfig PushTExpertConfig::waypoints() {
  PushTExpertConfig c;
  c.hysteresis = 0.5;
  c.max_command_distance = 0.0;
  c.travel_scale = 0.0;
  return c;
}

PushTExpert::PushTExpert(PushTExpertConfig config) : config_(config) {}

Point2 PushTExpert::act(const PushTState& s) {
  const Point2 target = plan(s);
  const Point2 agent{s.agent_x, s.agent_y};
  const Point2 d = target - agent;
  const double len = norm(d);
  if (config_.max_command_distance <= 0.0 || len <= config_.max_command_distance) return target;
  return agent + (config_.max_command_distance / len) * d;
}

void PushTExpert::reset() { contact_ = -1; }

Point2 PushTExpert::plan(const PushTState& s) {
  static const std::vector<Contact> contacts = make_contacts();
  const Pose2 pose{s.block_x, s.block_y, s.block_angle};
  const Point2 agent{s.agent_x, s.agent_y};
  const Obstacle tee{tee_parts_world(pose)};
  const Point2 cog = to_world(pose, kTeeCenterOfGravity);
  const Point2 error_p = to_world(kPushTGoal, kTeeCenterOfGravity) - cog;
  const double error_a = wrap_angle(kPushTGoal.angle - pose.angle);
  const double w2 = config_.angle_weight * config_.angle_weight;
  const double c = std::cos(pose.angle), sn = std::sin(pose.angle);
  auto rotate = [&](Point2 v) { return Point2{c * v.x - sn * v.y, sn * v.x + c * v.y}; };

  // A push at p along n with the agent's normal speed 1 gives the block v = j n / m and
  // ω = j (r × n) / I, j = 1 / (1/m + (r × n)² / I) (kinematic pusher, frictionless contact,
  // the block at rest before each substep). Score: the rate the weighted pose error falls.
  struct Scored {
    double score = -kInf, step = 0.0, rank = -kInf;
  };
  std::vector<Scored> scored(contacts.size());
  std::vector<int> order;
  for (std::size_t i = 0; i < contacts.size(); ++i) {
    const Point2 p = to_world(pose, contacts[i].point), n = rotate(contacts[i].normal);
    const Point2 approach = p - (kR + kApproach) * n;
    // Keep commands inside the action space [0, 512]².
    if (!in_workspace(approach) || !in_workspace(p - kR * n)) continue;
    const double k = cross(p - cog, n);
    const double j = 1.0 / (1.0 / kTeeMass + k * k / kTeeInertia);
    const Point2 v = (j / kTeeMass) * n;
    const double omega = j * k / kTeeInertia;
    const double rate = dot(error_p, v) + w2 * error_a * omega;
    const double gain = dot(v, v) + w2 * omega * omega;
    // Contacts far from the agent cost a detour: rank by the rate discounted by the distance
    // to the contact, which also keeps the agent on the contact it is at (stickiness read off
    // the state, not remembered).
    const double travel = norm(agent - (p - kR * n));
    const double rank = config_.travel_scale > 0.0 ? rate / (1.0 + travel / config_.travel_scale) : rate;
    scored[i] = {rate, rate / gain, rank};
    if (rate > 0.0) order.push_back(static_cast<int>(i));
  }
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return scored[a].rank > scored[b].rank; });
  if (order.empty()) return clamp_to_workspace(agent);
  // Overlapping the block (a reset can start so): leave it first.
  if (tee.distance(agent) < kR - 2.0) return clamp_to_workspace(exit_point(pose, tee, agent, kR + config_.clearance));
  // The current contact stays while it is nearly as good as the best (switching costs a detour).
  if (config_.hysteresis < 1.0 && contact_ >= 0 && scored[contact_].score > 0.0 && scored[contact_].rank >= config_.hysteresis * scored[order[0]].rank) {
    order.erase(std::remove(order.begin(), order.end(), contact_), order.end());
    order.insert(order.begin(), contact_);
  }

  // Try the contacts best first until one is reachable.
  for (std::size_t t = 0; t < order.size(); ++t) {
    const int index = order[t];
    const Point2 p = to_world(pose, contacts[index].point), n = rotate(contacts[index].normal);
    const Point2 pre = p - kR * n;
    // Behind the contact, on its normal line: push by the step the linear model asks for.
    const Point2 rel = agent - p;
    const double along = dot(rel, n), lateral = std::fabs(cross(n, rel));
    if (lateral < 6.0 && along > -(kR + kApproach + 10.0) && along < -(kR - 4.0)) {
      contact_ = index;
      const double push = std::clamp(scored[index].step, 0.0, config_.max_push);
      return clamp_to_workspace(pre + push * n);
    }
    const Point2 approach = pre - kApproach * n;
    Point2 next;
    if (plan_path(pose, tee, config_.clearance, agent, approach, &next)) {
      contact_ = index;
      return clamp_to_workspace(next);
    }
  }
  // Nothing reachable from here: back off toward the middle of the workspace.
  contact_ = -1;
  const Point2 middle{kPushTWorkspace / 2, kPushTWorkspace / 2};
  Point2 away = agent - cog;
  const double len = norm(away);
  away = len > 1e-9 ? (1.0 / len) * away : Point2{1.0, 0.0};
  return clamp_to_workspace(0.5 * (agent + 25.0 * away) + 0.5 * (agent + 0.1 * (middle - agent)));
}

}  // namespace sparsevit::envs
