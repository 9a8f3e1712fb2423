#include "envs/vector_env.h"

#include <algorithm>
#include <cmath>

#include "envs/registry.h"
#include "core/error.h"

namespace mpirl::envs {

uint64_t mix_seed(uint64_t seed, uint64_t stream) {
  // splitmix64 over (seed, stream)
  uint64_t z = seed * 0x9E3779B97F4A7C15ull + stream + 0x632BE59BD9B4E019ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

void VectorEnv::init_bookkeeping(int num_envs, const EnvSpec& spec) {
  obs_bytes_ = spec.obs_bytes();
  obs_uint8_ = spec.obs_uint8;
  final_obs_.assign(size_t(num_envs) * size_t(obs_bytes_), 0);
  ended_.assign(size_t(num_envs), 0);
  ep_return_.assign(size_t(num_envs), 0.0);
  ep_length_.assign(size_t(num_envs), 0);
}

const float* VectorEnv::final_obs(int e) const {
  MPIRL_CHECK(!obs_uint8_, "final_obs(): the env's observations are uint8; use final_obs_bytes()");
  return reinterpret_cast<const float*>(final_obs_bytes(e));
}

std::vector<EpisodeStat> VectorEnv::take_finished() {
  std::vector<EpisodeStat> out;
  out.swap(finished_);
  return out;
}

namespace {
std::vector<std::unique_ptr<Env>> build(const std::string& id, int num_envs, uint64_t seed, const EnvOptions& opts) {
  MPIRL_CHECK(num_envs >= 1, "num_envs = {}", num_envs);
  std::vector<std::unique_ptr<Env>> envs;
  for (int e = 0; e < num_envs; ++e) envs.push_back(make_env(id, mix_seed(seed, uint64_t(e)), opts));
  return envs;
}
}  // namespace

BuiltinVectorEnv::BuiltinVectorEnv(const std::string& id, int num_envs, uint64_t seed, const EnvOptions& opts)
    : BuiltinVectorEnv(build(id, num_envs, seed, opts)) {}

BuiltinVectorEnv::BuiltinVectorEnv(std::vector<std::unique_ptr<Env>> envs) : envs_(std::move(envs)) {
  MPIRL_CHECK(!envs_.empty(), "a VectorEnv needs at least one env");
  init_bookkeeping(int(envs_.size()), spec());
}

void BuiltinVectorEnv::reset(void* obs_out, int64_t obs_stride, uint8_t* is_init, int64_t is_init_stride) {
  auto* obs = static_cast<uint8_t*>(obs_out);
  const int64_t row = obs_stride * spec().obs_elem_bytes();
  for (int e = 0; e < size(); ++e) {
    envs_[size_t(e)]->reset(obs + e * row);
    is_init[e * is_init_stride] = 1;
    start_episode(e);
  }
}

void BuiltinVectorEnv::step(const int64_t* discrete, const float* box, const StepOutputs& out) {
  const EnvSpec& sp = spec();
  const int64_t D = sp.obs_size(), A = sp.action_dim;
  for (int e = 0; e < size(); ++e) {
    Env& env = *envs_[size_t(e)];
    Action a;
    if (sp.discrete) {
      a.index = discrete[e];
      MPIRL_CHECK(a.index >= 0 && a.index < sp.num_actions, "action {} out of range for {}", a.index, sp.id);
    } else {
      a.values = box + e * A;
    }
    void* o = static_cast<uint8_t*>(out.obs) + e * out.obs_stride * sp.obs_elem_bytes();
    StepResult r = env.step(a, o);
    bool finite = std::isfinite(r.reward);
    const float* of = sp.obs_uint8 ? nullptr : static_cast<const float*>(o);  // bytes are always finite
    for (int64_t i = 0; of && i < D && finite; ++i) finite = std::isfinite(of[i]);
    if (!finite)
      throw Error(fmt::format("env '{}' (env index {}) returned a non-finite {} at episode step {}", sp.id, e,
                              std::isfinite(r.reward) ? "observation" : "reward", episode_step(e) + 1));
    const int64_t s = e * out.scalar_stride;
    out.reward[s] = r.reward;
    out.terminated[s] = r.terminated;
    out.truncated[s] = r.truncated;
    const bool done = r.terminated || r.truncated;
    count_step(e, r.reward, done, o);
    if (done) env.reset(o);
    out.is_init[e * out.is_init_stride] = done;
  }
}

}  // namespace mpirl::envs
