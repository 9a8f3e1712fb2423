#pragma once
// E environments stepped in lock-step with auto-reset. Outputs go straight into caller-owned
// strided buffers (e.g. column t of an env-major rollout), so stepping copies nothing twice.
#include <memory>
#include <vector>

#include "envs/env.h"

namespace mpirl::envs {

// Where one step's outputs go: row e of each array starts at base + e * stride (in elements).
struct StepOutputs {
  float* obs = nullptr;  // next observation (the first of a new episode where one ended)
  int64_t obs_stride = 0;
  uint8_t* is_init = nullptr;  // 1 where `obs` starts an episode
  int64_t is_init_stride = 1;
  float* reward = nullptr;
  uint8_t* terminated = nullptr;
  uint8_t* truncated = nullptr;
  int64_t scalar_stride = 1;  // stride of reward/terminated/truncated
};

struct EpisodeStat {
  float ret;
  int32_t length;
};

class VectorEnv {
 public:
  // Seeds env e with hash(seed, e): different seeds give different streams, equal seeds equal ones.
  VectorEnv(const std::string& id, int num_envs, uint64_t seed, const EnvOptions& opts = {});
  // Takes ownership of already built envs (all with the same spec).
  explicit VectorEnv(std::vector<std::unique_ptr<Env>> envs);
  const EnvSpec& spec() const { return envs_[0]->spec(); }
  int size() const { return int(envs_.size()); }

  // Resets every env; writes first observations and is_init = 1.
  void reset(float* obs, int64_t obs_stride, uint8_t* is_init, int64_t is_init_stride);
  // Steps every env with actions (discrete: int64 [E]; box: float32 [E, A]).
  // Where an episode ended, the last observation goes to final_obs row e (contiguous [E, D]) and
  // `ended` is set, then the env is reset. Non-finite observations or rewards throw mpirl::Error.
  void step(const int64_t* discrete, const float* box, const StepOutputs& out);

  const std::vector<uint8_t>& ended() const { return ended_; }
  const float* final_obs(int e) const { return final_obs_.data() + size_t(e) * size_t(spec().obs_size()); }
  // Episodes finished since the last call.
  std::vector<EpisodeStat> take_finished();

 private:
  std::vector<std::unique_ptr<Env>> envs_;
  std::vector<float> final_obs_;
  std::vector<uint8_t> ended_;
  std::vector<double> ep_return_;
  std::vector<int32_t> ep_length_;
  std::vector<EpisodeStat> finished_;
};

uint64_t mix_seed(uint64_t seed, uint64_t stream);

}  // namespace mpirl::envs
