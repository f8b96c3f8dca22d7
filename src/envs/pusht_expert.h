// A scripted PushT expert: from the current state, the next commanded agent position.
// Strategy (docs/pusht.md): pick the contact on the T's outline whose frictionless push moves
// the block most directly toward the goal pose (translation and rotation together), go around
// the block to a point behind that contact without touching it, then push along the contact's
// normal by the distance the linear model asks for; repeat.
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
  // Keep the current contact while its score is at least this share of the best one.
  double hysteresis = 0.5;
};

class PushTExpert {
 public:
  explicit PushTExpert(PushTExpertConfig config = {});
  // Forgets the current contact (call at each episode's start).
  void reset();
  // The commanded agent position for the next control step.
  Point2 act(const PushTState& state);

 private:
  PushTExpertConfig config_;
  int contact_ = -1;  // index of the chosen contact, -1 for none
};

}  // namespace sparsevit::envs
