#pragma once
// Memory tasks with POPGym's definitions (Morad et al. 2023). Card observations are one-hot.
//   RepeatPrevious{Easy,Medium,Hard}: 1/2/3 decks, k = 4/32/64. Each step shows one card's suit;
//     from the k-th card on, the action must name the suit of the card k-1 steps before the one
//     just shown: +-1/(cards - k). Truncated after cards - 1 steps.
//   RepeatFirst{Easy,Medium,Hard}: 1/8/16 decks; the action must name the first card's suit:
//     +-1/(cards - 1) every step; truncated after cards - 1 steps.
//   CountRecall{Easy,Medium,Hard}: 1 deck of colours / 2 decks of suits / 4 decks of ranks. Each
//     step shows a dealt card and a query card; the next action must say how many cards of the
//     query's value have been dealt so far: +-1/(cards - 1). The count is 0 .. cards / values, so
//     there are cards / values + 1 actions. Terminates when the deck runs out.
//   StatelessCartPole{Easy,Medium,Hard}: CartPole with only cart position and pole angle
//     observed, reward 1/L per step, truncated at L = 200/400/600 steps.
#include <random>
#include <vector>

#include "envs/builtin.h"
#include "envs/env.h"

namespace mpirl::envs {

// A shuffled multi-deck of 52-card decks; card c has suit (c % 52) / 13 and rank c % 13.
class Deck {
 public:
  explicit Deck(int decks) : cards_(size_t(52 * decks)) {}
  int size() const { return int(cards_.size()); }
  void shuffle(std::mt19937_64& rng);
  int card(int i) const { return cards_[size_t(i)]; }
  static int suit(int c) { return (c % 52) / 13; }
  static int color(int c) { return suit(c) / 2; }
  static int rank(int c) { return c % 13; }

 private:
  std::vector<int> cards_;
};

class RepeatPrevious final : public Env {
 public:
  RepeatPrevious(uint64_t seed, int decks, int k, const char* id);
  const EnvSpec& spec() const override { return spec_; }
  void reset(void* obs) override;
  StepResult step(const Action& a, void* obs) override;
  int card(int i) const { return deck_.card(i); }  // for tests

 private:
  EnvSpec spec_;
  std::mt19937_64 rng_;
  Deck deck_;
  int k_, dealt_ = 0;
};

class RepeatFirst final : public Env {
 public:
  RepeatFirst(uint64_t seed, int decks, const char* id);
  const EnvSpec& spec() const override { return spec_; }
  void reset(void* obs) override;
  StepResult step(const Action& a, void* obs) override;

 private:
  EnvSpec spec_;
  std::mt19937_64 rng_;
  Deck deck_;
  int dealt_ = 0;
};

class CountRecall final : public Env {
 public:
  enum class By { Color, Suit, Rank };
  CountRecall(uint64_t seed, int decks, By by, const char* id);
  const EnvSpec& spec() const override { return spec_; }
  void reset(void* obs) override;
  StepResult step(const Action& a, void* obs) override;
  int distinct() const { return distinct_; }

 private:
  int value_of(int card) const;
  void write_obs(float* obs) const;
  EnvSpec spec_;
  std::mt19937_64 rng_;
  Deck values_, queries_;
  By by_;
  int distinct_, dealt_ = 0, value_ = 0, query_ = 0;
  std::vector<int> counts_;
};

class StatelessCartPole final : public Env {
 public:
  StatelessCartPole(uint64_t seed, int max_steps, const char* id);
  const EnvSpec& spec() const override { return spec_; }
  void reset(void* obs) override;
  StepResult step(const Action& a, void* obs) override;
  const CartPole& inner() const { return cp_; }

 private:
  EnvSpec spec_;
  CartPole cp_;
  int steps_ = 0;
  float full_[4];
};

}  // namespace mpirl::envs
