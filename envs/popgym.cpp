#include "envs/popgym.h"

#include <algorithm>
#include <numeric>

#include <fmt/format.h>

namespace mpirl::envs {
namespace {

void one_hot(float* obs, int n, int i) {
  std::fill(obs, obs + n, 0.f);
  obs[i] = 1.f;
}

EnvSpec card_spec(const char* id, int64_t obs, int64_t actions, int64_t max_steps, std::string desc) {
  EnvSpec s;
  s.id = id;
  s.obs_shape = {obs};
  s.discrete = true;
  s.num_actions = actions;
  s.max_episode_steps = max_steps;
  s.description = std::move(desc);
  return s;
}

}  // namespace

void Deck::shuffle(std::mt19937_64& rng) {
  std::iota(cards_.begin(), cards_.end(), 0);
  std::shuffle(cards_.begin(), cards_.end(), rng);
}

// ---- RepeatPrevious ----
RepeatPrevious::RepeatPrevious(uint64_t seed, int decks, int k, const char* id) : rng_(seed), deck_(decks), k_(k) {
  spec_ = card_spec(id, 4, 4, deck_.size() - 1,
                    fmt::format("POPGym RepeatPrevious: name the suit of the card {} steps back; {} deck(s)", k - 1,
                                decks));
}

void RepeatPrevious::reset(void* out) {
  float* obs = static_cast<float*>(out);
  deck_.shuffle(rng_);
  dealt_ = 1;
  one_hot(obs, 4, Deck::suit(deck_.card(0)));
}

StepResult RepeatPrevious::step(const Action& a, void* out) {
  float* obs = static_cast<float*>(out);
  StepResult r;
  const float scale = 1.f / float(deck_.size() - k_);
  r.truncated = deck_.size() - dealt_ == 1;
  if (dealt_ >= k_) r.reward = a.index == Deck::suit(deck_.card(dealt_ - k_)) ? scale : -scale;
  one_hot(obs, 4, Deck::suit(deck_.card(dealt_)));
  ++dealt_;
  return r;
}

// ---- RepeatFirst ----
RepeatFirst::RepeatFirst(uint64_t seed, int decks, const char* id) : rng_(seed), deck_(decks) {
  spec_ = card_spec(id, 4, 4, deck_.size() - 1,
                    fmt::format("POPGym RepeatFirst: name the suit of the first card; {} deck(s)", decks));
}

void RepeatFirst::reset(void* out) {
  float* obs = static_cast<float*>(out);
  deck_.shuffle(rng_);
  dealt_ = 1;
  one_hot(obs, 4, Deck::suit(deck_.card(0)));
}

StepResult RepeatFirst::step(const Action& a, void* out) {
  float* obs = static_cast<float*>(out);
  StepResult r;
  const float scale = 1.f / float(deck_.size() - 1);
  r.reward = a.index == Deck::suit(deck_.card(0)) ? scale : -scale;
  r.truncated = deck_.size() - dealt_ == 1;
  one_hot(obs, 4, Deck::suit(deck_.card(dealt_)));
  ++dealt_;
  return r;
}

// ---- CountRecall ----
CountRecall::CountRecall(uint64_t seed, int decks, By by, const char* id)
    : rng_(seed), values_(decks), queries_(decks), by_(by),
      distinct_(by == By::Color ? 2 : by == By::Suit ? 4 : 13), counts_(size_t(distinct_)) {
  // The answer is a count in 0 .. max_count (every card of one value dealt): max_count + 1 actions.
  const int max_count = values_.size() / distinct_;
  spec_ = card_spec(id, 2 * distinct_, max_count + 1, values_.size() - 1,
                    fmt::format("POPGym CountRecall: say how often the queried card value has been dealt; {} deck(s) "
                                "of {} values",
                                decks, distinct_));
}

int CountRecall::value_of(int card) const {
  switch (by_) {
    case By::Color: return Deck::color(card);
    case By::Suit: return Deck::suit(card);
    case By::Rank: return Deck::rank(card);
  }
  return 0;
}

void CountRecall::write_obs(float* obs) const {
  one_hot(obs, distinct_, value_);
  one_hot(obs + distinct_, distinct_, query_);
}

void CountRecall::reset(void* out) {
  float* obs = static_cast<float*>(out);
  values_.shuffle(rng_);
  queries_.shuffle(rng_);
  std::fill(counts_.begin(), counts_.end(), 0);
  value_ = value_of(values_.card(0));
  query_ = value_of(queries_.card(0));
  ++counts_[size_t(value_)];
  dealt_ = 1;
  write_obs(obs);
}

StepResult CountRecall::step(const Action& a, void* out) {
  float* obs = static_cast<float*>(out);
  StepResult r;
  const int prev_count = counts_[size_t(query_)];
  value_ = value_of(values_.card(dealt_));
  query_ = value_of(queries_.card(dealt_));
  ++counts_[size_t(value_)];
  ++dealt_;
  const float scale = 1.f / float(values_.size() - 1);
  r.reward = a.index == prev_count ? scale : -scale;
  r.terminated = dealt_ == values_.size();
  write_obs(obs);
  return r;
}

// ---- StatelessCartPole ----
StatelessCartPole::StatelessCartPole(uint64_t seed, int max_steps, const char* id) : cp_(seed) {
  spec_.id = id;
  spec_.obs_shape = {2};
  spec_.discrete = true;
  spec_.num_actions = 2;
  spec_.max_episode_steps = max_steps;
  spec_.description = fmt::format("POPGym StatelessCartPole: CartPole seeing only x and theta; {} steps", max_steps);
}

void StatelessCartPole::reset(void* out) {
  float* obs = static_cast<float*>(out);
  cp_.reset(full_);
  steps_ = 0;
  obs[0] = full_[0];
  obs[1] = full_[2];
}

StepResult StatelessCartPole::step(const Action& a, void* out) {
  float* obs = static_cast<float*>(out);
  auto inner = cp_.step(a, full_);  // its own 500-step limit is ignored: ours may be longer
  ++steps_;
  obs[0] = full_[0];
  obs[1] = full_[2];
  StepResult r;
  r.reward = 1.f / float(spec_.max_episode_steps);
  r.terminated = inner.terminated;
  r.truncated = !r.terminated && steps_ >= spec_.max_episode_steps;
  return r;
}

}  // namespace mpirl::envs
