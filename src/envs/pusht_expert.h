// A scripted PushT expert: from the current state, the next commanded agent position.
// Strategy (docs/pusht.md): pick the contact on the T's outline whose frictionless push moves
// the block most directly toward the goal pose (translation and rotation together), discounted
// by how far the agent is from it, go around the block to a point behind that contact without
// touching it, then push along the contact's normal by the distance the linear model asks for;
// repeat. The default command is a point at most 30 px from the agent toward that waypoint and
// depends on the agent position and block pose alone (no memory): demonstrations a policy that
// sees the image and the agent position can reproduce.
#pragma once

#include "envs/pusht_env.h"

namespace sparsevit::envs {

struct PushTExpertConfig {
  // Pixels of position error worth one radian of angle error in the push choice.
  double angle_weight = 80.0;
  // Gap kept between the agent and the block while going around it (px).
  double clearance = 4.0;
  // The longest push commanded at once (px).
  double max_push = 60.0;
  // Keep the current contact while its score is at least this share of the best one; 1 keeps
  // none (the expert is then a function of the state alone, with no memory a policy cannot see).
  double hysteresis = 1.0;
  // The command lies at most this far from the agent (px), toward the planned waypoint; 0: the
  // waypoint itself. Bounded commands are what a human with a mouse gives (DP's demonstrations).
  double max_command_distance = 30.0;
  // Contacts are ranked by their push rate / (1 + distance from the agent / travel_scale) (px);
  // 0: by the rate alone.
  double travel_scale = 100.0;

  // The expert before issue #32: waypoint commands (up to ~75 px ahead) and contact hysteresis.
  static PushTExpertConfig waypoints();
};

class PushTExpert {
 public:
  explicit PushTExpert(PushTExpertConfig config = {});
  // Forgets the current contact (call at each episode's start).
  void reset();
  // The commanded agent position for the next control step.
  Point2 act(const PushTState& state);

 private:
  Point2 plan(const PushTState& state);  // the next waypoint (unbounded)
  PushTExpertConfig config_;
  int contact_ = -1;  // index of the chosen contact, -1 for none
};

}  // namespace sparsevit::envs
