// MinAtar Breakout: a paddle on the bottom row, a ball moving diagonally, three rows of bricks
// (refilled when cleared and the ball reaches the bottom); +1 per brick, the episode ends when the
// ball passes the paddle. Channels: paddle, ball, trail, brick.
#include "envs/minatar/games.h"

namespace mpirl::envs::minatar {
// (A named namespace too: the games share constant names, and unity builds join their files.)
namespace {
namespace breakout {

class Breakout final : public Game {
 public:
  void reset(Rng& rng) override {
    ball_y_ = 3;
    const bool right = rng.randint(0, 2) == 1;
    ball_x_ = right ? 9 : 0;
    dir_ = right ? 3 : 2;
    pos_ = 4;
    std::memset(bricks_, 0, sizeof bricks_);
    fill_bricks();
    strike_ = false;
    last_x_ = ball_x_, last_y_ = ball_y_;
    terminal_ = false;
  }

  Outcome act(int a, Rng&) override {
    Outcome o;
    if (terminal_) return {0, true};
    if (a == kLeft) pos_ = std::max(0, pos_ - 1);
    else if (a == kRight) pos_ = std::min(9, pos_ + 1);
    last_x_ = ball_x_, last_y_ = ball_y_;
    static const int dx[4] = {-1, 1, 1, -1}, dy[4] = {-1, -1, 1, 1};
    static const int flip_x[4] = {1, 0, 3, 2}, flip_y[4] = {3, 2, 1, 0}, paddle_edge[4] = {2, 3, 0, 1};
    int nx = ball_x_ + dx[dir_], ny = ball_y_ + dy[dir_];
    bool strike_toggle = false;
    if (nx < 0 || nx > 9) {
      nx = std::clamp(nx, 0, 9);
      dir_ = flip_x[dir_];
    }
    if (ny < 0) {
      ny = 0;
      dir_ = flip_y[dir_];
    } else if (bricks_[ny][nx]) {
      strike_toggle = true;
      if (!strike_) {
        o.reward += 1;
        strike_ = true;
        bricks_[ny][nx] = 0;
        ny = last_y_;
        dir_ = flip_y[dir_];
      }
    } else if (ny == 9) {
      if (no_bricks()) fill_bricks();
      if (ball_x_ == pos_) {
        dir_ = flip_y[dir_];
        ny = last_y_;
      } else if (nx == pos_) {
        dir_ = paddle_edge[dir_];
        ny = last_y_;
      } else {
        terminal_ = true;
      }
    }
    if (!strike_toggle) strike_ = false;
    ball_x_ = nx, ball_y_ = ny;
    o.terminal = terminal_;
    return o;
  }

  void state(uint8_t* chw) const override {
    Grid g{chw};
    g.set(1, ball_y_, ball_x_);
    g.set(0, 9, pos_);
    g.set(2, last_y_, last_x_);
    for (int y = 0; y < 10; ++y)
      for (int x = 0; x < 10; ++x)
        if (bricks_[y][x]) g.set(3, y, x);
  }
  int channels() const override { return 4; }
  std::vector<int> minimal_actions() const override { return {kNoop, kLeft, kRight}; }

 private:
  void fill_bricks() {
    for (int y = 1; y < 4; ++y)
      for (int x = 0; x < 10; ++x) bricks_[y][x] = 1;
  }
  bool no_bricks() const {
    for (auto& row : bricks_)
      for (uint8_t b : row)
        if (b) return false;
    return true;
  }
  int ball_x_ = 0, ball_y_ = 0, dir_ = 0, pos_ = 4, last_x_ = 0, last_y_ = 0;
  bool strike_ = false, terminal_ = false;
  uint8_t bricks_[10][10] = {};
};

}  // namespace breakout
}  // namespace

std::unique_ptr<Game> make_breakout(bool) { return std::make_unique<breakout::Breakout>(); }

}  // namespace mpirl::envs::minatar
