#include "learner/algorithms/algorithm.h"

namespace mpirl::learner {

LossOptions loss_options(const Config& cfg) {
  const auto& l = cfg.learner;
  LossOptions o;
  o.gamma = l.gamma;
  o.value_coef = l.value_coef;
  o.entropy_coef = l.entropy_coef;
  o.appo_clip = l.appo_clip;
  o.appo_proximal = l.appo_proximal;
  o.vtrace.rho_bar = l.rho_bar;
  o.vtrace.c_bar = l.c_bar;
  o.vtrace.pg_rho_bar = l.pg_rho_bar;
  o.vtrace.lambda = l.lambda;
  o.reward_scale = l.reward_scale;
  o.reward_clip = l.reward_clip;
  o.normalize_advantages = l.normalize_advantages;
  o.gae = l.advantages == "gae";
  return o;
}

}  // namespace mpirl::learner
