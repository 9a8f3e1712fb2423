// MinAtar Seaquest: a submarine shoots fish and enemy subs (+1 each), picks up divers, and must
// surface before its oxygen runs out; surfacing with 6 divers scores the oxygen left (0-10) and
// ramps the game up, surfacing with none ends the episode, as does any collision or enemy bullet.
// Channels: sub_front, sub_back, friendly_bullet, trail, enemy_bullet, enemy_fish, enemy_sub,
// oxygen_guage, diver_guage, diver.
//
// The package keeps each kind of object in a Python list, iterates some of them in reverse while
// removing from them, and removes by value (the first equal list, not necessarily the one at
// hand); an object removed from its list can still act in the same loop (a sub that left the
// screen still fires). PyList below keeps those semantics exactly: objects live in a pool, lists
// hold their ids, and the loops use CPython's reverse-iterator rule.
#include <array>

#include "envs/minatar/games.h"

namespace mpirl::envs::minatar {
// (A named namespace too: the games share constant names, and unity builds join their files.)
namespace {
namespace seaquest {

constexpr int kMaxOxygen = 200, kInitSpawnSpeed = 20, kDiverSpawnSpeed = 30;
constexpr int kInitMoveInterval = 5, kShotCoolDown = 5, kEnemyShotInterval = 10, kDiverMoveInterval = 5;

// [x, y, direction (1 = right), move timer, shot timer]; unused fields stay 0, so that equality
// of whole objects is Python's equality of the lists.
using Obj = std::array<int, 5>;

struct PyList {
  std::vector<int> ids;
  std::vector<Obj>* pool;
  Obj& at(size_t i) const { return (*pool)[size_t(ids[i])]; }
  void append(const Obj& o) {
    pool->push_back(o);
    ids.push_back(int(pool->size()) - 1);
  }
  void remove(int id) {  // list.remove(obj): the first element equal to it
    const Obj v = (*pool)[size_t(id)];
    for (size_t i = 0; i < ids.size(); ++i)
      if ((*pool)[size_t(ids[i])] == v) {
        ids.erase(ids.begin() + long(i));
        return;
      }
  }
  // for item in reversed(list): the index starts at len - 1 and goes down; iteration stops as
  // soon as it is no longer a valid index of the (possibly shorter) list.
  template <class F>
  void for_reversed(F&& f) {
    for (long i = long(ids.size()) - 1; i >= 0 && i < long(ids.size()); --i) f(ids[size_t(i)]);
  }
};

bool same_cell(const Obj& a, const Obj& b) { return a[0] == b[0] && a[1] == b[1]; }

class Seaquest final : public Game {
 public:
  explicit Seaquest(bool ramping) : ramping_(ramping) {
    for (PyList* l : {&f_bullets_, &e_bullets_, &e_fish_, &e_subs_, &divers_}) l->pool = &pool_;
  }

  void reset(Rng&) override {
    oxygen_ = kMaxOxygen, diver_count_ = 0;
    sub_x_ = 5, sub_y_ = 0, sub_or_ = false;
    pool_.clear();
    for (PyList* l : {&f_bullets_, &e_bullets_, &e_fish_, &e_subs_, &divers_}) l->ids.clear();
    e_spawn_speed_ = kInitSpawnSpeed, e_spawn_timer_ = e_spawn_speed_, d_spawn_timer_ = kDiverSpawnSpeed;
    move_speed_ = kInitMoveInterval, ramp_index_ = 0, shot_timer_ = 0;
    surface_ = true, terminal_ = false;
  }

  Outcome act(int a, Rng& rng) override {
    int r = 0;
    if (terminal_) return {0, true};
    if (e_spawn_timer_ == 0) {
      spawn_enemy(rng);
      e_spawn_timer_ = e_spawn_speed_;
    }
    if (d_spawn_timer_ == 0) {
      spawn_diver(rng);
      d_spawn_timer_ = kDiverSpawnSpeed;
    }
    if (a == kFire && shot_timer_ == 0) {
      f_bullets_.append({sub_x_, sub_y_, sub_or_, 0, 0});
      shot_timer_ = kShotCoolDown;
    } else if (a == kLeft) {
      sub_x_ = std::max(0, sub_x_ - 1), sub_or_ = false;
    } else if (a == kRight) {
      sub_x_ = std::min(9, sub_x_ + 1), sub_or_ = true;
    } else if (a == kUp) {
      sub_y_ = std::max(0, sub_y_ - 1);
    } else if (a == kDown) {
      sub_y_ = std::min(8, sub_y_ + 1);
    }
    move_friendly_bullets(r);
    move_divers();
    move_subs(r);
    move_enemy_bullets();
    move_fish(r);
    if (e_spawn_timer_ > 0) --e_spawn_timer_;
    if (d_spawn_timer_ > 0) --d_spawn_timer_;
    if (shot_timer_ > 0) --shot_timer_;
    if (oxygen_ <= 0) terminal_ = true;
    if (sub_y_ > 0) {
      --oxygen_;
      surface_ = false;
    } else if (!surface_) {
      if (diver_count_ == 0) terminal_ = true;
      else r += surface();
    }
    compact();
    return {r, terminal_};
  }

  void state(uint8_t* chw) const override {
    Grid g{chw};
    g.set(0, sub_y_, sub_x_);
    const int back = sub_or_ ? sub_x_ - 1 : sub_x_ + 1;  // always on the grid: x = 9 faces right
    g.set(1, sub_y_, back);
    for (int x = 0; x < std::max(0, oxygen_) * 10 / kMaxOxygen; ++x) g.set(7, 9, x);
    for (int x = 9 - diver_count_; x < 9; ++x) g.set(8, 9, x);
    for (size_t i = 0; i < f_bullets_.ids.size(); ++i) g.set(2, f_bullets_.at(i)[1], f_bullets_.at(i)[0]);
    for (size_t i = 0; i < e_bullets_.ids.size(); ++i) g.set(4, e_bullets_.at(i)[1], e_bullets_.at(i)[0]);
    auto with_trail = [&](const PyList& l, int c) {
      for (size_t i = 0; i < l.ids.size(); ++i) {
        const Obj& o = l.at(i);
        g.set(c, o[1], o[0]);
        const int back = o[2] ? o[0] - 1 : o[0] + 1;
        if (back >= 0 && back <= 9) g.set(3, o[1], back);
      }
    };
    with_trail(e_fish_, 5);
    with_trail(e_subs_, 6);
    with_trail(divers_, 9);
  }
  int channels() const override { return 10; }
  std::vector<int> minimal_actions() const override { return {kNoop, kLeft, kUp, kRight, kDown, kFire}; }

 private:
  bool at_sub(const Obj& o) const { return o[0] == sub_x_ && o[1] == sub_y_; }
  static void step_x(Obj& o) { o[0] += o[2] ? 1 : -1; }
  static bool off(const Obj& o) { return o[0] < 0 || o[0] > 9; }

  void move_friendly_bullets(int& r) {
    f_bullets_.for_reversed([&](int b) {
      Obj& bullet = pool_[size_t(b)];
      step_x(bullet);
      if (off(bullet)) return f_bullets_.remove(b);
      for (PyList* targets : {&e_fish_, &e_subs_})  // fish first: a bullet takes one target
        for (size_t i = 0; i < targets->ids.size(); ++i)
          if (same_cell(pool_[size_t(b)], targets->at(i))) {
            targets->remove(targets->ids[i]);
            f_bullets_.remove(b);
            ++r;
            return;
          }
    });
  }

  void move_divers() {
    divers_.for_reversed([&](int d) {
      Obj& diver = pool_[size_t(d)];
      if (at_sub(diver) && diver_count_ < 6) {
        divers_.remove(d);
        ++diver_count_;
      } else if (diver[3] == 0) {
        diver[3] = kDiverMoveInterval;
        step_x(diver);
        if (off(diver)) {
          divers_.remove(d);
        } else if (at_sub(diver) && diver_count_ < 6) {
          divers_.remove(d);
          ++diver_count_;
        }
      } else {
        --diver[3];
      }
    });
  }

  // A hit by a friendly bullet after moving: both go, +1.
  bool shot_down(PyList& list, int id, int& r) {
    for (size_t i = 0; i < f_bullets_.ids.size(); ++i)
      if (same_cell(pool_[size_t(id)], f_bullets_.at(i))) {
        const int bullet = f_bullets_.ids[i];
        list.remove(id);
        f_bullets_.remove(bullet);
        ++r;
        return true;
      }
    return false;
  }

  void move_subs(int& r) {
    e_subs_.for_reversed([&](int s) {
      if (at_sub(pool_[size_t(s)])) terminal_ = true;
      if (pool_[size_t(s)][3] == 0) {
        pool_[size_t(s)][3] = move_speed_;
        step_x(pool_[size_t(s)]);
        if (off(pool_[size_t(s)])) e_subs_.remove(s);
        else if (at_sub(pool_[size_t(s)])) terminal_ = true;
        else shot_down(e_subs_, s, r);
      } else {
        --pool_[size_t(s)][3];
      }
      if (pool_[size_t(s)][4] == 0) {  // a sub fires even if it has just gone
        pool_[size_t(s)][4] = kEnemyShotInterval;
        const Obj& sub = pool_[size_t(s)];
        e_bullets_.append({sub[0], sub[1], sub[2], 0, 0});  // may grow the pool: no reference kept
      } else {
        --pool_[size_t(s)][4];
      }
    });
  }

  void move_enemy_bullets() {
    e_bullets_.for_reversed([&](int b) {
      Obj& bullet = pool_[size_t(b)];
      if (at_sub(bullet)) terminal_ = true;
      step_x(bullet);
      if (off(bullet)) e_bullets_.remove(b);
      else if (at_sub(bullet)) terminal_ = true;
    });
  }

  void move_fish(int& r) {
    e_fish_.for_reversed([&](int f) {
      Obj& fish = pool_[size_t(f)];
      if (at_sub(fish)) terminal_ = true;
      if (fish[3] == 0) {
        fish[3] = move_speed_;
        step_x(fish);
        if (off(fish)) e_fish_.remove(f);
        else if (at_sub(fish)) terminal_ = true;
        else shot_down(e_fish_, f, r);
      } else {
        --fish[3];
      }
    });
  }

  int surface() {
    surface_ = true;
    int r = 0;
    if (diver_count_ == 6) {
      diver_count_ = 0;
      r = oxygen_ * 10 / kMaxOxygen;
    }
    oxygen_ = kMaxOxygen;
    --diver_count_;  // as the package does: -1 after a full surfacing, so the next one needs 7
    if (ramping_ && (e_spawn_speed_ > 1 || move_speed_ > 2)) {
      if (move_speed_ > 2 && ramp_index_ % 2) --move_speed_;
      if (e_spawn_speed_ > 1) --e_spawn_speed_;
      ++ramp_index_;
    }
    return r;
  }

  void spawn_enemy(Rng& rng) {
    const int lr = rng.rand() < 1.0 / 2;
    const bool is_sub = rng.rand() < 1.0 / 3;
    const int x = lr ? 0 : 9, y = int(rng.randint(1, 9));
    for (PyList* l : {&e_subs_, &e_fish_})
      for (size_t i = 0; i < l->ids.size(); ++i)
        if (l->at(i)[1] == y && l->at(i)[2] != lr) return;
    if (is_sub) e_subs_.append({x, y, lr, move_speed_, kEnemyShotInterval});
    else e_fish_.append({x, y, lr, move_speed_, 0});
  }

  void spawn_diver(Rng& rng) {
    const int lr = rng.rand() < 1.0 / 2;
    const int y = int(rng.randint(1, 9));
    divers_.append({lr ? 0 : 9, y, lr, kDiverMoveInterval, 0});
  }

  // Drops the pool's objects that no list holds any more (between steps nothing else refers to them).
  void compact() {
    std::vector<Obj> kept;
    for (PyList* l : {&f_bullets_, &e_bullets_, &e_fish_, &e_subs_, &divers_})
      for (int& id : l->ids) {
        kept.push_back(pool_[size_t(id)]);
        id = int(kept.size()) - 1;
      }
    pool_.swap(kept);
  }

  bool ramping_;
  int oxygen_ = kMaxOxygen, diver_count_ = 0, sub_x_ = 5, sub_y_ = 0;
  int sub_or_ = 0;
  int e_spawn_speed_ = 0, e_spawn_timer_ = 0, d_spawn_timer_ = 0, move_speed_ = 0, ramp_index_ = 0, shot_timer_ = 0;
  bool surface_ = true, terminal_ = false;
  std::vector<Obj> pool_;
  PyList f_bullets_, e_bullets_, e_fish_, e_subs_, divers_;
};

}  // namespace seaquest
}  // namespace

std::unique_ptr<Game> make_seaquest(bool ramping) { return std::make_unique<seaquest::Seaquest>(ramping); }

}  // namespace mpirl::envs::minatar
