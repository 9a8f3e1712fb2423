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

MinAtarEnv::MinAtarEnv(const std::string& game, uint64_t seed, double sticky, minatar::Rng* draws)
    : game_(minatar::make_game(game)), own_(seed), rng_(draws ? draws : &own_), sticky_(sticky) {
  actions_ = game_->minimal_actions();
  spec_.id = minatar_id(game);
  spec_.obs_shape = {game_->channels(), 10, 10};
  spec_.obs_uint8 = true;
  spec_.discrete = true;
  spec_.num_actions = int64_t(actions_.size());
  spec_.max_episode_steps = 0;
  spec_.description = fmt::format("MinAtar {} (C++ port of the minatar package): [{}, 10, 10] images of 0/255, "
                                  "{} actions, sticky actions {}", game, game_->channels(), actions_.size(), sticky);
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
  write(obs);
}

StepResult MinAtarEnv::step(const Action& a, void* obs) {
  int code = actions_[size_t(a.index)];
  if (rng_->rand() < sticky_) code = last_action_;
  last_action_ = code;
  const minatar::Outcome o = game_->act(code, *rng_);
  write(obs);
  StepResult r;
  r.reward = float(o.reward);
  r.terminated = o.terminal;
  return r;
}

}  // namespace mpirl::envs
