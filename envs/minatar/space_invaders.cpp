// MinAtar Space Invaders: a cannon on the bottom row fires upwards (5-step cool-down) at a 4 x 6
// block of aliens that marches sideways and down and fires at the cannon; +1 per alien, a new wave
// (faster, with ramping) when all are gone; the episode ends when the cannon is hit or reached.
// Channels: cannon, alien, alien_left, alien_right, friendly_bullet, enemy_bullet.
#include <cstdlib>

#include "envs/minatar/games.h"

namespace mpirl::envs::minatar {
// (A named namespace too: the games share constant names, and unity builds join their files.)
namespace {
namespace space_invaders {

constexpr int kShotCoolDown = 5, kEnemyMoveInterval = 12, kEnemyShotInterval = 10;

using Map = uint8_t[10][10];

// numpy.roll(m, shift, axis=0): row y takes row y - shift (mod 10).
void roll_rows(Map& m, int shift) {
  Map t;
  for (int y = 0; y < 10; ++y) std::memcpy(t[y], m[((y - shift) % 10 + 10) % 10], 10);
  std::memcpy(m, t, sizeof t);
}
// numpy.roll(m, shift, axis=1): column x takes column x - shift (mod 10).
void roll_cols(Map& m, int shift) {
  Map t;
  for (int y = 0; y < 10; ++y)
    for (int x = 0; x < 10; ++x) t[y][x] = m[y][((x - shift) % 10 + 10) % 10];
  std::memcpy(m, t, sizeof t);
}
int count(const Map& m) {
  int n = 0;
  for (auto& row : m)
    for (uint8_t v : row) n += v != 0;
  return n;
}
bool any_in_col(const Map& m, int x) {
  for (int y = 0; y < 10; ++y)
    if (m[y][x]) return true;
  return false;
}

class SpaceInvaders final : public Game {
 public:
  explicit SpaceInvaders(bool ramping) : ramping_(ramping) {}

  void reset(Rng&) override {
    pos_ = 5;
    std::memset(fb_, 0, sizeof fb_);
    std::memset(eb_, 0, sizeof eb_);
    std::memset(aliens_, 0, sizeof aliens_);
    wave();
    dir_ = -1;
    move_interval_ = kEnemyMoveInterval;
    move_timer_ = move_interval_;
    shot_timer_alien_ = kEnemyShotInterval;
    ramp_index_ = 0;
    shot_timer_ = 0;
    terminal_ = false;
  }

  Outcome act(int a, Rng&) override {
    Outcome o;
    if (terminal_) return {0, true};
    if (a == kFire && shot_timer_ == 0) {
      fb_[9][pos_] = 1;
      shot_timer_ = kShotCoolDown;
    } else if (a == kLeft) {
      pos_ = std::max(0, pos_ - 1);
    } else if (a == kRight) {
      pos_ = std::min(9, pos_ + 1);
    }
    roll_rows(fb_, -1);
    std::memset(fb_[9], 0, 10);
    roll_rows(eb_, 1);
    std::memset(eb_[0], 0, 10);
    if (eb_[9][pos_]) terminal_ = true;
    if (aliens_[9][pos_]) terminal_ = true;
    if (move_timer_ == 0) {
      move_timer_ = std::min(count(aliens_), move_interval_);
      if ((any_in_col(aliens_, 0) && dir_ < 0) || (any_in_col(aliens_, 9) && dir_ > 0)) {
        dir_ = -dir_;
        for (int x = 0; x < 10; ++x)
          if (aliens_[9][x]) terminal_ = true;
        roll_rows(aliens_, 1);
      } else {
        roll_cols(aliens_, dir_);
      }
      if (aliens_[9][pos_]) terminal_ = true;
    }
    if (shot_timer_alien_ == 0) {
      shot_timer_alien_ = kEnemyShotInterval;
      int ny = 0, nx = 0;
      nearest_alien(ny, nx);
      eb_[ny][nx] = 1;
    }
    for (int y = 0; y < 10; ++y)
      for (int x = 0; x < 10; ++x)
        if (aliens_[y][x] && fb_[y][x]) {
          o.reward += 1;
          aliens_[y][x] = fb_[y][x] = 0;
        }
    if (shot_timer_ > 0) --shot_timer_;
    --move_timer_;
    --shot_timer_alien_;
    if (count(aliens_) == 0) {
      if (move_interval_ > 6 && ramping_) {
        --move_interval_;
        ++ramp_index_;
      }
      wave();
    }
    o.terminal = terminal_;
    return o;
  }

  void state(uint8_t* chw) const override {
    Grid g{chw};
    g.set(0, 9, pos_);
    for (int y = 0; y < 10; ++y)
      for (int x = 0; x < 10; ++x) {
        if (aliens_[y][x]) g.set(1, y, x), g.set(dir_ < 0 ? 2 : 3, y, x);
        if (fb_[y][x]) g.set(4, y, x);
        if (eb_[y][x]) g.set(5, y, x);
      }
  }
  int channels() const override { return 6; }
  std::vector<int> minimal_actions() const override { return {kNoop, kLeft, kRight, kFire}; }

 private:
  void wave() {
    for (int y = 0; y < 4; ++y)
      for (int x = 2; x < 8; ++x) aliens_[y][x] = 1;
  }
  // The lowest alien of the column nearest the cannon (ties: the left one, as the package's
  // stable sort of columns by distance gives).
  void nearest_alien(int& y, int& x) const {
    for (int d = 0; d < 10; ++d)
      for (int c : {pos_ - d, pos_ + d}) {
        if (c < 0 || c > 9 || !any_in_col(aliens_, c)) continue;
        for (int r = 9; r >= 0; --r)
          if (aliens_[r][c]) {
            y = r, x = c;
            return;
          }
      }
  }
  bool ramping_;
  int pos_ = 5, dir_ = -1, move_interval_ = 0, move_timer_ = 0, shot_timer_alien_ = 0, ramp_index_ = 0;
  int shot_timer_ = 0;
  bool terminal_ = false;
  Map fb_ = {}, eb_ = {}, aliens_ = {};
};

}  // namespace space_invaders
}  // namespace

std::unique_ptr<Game> make_space_invaders(bool ramping) { return std::make_unique<space_invaders::SpaceInvaders>(ramping); }

}  // namespace mpirl::envs::minatar
