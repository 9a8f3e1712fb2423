#include "envs/registry.h"

#include <algorithm>
#include <functional>
#include <map>

#include "envs/builtin.h"
#include "envs/minatar.h"
#include "envs/mujoco_locomotion.h"
#include "envs/popgym.h"
#include "envs/python/py_vector_env.h"
#include "core/error.h"

namespace mpirl::envs {
namespace {
using Factory = std::function<std::unique_ptr<Env>(uint64_t, const EnvOptions&)>;
void add_popgym(std::map<std::string, Factory>& m) {
  const char* level[] = {"Easy", "Medium", "Hard"};
  const int rp_decks[] = {1, 2, 3}, rp_k[] = {4, 32, 64}, rf_decks[] = {1, 8, 16}, cr_decks[] = {1, 2, 4};
  const int scp_len[] = {200, 400, 600};
  const CountRecall::By cr_by[] = {CountRecall::By::Color, CountRecall::By::Suit, CountRecall::By::Rank};
  for (int i = 0; i < 3; ++i) {
    std::string rp = std::string("RepeatPrevious") + level[i], rf = std::string("RepeatFirst") + level[i];
    std::string cr = std::string("CountRecall") + level[i], sc = std::string("StatelessCartPole") + level[i];
    int d = rp_decks[i], k = rp_k[i], fd = rf_decks[i], cd = cr_decks[i], len = scp_len[i];
    auto by = cr_by[i];
    m[rp] = [d, k, rp](uint64_t s, const EnvOptions&) { return std::make_unique<RepeatPrevious>(s, d, k, rp.c_str()); };
    m[rf] = [fd, rf](uint64_t s, const EnvOptions&) { return std::make_unique<RepeatFirst>(s, fd, rf.c_str()); };
    m[cr] = [cd, by, cr](uint64_t s, const EnvOptions&) { return std::make_unique<CountRecall>(s, cd, by, cr.c_str()); };
    m[sc] = [len, sc](uint64_t s, const EnvOptions&) { return std::make_unique<StatelessCartPole>(s, len, sc.c_str()); };
  }
}

const std::map<std::string, Factory>& registry() {
  static const std::map<std::string, Factory> r = [] {
    std::map<std::string, Factory> m = {
        {"CartPole-v1", [](uint64_t s, const EnvOptions&) { return std::make_unique<CartPole>(s); }},
        {"Pendulum-v1", [](uint64_t s, const EnvOptions&) { return std::make_unique<Pendulum>(s); }},
        {"Synthetic", [](uint64_t s, const EnvOptions& o) { return std::make_unique<Synthetic>(s, o); }},
    };
    add_popgym(m);
    for (const std::string& g : minatar::game_names())
      m[minatar_id(g)] = [g](uint64_t s, const EnvOptions& o) {
        return std::make_unique<MinAtarEnv>(g, s, minatar_options(g, o.kwargs));
      };
    for (const std::string& id : mujoco_env_ids())
      m[id] = [id](uint64_t s, const EnvOptions&) { return std::make_unique<MujocoLocomotion>(id, s); };
    return m;
  }();
  return r;
}
}  // namespace

std::unique_ptr<Env> make_env(const std::string& id, uint64_t seed, const EnvOptions& opts) {
  if (is_python_env(id))
    throw ConfigError(fmt::format("config key 'env.id' = \"{}\": Python envs run only as vector envs (mpirl train); "
                                  "single-env code takes built-in envs only (make_vector_env takes both)", id));
  auto it = registry().find(id);
  if (it == registry().end())
    throw ConfigError(fmt::format("config key 'env.id' = \"{}\": expected one of \"{}\", or a Python env "
                                  "gym:<id>, py:<module>:<factory>, ale:<game>, envpool:<task> or minatar:<game>", id, fmt::join(env_ids(), "\", \"")));
  const bool takes_kwargs = it->first.find("-MinAtar") != std::string::npos;
  if (!takes_kwargs && !kwargs_object(opts.kwargs).empty())
    throw ConfigError(fmt::format("config key 'env.kwargs' = '{}': the built-in env \"{}\" takes no keyword "
                                  "arguments (the MinAtar ports and Python envs do)", opts.kwargs, id));
  return it->second(seed, opts);
}

std::vector<std::string> env_ids() {
  std::vector<std::string> ids;
  for (auto& [k, _] : registry()) ids.push_back(k);
  return ids;
}

EnvOptions env_options(const Config& cfg) {
  EnvOptions o;
  o.obs_dim = cfg.env.obs_dim;
  o.num_actions = cfg.env.num_actions;
  o.episode_length = cfg.env.episode_length;
  o.step_cost_us = cfg.env.step_cost_us;
  o.cost_sleep = cfg.env.cost_mode == "sleep";
  o.kwargs = cfg.env.kwargs;
  return o;
}

EnvSpec env_spec(const Config& cfg) {
  // Every rank asks (learners, replay, actors); a Python env is made once per process for it.
  static std::string cached_key;
  static EnvSpec cached;
  if (is_python_env(cfg.env.id)) {
    std::string key = cfg.env.id + '\n' + cfg.env.kwargs;
    if (key != cached_key) cached = python_env_spec(cfg.env.id, cfg.env.kwargs), cached_key = key;
    return cached;
  }
  return make_env(cfg.env.id, 0, env_options(cfg))->spec();
}

std::unique_ptr<VectorEnv> make_vector_env(const Config& cfg, int num_envs, uint64_t seed) {
  if (is_python_env(cfg.env.id)) return std::make_unique<PyVectorEnv>(cfg.env.id, num_envs, seed, cfg.env.kwargs);
  return std::make_unique<BuiltinVectorEnv>(cfg.env.id, num_envs, seed, env_options(cfg));
}

}  // namespace mpirl::envs
