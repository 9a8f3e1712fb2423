#pragma once
// MinAtar (Young & Tian 2019; the `minatar` package, version pinned in scripts/versions.env) in
// C++: Asterix, Breakout, Freeway, Seaquest and Space Invaders with the package's dynamics, its
// sticky actions (0.1) and difficulty ramping, and its observation (10 x 10 x C booleans, here
// uint8 channels-first [C, 10, 10] of 0/255 as the Python path "minatar:<game>" writes them). The
// ids are "<Game>-MinAtar" (gymnax's names); actions index the game's minimal action set.
//
// Each game draws its random numbers through minatar::Rng in the package's order (rand() for a
// uniform double, randint(lo, hi) for an integer in [lo, hi)), so that tests/envs/minatar_parity.py
// can replay the package's own draws into these games and compare every step.
#include <cstdint>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "envs/env.h"

namespace mpirl::envs {
namespace minatar {

class Rng {
 public:
  virtual ~Rng() = default;
  virtual double rand() = 0;                              // uniform in [0, 1)
  virtual int64_t randint(int64_t lo, int64_t hi) = 0;    // uniform in [lo, hi)
};

// A seeded generator (mpirl's own stream; not numpy's).
class SeededRng final : public Rng {
 public:
  explicit SeededRng(uint64_t seed) : g_(seed) {}
  double rand() override { return double(g_() >> 11) * 0x1.0p-53; }
  int64_t randint(int64_t lo, int64_t hi) override { return std::uniform_int_distribution<int64_t>(lo, hi - 1)(g_); }

 private:
  std::mt19937_64 g_;
};

// The package's full action codes.
enum Act : int { kNoop = 0, kLeft = 1, kUp = 2, kRight = 3, kDown = 4, kFire = 5 };

struct Outcome {
  int reward = 0;
  bool terminal = false;
};

// One game: the package's Env class. State channels are written as 0/1 bytes, channels first.
class Game {
 public:
  virtual ~Game() = default;
  virtual void reset(Rng& rng) = 0;
  virtual Outcome act(int action, Rng& rng) = 0;  // a full action code (Act)
  virtual void state(uint8_t* chw) const = 0;    // channels() x 10 x 10, zeroed first
  virtual int channels() const = 0;
  virtual std::vector<int> minimal_actions() const = 0;
};

// "asterix", "breakout", "freeway", "seaquest", "space_invaders" (the package's module names).
std::unique_ptr<Game> make_game(const std::string& name, bool ramping = true);
const std::vector<std::string>& game_names();

}  // namespace minatar

// The settings, as the package's Environment(sticky_action_prob=, difficulty_ramping=) names
// them, and an episode cap. The defaults are the package's (the MinAtar paper's). env.kwargs =
// '{"preset": "gymnax"}' is gymnax's set-up, which its PPO baselines used: no sticky actions and
// gymnax's max_steps_in_episode per game (1000; Freeway 2500, one step before the game's own
// timer ends it), where mpirl truncates (gymnax's PPO treats the cap as terminal). Keys
// given beside a preset override it.
struct MinAtarOptions {
  double sticky_action_prob = 0.1;
  bool difficulty_ramping = true;
  int64_t max_episode_steps = 0;  // 0 = no cap; N = truncated after N steps (bootstrapped)
};
// Parses env.kwargs (a JSON object, "" = defaults) for `game` (a game_names() entry); throws
// ConfigError naming env.kwargs and the key for an unknown key, a wrong type or value.
MinAtarOptions minatar_options(const std::string& game, const std::string& kwargs_json);
// env.kwargs as a JSON object: blank is {}; anything but an object is a ConfigError naming it.
nlohmann::json kwargs_object(const std::string& kwargs_json);

// A MinAtar game as an Env: the package's Environment wrapper (a sticky action repeats the last
// full action code with probability sticky_action_prob, drawn before each act, and the last action carries
// over episodes, as there). With `draws` set, every random number comes from it (the parity test);
// otherwise from a generator seeded with `seed`.
class MinAtarEnv final : public Env {
 public:
  MinAtarEnv(const std::string& game, uint64_t seed, const MinAtarOptions& opts = {}, minatar::Rng* draws = nullptr);
  const EnvSpec& spec() const override { return spec_; }
  void reset(void* obs) override;
  StepResult step(const Action& a, void* obs) override;

 private:
  void write(void* obs) const;
  EnvSpec spec_;
  std::unique_ptr<minatar::Game> game_;
  minatar::SeededRng own_;
  minatar::Rng* rng_;
  std::vector<int> actions_;
  MinAtarOptions opts_;
  int64_t steps_ = 0;
  int last_action_ = minatar::kNoop;
};

// "Breakout-MinAtar" for "breakout" and so on.
std::string minatar_id(const std::string& game);

}  // namespace mpirl::envs
