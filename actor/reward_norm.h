#pragma once
// actor.reward_norm: each reward divided by a running estimate of the standard deviation of the
// discounted return, as gym's NormalizeReward did before gymnasium 0.27 for CleanRL's PPO on MuJoCo
// (gymnasium 0.27 on restarts G only at a termination, before adding its reward). Per env the
// actor keeps G = gamma G + r (0 again after an episode ends); after each step of a group of envs
// their G update a running mean and variance over every G so far (the parallel-variance update of
// RunningMeanStd, from count 1e-4, mean 0, variance 1), and their rewards become
// r / sqrt(variance + epsilon). Episode returns in the metrics stay the env's own (the vector env
// counts them before this); the replay (and its dumps) hold the normalised rewards. Each actor keeps
// its own statistics; they are not checkpointed (a resumed run starts them again, as its envs).
#include <cstdint>
#include <vector>

namespace mpirl::actor {

class RewardNormalizer {
 public:
  RewardNormalizer(int64_t num_envs, double gamma, double epsilon = 1e-8);
  // Envs first..first+n-1 took one step: reward[i * stride] (env first + i) is replaced by its
  // normalised value; terminated / truncated (same stride) end their returns.
  void step(int64_t first, int64_t n, float* reward, const uint8_t* terminated, const uint8_t* truncated,
            int64_t stride);
  double count() const { return count_; }
  double mean() const { return mean_; }
  double var() const { return var_; }

 private:
  double gamma_, eps_;
  std::vector<double> ret_;  // [num_envs]: the discounted return of each env's episode so far
  double count_ = 1e-4, mean_ = 0, var_ = 1;
};

}  // namespace mpirl::actor
