#include "envs/minatar.h"

#include <cstring>

#include <fmt/format.h>

#include "core/error.h"
#include "envs/minatar/games.h"

namespace mpirl::envs {
namespace minatar {

const std::vector<std::string>& game_names() {
  static const std::vector<std::string> n = {"asterix", "breakout", "freeway", "seaquest", "space_invaders"};
  return n;
}

std::unique_ptr<Game> make_game(const std::string& name, bool ramping) {
  if (name == "asterix") return make_asterix(ramping);
  if (name == "breakout") return make_breakout(ramping);
  if (name == "freeway") return make_freeway(ramping);
  if (name == "seaquest") return make_seaquest(ramping);
  if (name == "space_invaders") return make_space_invaders(ramping);
  throw ConfigError(fmt::format("MinAtar game \"{}\": expected one of \"{}\"", name, fmt::join(game_names(), "\", \"")));
}

}  // namespace minatar

std::string minatar_id(const std::string& game) {
  if (game == "space_invaders") return "SpaceInvaders-MinAtar";
  std::string id = game;
  id[0] = char(id[0] - 'a' + 'A');
  return id + "-MinAtar";
}

nlohmann::json kwargs_object(const std::string& kwargs_json) {
  if (kwargs_json.find_first_not_of(" \t\r\n") == std::string::npos) return nlohmann::json::object();
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(kwargs_json);
  } catch (const nlohmann::json::exception& e) {
    throw ConfigError(fmt::format("config key 'env.kwargs' = '{}': not JSON ({})", kwargs_json, e.what()));
  }
  if (!j.is_object()) throw ConfigError(fmt::format("config key 'env.kwargs' = '{}': expected a JSON object", kwargs_json));
  return j;
}

MinAtarOptions minatar_options(const std::string& game, const std::string& kwargs_json) {
  MinAtarOptions o;
  const nlohmann::json j = kwargs_object(kwargs_json);
  const auto bad = [&](const std::string& why) {
    return ConfigError(fmt::format("config key 'env.kwargs' = '{}': {}", kwargs_json, why));
  };
  if (j.contains("preset")) {
    if (j["preset"] != "gymnax") throw bad(fmt::format("\"preset\" = {}: expected \"gymnax\"", j["preset"].dump()));
    o.sticky_action_prob = 0.0;
    o.max_episode_steps = game == "freeway" ? 2500 : 1000;  // gymnax's EnvParams.max_steps_in_episode
  }
  for (const auto& [k, v] : j.items()) {
    if (k == "preset")
      continue;
    else if (k == "sticky_action_prob" && v.is_number() && v.get<double>() >= 0 && v.get<double>() <= 1)
      o.sticky_action_prob = v.get<double>();
    else if (k == "difficulty_ramping" && v.is_boolean())
      o.difficulty_ramping = v.get<bool>();
    else if (k == "max_episode_steps" && v.is_number_integer() && v.get<int64_t>() >= 0)
      o.max_episode_steps = v.get<int64_t>();
    else if (k == "sticky_action_prob" || k == "difficulty_ramping" || k == "max_episode_steps")
      throw bad(fmt::format("\"{}\" = {}: expected {}", k, v.dump(),
                            k == "sticky_action_prob"   ? "a number in [0, 1]"
                            : k == "difficulty_ramping" ? "true or false"
                                                        : "an integer >= 0 (0 = no cap)"));
    else
      throw bad(fmt::format("unknown key \"{}\" for a MinAtar env (expected preset, sticky_action_prob, "
                            "difficulty_ramping, max_episode_steps)", k));
  }
  return o;
}

MinAtarEnv::MinAtarEnv(const std::string& game, uint64_t seed, const MinAtarOptions& opts, minatar::Rng* draws)
    : game_(minatar::make_game(game, opts.difficulty_ramping)), own_(seed), rng_(draws ? draws : &own_), opts_(opts) {
  actions_ = game_->minimal_actions();
  spec_.id = minatar_id(game);
  spec_.obs_shape = {game_->channels(), 10, 10};
  spec_.obs_uint8 = true;
  spec_.discrete = true;
  spec_.num_actions = int64_t(actions_.size());
  spec_.max_episode_steps = opts.max_episode_steps;
  spec_.description = fmt::format("MinAtar {} (C++ port of the minatar package): [{}, 10, 10] images of 0/255, "
                                  "{} actions, sticky actions {}{}", game, game_->channels(), actions_.size(),
                                  opts.sticky_action_prob, opts.difficulty_ramping ? "" : ", no difficulty ramping");
}

void MinAtarEnv::write(void* obs) const {
  auto* o = static_cast<uint8_t*>(obs);
  const size_t n = size_t(game_->channels()) * 100;
  std::memset(o, 0, n);
  game_->state(o);
  for (size_t i = 0; i < n; ++i) o[i] = o[i] ? 255 : 0;
}

void MinAtarEnv::reset(void* obs) {
  game_->reset(*rng_);
  steps_ = 0;
  write(obs);
}

StepResult MinAtarEnv::step(const Action& a, void* obs) {
  int code = actions_[size_t(a.index)];
  if (rng_->rand() < opts_.sticky_action_prob) code = last_action_;
  last_action_ = code;
  const minatar::Outcome o = game_->act(code, *rng_);
  write(obs);
  StepResult r;
  r.reward = float(o.reward);
  r.terminated = o.terminal;
  r.truncated = !o.terminal && opts_.max_episode_steps > 0 && ++steps_ >= opts_.max_episode_steps;
  return r;
}

}  // namespace mpirl::envs
