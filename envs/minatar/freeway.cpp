// MinAtar Freeway: a chicken crosses eight lanes of cars from the bottom; +1 per crossing (the cars
// then get new speeds), a hit sends it back to the bottom; the episode ends after 2,500 steps.
// Channels: chicken, car, and one trail channel per car speed (1-5).
#include <cstdlib>

#include "envs/minatar/games.h"

namespace mpirl::envs::minatar {
// (A named namespace too: the games share constant names, and unity builds join their files.)
namespace {
namespace freeway {

constexpr int kPlayerSpeed = 3, kTimeLimit = 2500;

struct Car {
  int x = 0, y = 0, timer = 0, speed = 0;  // speed: signed, cells per (|speed| + 1) steps
};

class Freeway final : public Game {
 public:
  void reset(Rng& rng) override {
    randomize_cars(rng, true);
    pos_ = 9;
    move_timer_ = kPlayerSpeed;
    terminate_timer_ = kTimeLimit;
    terminal_ = false;
  }

  Outcome act(int a, Rng& rng) override {
    Outcome o;
    if (terminal_) return {0, true};
    if (a == kUp && move_timer_ == 0) {
      move_timer_ = kPlayerSpeed;
      pos_ = std::max(0, pos_ - 1);
    } else if (a == kDown && move_timer_ == 0) {
      move_timer_ = kPlayerSpeed;
      pos_ = std::min(9, pos_ + 1);
    }
    if (pos_ == 0) {
      o.reward += 1;
      randomize_cars(rng, false);
      pos_ = 9;
    }
    for (auto& c : cars_) {
      if (c.x == 4 && c.y == pos_) pos_ = 9;
      if (c.timer == 0) {
        c.timer = std::abs(c.speed);
        c.x += c.speed > 0 ? 1 : -1;
        if (c.x < 0) c.x = 9;
        else if (c.x > 9) c.x = 0;
        if (c.x == 4 && c.y == pos_) pos_ = 9;
      } else {
        --c.timer;
      }
    }
    if (move_timer_ > 0) --move_timer_;
    if (--terminate_timer_ < 0) terminal_ = true;
    o.terminal = terminal_;
    return o;
  }

  void state(uint8_t* chw) const override {
    Grid g{chw};
    g.set(0, pos_, 4);
    for (auto& c : cars_) {
      g.set(1, c.y, c.x);
      int back = c.speed > 0 ? c.x - 1 : c.x + 1;
      if (back < 0) back = 9;
      else if (back > 9) back = 0;
      const int s = std::abs(c.speed);
      if (s >= 1 && s <= 5) g.set(1 + s, c.y, back);
    }
  }
  int channels() const override { return 7; }
  std::vector<int> minimal_actions() const override { return {kNoop, kUp, kDown}; }

 private:
  // The package draws randint(1, 6, size=8), then rand(8): eight speeds, then eight directions
  // (the sign of u - 0.5; u = 0.5 exactly, a zero speed there, counts as positive here).
  void randomize_cars(Rng& rng, bool init) {
    int speeds[8];
    for (int& s : speeds) s = int(rng.randint(1, 6));
    for (int i = 0; i < 8; ++i) {
      if (rng.rand() < 0.5) speeds[i] = -speeds[i];
      if (init) cars_[i] = Car{0, i + 1, 0, 0};
      cars_[i].timer = std::abs(speeds[i]);
      cars_[i].speed = speeds[i];
    }
  }
  int pos_ = 9, move_timer_ = 0, terminate_timer_ = 0;
  bool terminal_ = false;
  Car cars_[8];
};

}  // namespace freeway
}  // namespace

std::unique_ptr<Game> make_freeway(bool) { return std::make_unique<freeway::Freeway>(); }

}  // namespace mpirl::envs::minatar
