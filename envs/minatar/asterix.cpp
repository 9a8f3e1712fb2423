// MinAtar Asterix: the player moves in rows 1-8; enemies and gold enter from either side at a
// spawn interval and move at a move interval (both shrink as the game ramps up); +1 per gold
// collected, the episode ends on touching an enemy. Channels: player, enemy, trail, gold.
#include "envs/minatar/games.h"

namespace mpirl::envs::minatar {
// (A named namespace too: the games share constant names, and unity builds join their files.)
namespace {
namespace asterix {

constexpr int kRampInterval = 100, kInitSpawnSpeed = 10, kInitMoveInterval = 5;

struct Entity {
  bool alive = false;
  int x = 0, y = 0;
  bool right = false, gold = false;
};

class Asterix final : public Game {
 public:
  explicit Asterix(bool ramping) : ramping_(ramping) {}

  void reset(Rng&) override {
    px_ = 5, py_ = 5;
    for (auto& e : ents_) e = Entity{};
    spawn_speed_ = kInitSpawnSpeed, spawn_timer_ = spawn_speed_;
    move_speed_ = kInitMoveInterval, move_timer_ = move_speed_;
    ramp_timer_ = kRampInterval, ramp_index_ = 0;
    terminal_ = false;
  }

  Outcome act(int a, Rng& rng) override {
    Outcome o;
    if (terminal_) return {0, true};
    if (spawn_timer_ == 0) {
      spawn(rng);
      spawn_timer_ = spawn_speed_;
    }
    if (a == kLeft) px_ = std::max(0, px_ - 1);
    else if (a == kRight) px_ = std::min(9, px_ + 1);
    else if (a == kUp) py_ = std::max(1, py_ - 1);
    else if (a == kDown) py_ = std::min(8, py_ + 1);
    for (auto& e : ents_) touch(e, o);
    if (move_timer_ == 0) {
      move_timer_ = move_speed_;
      for (auto& e : ents_) {
        if (!e.alive) continue;
        e.x += e.right ? 1 : -1;
        if (e.x < 0 || e.x > 9) e.alive = false;
        touch(e, o);
      }
    }
    --spawn_timer_;
    --move_timer_;
    if (ramping_ && (spawn_speed_ > 1 || move_speed_ > 1)) {
      if (ramp_timer_ >= 0) {
        --ramp_timer_;
      } else {
        if (move_speed_ > 1 && ramp_index_ % 2) --move_speed_;
        if (spawn_speed_ > 1) --spawn_speed_;
        ++ramp_index_;
        ramp_timer_ = kRampInterval;
      }
    }
    o.terminal = terminal_;
    return o;
  }

  void state(uint8_t* chw) const override {
    Grid g{chw};
    g.set(0, py_, px_);
    for (auto& e : ents_) {
      if (!e.alive) continue;
      g.set(e.gold ? 3 : 1, e.y, e.x);
      const int back = e.right ? e.x - 1 : e.x + 1;
      if (back >= 0 && back <= 9) g.set(2, e.y, back);
    }
  }
  int channels() const override { return 4; }
  std::vector<int> minimal_actions() const override { return {kNoop, kLeft, kUp, kRight, kDown}; }

 private:
  void touch(Entity& e, Outcome& o) {
    if (!e.alive || e.x != px_ || e.y != py_) return;
    if (e.gold) {
      e.alive = false;
      o.reward += 1;
    } else {
      terminal_ = true;
    }
  }
  void spawn(Rng& rng) {
    const bool right = rng.rand() < 1.0 / 2;
    const bool gold = rng.rand() < 1.0 / 3;
    int free[8], n = 0;
    for (int i = 0; i < 8; ++i)
      if (!ents_[i].alive) free[n++] = i;
    if (n == 0) return;
    const int slot = free[rng.randint(0, n)];
    ents_[slot] = Entity{true, right ? 0 : 9, slot + 1, right, gold};
  }
  bool ramping_;
  int px_ = 5, py_ = 5, spawn_speed_ = 0, spawn_timer_ = 0, move_speed_ = 0, move_timer_ = 0;
  int ramp_timer_ = 0, ramp_index_ = 0;
  bool terminal_ = false;
  Entity ents_[8];
};

}  // namespace asterix
}  // namespace

std::unique_ptr<Game> make_asterix(bool ramping) { return std::make_unique<asterix::Asterix>(ramping); }

}  // namespace mpirl::envs::minatar
