#pragma once
// Sampling and log-probabilities from distribution rows, in plain C++: the part of acting that
// needs no network. models::Acting runs it after its own forward pass (local inference); an actor
// with central inference runs it on the rows an inference rank sent back, so the behaviour policy
// it records (the rows, the sampled action, its log-probability) is exactly the one it sampled from.
//
// Its own counter-free generator (xoshiro256**, seeded by the caller): a run's actions depend only
// on its seed and the rows. Discrete: Gumbel-max over the logits; log pi(a) = l_a - logsumexp(l).
// Box: mean + exp(log_std) * N(0, 1) (Box-Muller); log pi(a) = sum(-z^2/2 - log_std - log(2 pi)/2).
// Epsilon-greedy (R2D2's actors): row e's action is uniform with probability eps[e], else the largest
// logit (the largest Q: models' logits are R2D2's advantages); log pi(a) is that mixture's.
#include <cstdint>
#include <vector>

#include "envs/env.h"

namespace mpirl::models {

// Ape-X's exploration ladder (Horgan et al. 2018), R2D2's too: env i of N (over all actors) acts
// with epsilon = base^(1 + alpha i / (N - 1)); a single env gets base.
double apex_epsilon(int64_t i, int64_t n, double base, double alpha);
// The epsilons of `count` consecutive envs from global index `first` (learner.algo = "r2d2"), or an
// empty vector for the other algorithms (they sample the softmax).
struct EpsilonLadder {
  double base = 0.4, alpha = 7;
};
std::vector<double> epsilons(const EpsilonLadder& l, int64_t first, int64_t count, int64_t total);

class Sampler {
 public:
  Sampler(const envs::EnvSpec& spec, uint64_t seed);

  // Where one step's per-env outputs go: row e of the distribution at dist + e * dist_stride
  // (dist_size() floats), its log-probability at logp[e * logp_stride]. nullptr skips a field.
  struct Rows {
    float* dist = nullptr;
    int64_t dist_stride = 0;
    float* logp = nullptr;
    int64_t logp_stride = 0;
  };
  // n rows of logits (`stride` floats apart) -> actions[0..n) (greedy: the mode, with its logp).
  // eps (n values, or nullptr): epsilon-greedy instead of sampling the softmax (greedy wins).
  void discrete(const float* logits, int64_t stride, int64_t n, int64_t* actions, const Rows& out, bool greedy,
                const double* eps = nullptr);
  // n rows of means (`mean_stride` apart) and log-stds (`log_std_stride` apart; 0: shared by all rows)
  // -> actions [n, A]. The recorded row is mean ++ log_std.
  void box(const float* mean, int64_t mean_stride, const float* log_std, int64_t log_std_stride, int64_t n,
           float* actions, const Rows& out, bool greedy);
  // Either of the two on rows in the rollout's format (dist_size() floats each: logits, or mean ++ log_std).
  // Actions: int64 [n] or float32 [n, A].
  void rows(const float* dist, int64_t stride, int64_t n, void* actions, const Rows& out, bool greedy,
            const double* eps = nullptr);

 private:
  struct Rng {
    uint64_t s[4];
    explicit Rng(uint64_t seed);
    uint64_t next();
    double uniform();  // in (0, 1)
    double normal();
    double spare = 0;
    bool has_spare = false;
  };
  envs::EnvSpec spec_;
  Rng rng_;
  std::vector<double> scratch_;
};

}  // namespace mpirl::models
