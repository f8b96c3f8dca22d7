#include "envs/pusht_expert.h"

namespace sparsevit::envs {
PushTExpert::PushTExpert(PushTExpertConfig config) : config_(config) {}
void PushTExpert::reset() { contact_ = -1; }
Point2 PushTExpert::act(const PushTState& s) { return {s.block_x, s.block_y}; }
}  // namespace sparsevit::envs
