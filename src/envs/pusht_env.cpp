#include "envs/pusht_env.h"

#include <box2d/box2d.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <string>

#include "envs/raster_canvas.h"
#include "util/errors.h"

namespace sparsevit::envs {

namespace {

// Box2D is tuned for bodies of 0.1–10 m and moves a body at most b2_maxTranslation (2 m) per
// substep, so the pixel workspace is simulated at 20 px per metre: the T is 6 m wide, and the
// fastest PD motion (~1850 px/s, ~18.5 px per substep) stays well under 40 px per substep.
constexpr double kPixelsPerMeter = 20.0;
// pymunk's default solver iterations (Space.iterations = 10).
constexpr int kVelocityIterations = 10, kPositionIterations = 10;

b2Vec2 to_b2(double x, double y) {
  return b2Vec2(static_cast<float>(x / kPixelsPerMeter), static_cast<float>(y / kPixelsPerMeter));
}

// The original's colours (pygame colour names; DrawOptions lightens fills by 1.2, clipped).
constexpr Rgb kBackground{255, 255, 255};
constexpr Rgb kGoalColor{144, 238, 144};         // LightGreen
constexpr Rgb kBlockOutline{119, 136, 153};      // LightSlateGray
constexpr Rgb kBlockFill{142, 163, 183};         // LightSlateGray · 1.2
constexpr Rgb kAgentOutline{65, 105, 225};       // RoyalBlue
constexpr Rgb kAgentFill{78, 126, 255};          // RoyalBlue · 1.2
constexpr Rgb kWallColor{211, 211, 211};         // LightGray
constexpr double kOutlineRadius = 2.0;           // DrawOptions' fat polygon edges
constexpr double kAgentInnerRadius = 11.0;       // round(radius - 4)

// The original's walls: segments of radius 2 along the workspace's border.
struct WallSegment {
  double ax, ay, bx, by;
};
constexpr WallSegment kWalls[] = {{5, 506, 5, 5}, {5, 5, 506, 5}, {506, 5, 506, 506}, {5, 506, 506, 506}};
constexpr double kWallRadius = 2.0;

// A uniform double in [0, 1) from the top 53 bits: the same on every standard library.
double uniform01(std::mt19937_64& rng) { return static_cast<double>(rng() >> 11) * 0x1.0p-53; }
// numpy's randint(low, high): an integer in [low, high).
double uniform_int(std::mt19937_64& rng, int low, int high) {
  return low + std::floor(uniform01(rng) * (high - low));
}

void require_finite(double value, const char* field) {
  if (!std::isfinite(value)) throw UsageError(std::string("PushT state: ") + field + " is not finite");
}

}  // namespace

struct PushTEnv::World {
  b2World world{b2Vec2(0.0f, 0.0f)};
  b2Body* agent = nullptr;
  b2Body* block = nullptr;
  // The PD law's velocity, kept in double: Box2D's float copy is what moves the body.
  double agent_vx = 0.0, agent_vy = 0.0;

  explicit World(const PushTState& s) {
    world.SetAllowSleeping(false);  // a resting block must answer the next push at once

    b2BodyDef ground_def;
    b2Body* ground = world.CreateBody(&ground_def);
    for (const WallSegment& w : kWalls) {
      // A box around the segment, as thick as its radius on each side (square ends; the
      // original's rounded ends lie in the corners, which nothing reaches).
      const double cx = (w.ax + w.bx) / 2, cy = (w.ay + w.by) / 2;
      const double hx = std::fabs(w.bx - w.ax) / 2 + kWallRadius, hy = std::fabs(w.by - w.ay) / 2 + kWallRadius;
      b2PolygonShape box;
      box.SetAsBox(static_cast<float>(hx / kPixelsPerMeter), static_cast<float>(hy / kPixelsPerMeter), to_b2(cx, cy), 0.0f);
      b2FixtureDef fixture;
      fixture.shape = &box;
      fixture.friction = 0.0f;
      ground->CreateFixture(&fixture);
    }

    // The agent is kinematic as in the original: velocity-driven, infinitely heavy in contacts,
    // and (kinematic–static pairs never collide, in pymunk as in Box2D) not stopped by walls.
    b2BodyDef agent_def;
    agent_def.type = b2_kinematicBody;
    agent_def.position = to_b2(s.agent_x, s.agent_y);
    agent = world.CreateBody(&agent_def);
    b2CircleShape circle;
    circle.m_radius = static_cast<float>(kPushTAgentRadius / kPixelsPerMeter);
    b2FixtureDef agent_fixture;
    agent_fixture.shape = &circle;
    agent_fixture.friction = 0.0f;  // see docs/pusht.md: the original's contacts are frictionless
    agent->CreateFixture(&agent_fixture);
    agent_vx = s.agent_vx, agent_vy = s.agent_vy;

    b2BodyDef block_def;
    block_def.type = b2_dynamicBody;
    block_def.position = to_b2(s.block_x, s.block_y);
    block_def.angle = static_cast<float>(s.block_angle);
    block = world.CreateBody(&block_def);
    for (const Polygon2& part : tee_parts_local()) {
      b2Vec2 vertices[4];
      for (int i = 0; i < 4; ++i) vertices[i] = to_b2(part[i].x, part[i].y);
      b2PolygonShape shape;
      shape.Set(vertices, 4);
      b2FixtureDef fixture;
      fixture.shape = &shape;
      fixture.density = 1.0f;
      fixture.friction = 0.0f;
      block->CreateFixture(&fixture);
    }
    // add_tee's mass, centre of gravity and inertia (Box2D wants the inertia about the origin).
    b2MassData mass;
    mass.mass = static_cast<float>(kTeeMass);
    mass.center = to_b2(kTeeCenterOfGravity.x, kTeeCenterOfGravity.y);
    const double cog2 = (kTeeCenterOfGravity.x * kTeeCenterOfGravity.x + kTeeCenterOfGravity.y * kTeeCenterOfGravity.y);
    mass.I = static_cast<float>((kTeeInertia + kTeeMass * cog2) / (kPixelsPerMeter * kPixelsPerMeter));
    block->SetMassData(&mass);
  }

  // One physics substep of the original's loop: the PD law updates the agent's velocity, then
  // the world steps. The original's space.damping = 0 keeps 0^dt = 0 of a body's velocity per
  // step: the block moves only while pushed (quasi-static) — reproduced by zeroing its
  // velocity before each substep, so contacts alone give it motion.
  void substep(double target_x, double target_y) {
    constexpr double dt = 1.0 / kPushTSimHz;
    const b2Vec2 p = agent->GetPosition();
    const double px = p.x * kPixelsPerMeter, py = p.y * kPixelsPerMeter;
    agent_vx += (kPushTKp * (target_x - px) - kPushTKv * agent_vx) * dt;
    agent_vy += (kPushTKp * (target_y - py) - kPushTKv * agent_vy) * dt;
    agent->SetLinearVelocity(to_b2(agent_vx, agent_vy));
    block->SetLinearVelocity(b2Vec2(0.0f, 0.0f));
    block->SetAngularVelocity(0.0f);
    world.Step(static_cast<float>(dt), kVelocityIterations, kPositionIterations);
  }
};

PushTEnv::PushTEnv(PushTConfig config) : config_(config) {
  if (config_.render_size < 1 || config_.render_size > 4096)
    throw UsageError("PushTConfig.render_size " + std::to_string(config_.render_size) + " must be within 1..4096");
  if (config_.max_steps < 1)
    throw UsageError("PushTConfig.max_steps " + std::to_string(config_.max_steps) + " must be positive");
  if (!(config_.success_coverage > 0.0 && config_.success_coverage <= 1.0))
    throw UsageError("PushTConfig.success_coverage must be within (0, 1]");
  if (config_.render_supersample < 1 || config_.render_supersample > 16)
    throw UsageError("PushTConfig.render_supersample " + std::to_string(config_.render_supersample) +
                     " must be within 1..16");
  reset(0);
}

PushTEnv::~PushTEnv() = default;
PushTEnv::PushTEnv(PushTEnv&&) noexcept = default;
PushTEnv& PushTEnv::operator=(PushTEnv&&) noexcept = default;

void PushTEnv::reset(std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  PushTState s;
  s.agent_x = uniform_int(rng, 50, 450);
  s.agent_y = uniform_int(rng, 50, 450);
  s.block_x = uniform_int(rng, 100, 400);
  s.block_y = uniform_int(rng, 100, 400);
  // The original draws randn()·2π − π: a normal that wide is uniform modulo 2π to within 1e-8.
  s.block_angle = -M_PI + 2.0 * M_PI * uniform01(rng);
  reset_to_state(s);
}

void PushTEnv::reset_to_state(const PushTState& s) {
  require_finite(s.agent_x, "agent_x");
  require_finite(s.agent_y, "agent_y");
  require_finite(s.block_x, "block_x");
  require_finite(s.block_y, "block_y");
  require_finite(s.block_angle, "block_angle");
  require_finite(s.agent_vx, "agent_vx");
  require_finite(s.agent_vy, "agent_vy");
  // A fresh world each time: no contact cache carries over, so a state fixes what follows.
  world_ = std::make_unique<World>(s);
  steps_ = 0;
  // The original's _set_state runs one substep "to take effect" (the agent keeps its velocity,
  // so it coasts as in a step without the PD law).
  const b2Vec2 p = world_->agent->GetPosition();
  const double px = p.x * kPixelsPerMeter, py = p.y * kPixelsPerMeter;
  // Target = position + kv·v/kp leaves the velocity unchanged by the PD law.
  world_->substep(px + kPushTKv * s.agent_vx / kPushTKp, py + kPushTKv * s.agent_vy / kPushTKp);
}

PushTStepResult PushTEnv::step(double target_x, double target_y) {
  if (!std::isfinite(target_x) || !std::isfinite(target_y))
    throw UsageError("PushTEnv::step: the target position is not finite");
  if (steps_ >= config_.max_steps)
    throw UsageError("PushTEnv::step: the episode ended after " + std::to_string(config_.max_steps) +
                     " steps; call reset first");
  for (int i = 0; i < kPushTSubsteps; ++i) world_->substep(target_x, target_y);
  ++steps_;
  PushTStepResult result;
  result.coverage = coverage();
  result.reward = std::clamp(result.coverage / config_.success_coverage, 0.0, 1.0);
  result.success = result.coverage > config_.success_coverage;
  result.truncated = steps_ >= config_.max_steps;
  result.done = result.success || result.truncated;
  return result;
}

PushTState PushTEnv::state() const {
  PushTState s;
  const b2Vec2 a = world_->agent->GetPosition();
  s.agent_x = a.x * kPixelsPerMeter;
  s.agent_y = a.y * kPixelsPerMeter;
  const Pose2 b = block_pose();
  s.block_x = b.x, s.block_y = b.y, s.block_angle = b.angle;
  s.agent_vx = world_->agent_vx, s.agent_vy = world_->agent_vy;
  return s;
}

Pose2 PushTEnv::block_pose() const {
  const b2Vec2 p = world_->block->GetPosition();
  return {p.x * kPixelsPerMeter, p.y * kPixelsPerMeter, world_->block->GetAngle()};
}

double PushTEnv::coverage() const { return tee_coverage(block_pose(), kPushTGoal); }

namespace {

// A polygon's edges as DrawOptions.draw_polygon strokes them: segments of radius 2 with round ends.
void stroke_polygon(RasterCanvas& canvas, const Polygon2& polygon, double radius, Rgb color) {
  const std::size_t n = polygon.size();
  for (std::size_t i = 0; i < n; ++i) {
    const Point2 a = polygon[i], b = polygon[(i + 1) % n];
    const double len = std::hypot(b.x - a.x, b.y - a.y);
    if (len > 0.0) {
      const double nx = -(b.y - a.y) / len * radius, ny = (b.x - a.x) / len * radius;
      canvas.fill_convex_polygon({{a.x + nx, a.y + ny}, {b.x + nx, b.y + ny}, {b.x - nx, b.y - ny}, {a.x - nx, a.y - ny}},
                                 color);
    }
    canvas.fill_circle(a, radius, color);
  }
}

}  // namespace

void PushTEnv::render(std::vector<std::uint8_t>& rgb, int size) const {
  if (size < 1 || size > 4096) throw UsageError("PushTEnv::render: size " + std::to_string(size) + " must be within 1..4096");
  const double scale = size / kPushTWorkspace;
  RasterCanvas canvas(size, size, kBackground, config_.render_supersample);
  auto to_pixels = [scale](Polygon2 polygon) {
    for (Point2& p : polygon) p = {p.x * scale, p.y * scale};
    return polygon;
  };
  // The original's order: goal, then the space's shapes (walls, agent, block).
  for (const Polygon2& part : tee_parts_world(kPushTGoal)) canvas.fill_convex_polygon(to_pixels(part), kGoalColor);
  for (const WallSegment& w : kWalls) {
    stroke_polygon(canvas, to_pixels({{w.ax, w.ay}, {w.bx, w.by}}), kWallRadius * scale, kWallColor);
  }
  const PushTState s = state();
  const Point2 agent{s.agent_x * scale, s.agent_y * scale};
  canvas.fill_circle(agent, kPushTAgentRadius * scale, kAgentOutline);
  canvas.fill_circle(agent, kAgentInnerRadius * scale, kAgentFill);
  for (const Polygon2& part : tee_parts_world(block_pose())) {
    const Polygon2 pixels = to_pixels(part);
    canvas.fill_convex_polygon(pixels, kBlockFill);
    stroke_polygon(canvas, pixels, kOutlineRadius * scale, kBlockOutline);
  }
  rgb = canvas.to_rgb();
}

std::vector<std::uint8_t> PushTEnv::render() const {
  std::vector<std::uint8_t> rgb;
  render(rgb, config_.render_size);
  return rgb;
}

}  // namespace sparsevit::envs
