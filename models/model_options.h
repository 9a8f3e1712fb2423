#pragma once
// The [model] options as models/ takes them (models::model_options(cfg) makes them from a Config):
// what builds the built-in policy (models/policy.h) or names a Python module (models/python_model.h).
#include <cstdint>
#include <string>
#include <vector>

namespace mpirl::models {

struct ModelOptions {
  std::string encoder = "auto";  // auto | mlp | nature_cnn | impala_cnn | minatar_cnn (models/encoders.h)
  std::vector<int64_t> hidden{64, 64};  // the MLP encoder's layers (CNN encoders end in their own)
  std::string activation = "tanh";
  std::string core = "none";  // none | gru | lstm | lru | ssm | mingru | ffm
  int64_t core_size = 128;    // H
  int64_t core_state = 64;    // N (lru/ssm), memory traces (ffm)
  bool obs_norm = false;      // float observations: (obs - obs_shift) * obs_scale, clipped
  double obs_norm_clip = 10;
  // "shared": the value head reads the policy's features; "separate": its own MLP (`critic0`,
  // `critic1`, ... of the `hidden` widths) over the (normalised) observations, so that the value
  // loss never moves the policy's torso. The mlp encoder without a core only.
  std::string critic = "shared";
  // "orthogonal": the MLP torso's and the critic's layers orthogonal with gain sqrt(2), the policy
  // head with 0.01 and the value head with 1, biases 0 (PPO's usual set-up); "default": LibTorch's,
  // the policy head scaled by 0.01. CNN encoders and cores keep their own.
  std::string init = "default";
  double log_std_init = -0.5;  // box policies
  // "file.py:factory": the network is that PyTorch module (models/python_model.h) and the options
  // above except obs_norm/obs_norm_clip are the module's business; "" = the built-in network.
  std::string python;
  // act() writes duelling Q-values, V + A - mean_a A, as the rows instead of the bare head (same
  // argmax): R2D2's actors then compute their sequences' initial priorities from them
  // (r2d2.initial_priority = "actor"). Costs the value head per step.
  bool act_q = false;
  // uint8 observations into the MLP encoder on the CPU: the first layers of the torso and the
  // critic over the observations' nonzero entries only (models/sparse_input.h) in the learner's
  // forward() and unroll(). The same function; false: dense layers.
  bool sparse_input = true;
};

}  // namespace mpirl::models
