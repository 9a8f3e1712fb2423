#pragma once
// E environments stepped in lock-step with auto-reset. Outputs go straight into caller-owned
// strided buffers (e.g. column t of an env-major rollout), so stepping copies nothing twice.
// VectorEnv is the interface the actor steps; BuiltinVectorEnv loops over compiled-in Envs and
// envs/python/ steps a Gymnasium vector env in an embedded interpreter. Both keep the same
// bookkeeping (final observations, ended flags, finished-episode statistics) in this base class.
#include <cstring>
#include <memory>
#include <vector>

#include "envs/env.h"

namespace mpirl::envs {

// Where one step's outputs go: row e of each array starts at base + e * stride (in elements).
// Observations are float32 or uint8 as the spec says (EnvSpec::obs_uint8); their stride counts
// elements of that type.
struct StepOutputs {
  void* obs = nullptr;  // next observation (the first of a new episode where one ended)
  int64_t obs_stride = 0;
  uint8_t* is_init = nullptr;  // 1 where `obs` starts an episode
  int64_t is_init_stride = 1;
  float* reward = nullptr;
  uint8_t* terminated = nullptr;
  uint8_t* truncated = nullptr;
  int64_t scalar_stride = 1;  // stride of reward/terminated/truncated
};

// One RGB image (HWC, uint8) of an env, for videos.
struct Frame {
  int h = 0, w = 0;
  std::vector<uint8_t> rgb;  // h * w * 3
};

struct EpisodeStat {
  float ret;
  int32_t length;
};

class VectorEnv {
 public:
  virtual ~VectorEnv() = default;
  virtual const EnvSpec& spec() const = 0;
  int size() const { return int(ended_.size()); }

  // Resets every env; writes first observations and is_init = 1.
  virtual void reset(void* obs, int64_t obs_stride, uint8_t* is_init, int64_t is_init_stride) = 0;
  // Steps every env with actions (discrete: int64 [E]; box: float32 [E, A]).
  // Where an episode ended, the last observation goes to final_obs row e and
  // `ended` is set, then the env is reset and `obs` row e holds the reset observation with
  // is_init = 1: no step of a rollout is ever an auto-reset step. Non-finite observations or
  // rewards, and anything else an env does wrong, throw mpirl::Error naming the env and the step.
  virtual void step(const int64_t* discrete, const float* box, const StepOutputs& out) = 0;

  // Env e's current state as an image, where the env renders one (Python envs made with
  // render_mode="rgb_array"); false otherwise (mpirl eval --video then draws what it can itself).
  virtual bool render(int e, Frame& f) { return false; }

  const std::vector<uint8_t>& ended() const { return ended_; }
  // The last observation of env e's episode that ended at the last step (obs_bytes() bytes).
  const uint8_t* final_obs_bytes(int e) const { return final_obs_.data() + size_t(e) * size_t(obs_bytes_); }
  const float* final_obs(int e) const;  // float32 specs only
  // Episodes finished since the last call.
  std::vector<EpisodeStat> take_finished();

 protected:
  void init_bookkeeping(int num_envs, const EnvSpec& spec);
  void start_episode(int e) {
    ep_return_[size_t(e)] = 0;
    ep_length_[size_t(e)] = 0;
  }
  // Counts one step of env e; where it ended, records the episode and copies its last observation.
  void count_step(int e, float reward, bool done, const void* last_obs) {
    ep_return_[size_t(e)] += reward;
    ep_length_[size_t(e)] += 1;
    ended_[size_t(e)] = done;
    if (done) {
      std::memcpy(final_obs_.data() + e * obs_bytes_, last_obs, size_t(obs_bytes_));
      finished_.push_back({float(ep_return_[size_t(e)]), ep_length_[size_t(e)]});
      start_episode(e);
    }
  }
  int32_t episode_step(int e) const { return ep_length_[size_t(e)]; }

 private:
  int64_t obs_bytes_ = 0;
  bool obs_uint8_ = false;
  std::vector<uint8_t> final_obs_;
  std::vector<uint8_t> ended_;
  std::vector<double> ep_return_;
  std::vector<int32_t> ep_length_;
  std::vector<EpisodeStat> finished_;
};

// The compiled-in envs of envs/registry.h, one Env object per index.
class BuiltinVectorEnv final : public VectorEnv {
 public:
  // Seeds env e with hash(seed, e): different seeds give different streams, equal seeds equal ones.
  BuiltinVectorEnv(const std::string& id, int num_envs, uint64_t seed, const EnvOptions& opts = {});
  // Takes ownership of already built envs (all with the same spec).
  explicit BuiltinVectorEnv(std::vector<std::unique_ptr<Env>> envs);
  const EnvSpec& spec() const override { return envs_[0]->spec(); }
  void reset(void* obs, int64_t obs_stride, uint8_t* is_init, int64_t is_init_stride) override;
  void step(const int64_t* discrete, const float* box, const StepOutputs& out) override;

 private:
  std::vector<std::unique_ptr<Env>> envs_;
};

uint64_t mix_seed(uint64_t seed, uint64_t stream);

}  // namespace mpirl::envs
