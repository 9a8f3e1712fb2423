#pragma once
// The five games (one file each) and what they share. Internal to envs/minatar.cpp.
#include <algorithm>
#include <cstring>

#include "envs/minatar.h"

namespace mpirl::envs::minatar {

// A channels-first [C, 10, 10] byte image; set() marks one cell of one channel.
struct Grid {
  uint8_t* p;
  void set(int c, int y, int x) const { p[(c * 10 + y) * 10 + x] = 1; }
};

std::unique_ptr<Game> make_asterix(bool ramping);
std::unique_ptr<Game> make_breakout(bool ramping);
std::unique_ptr<Game> make_freeway(bool ramping);
std::unique_ptr<Game> make_seaquest(bool ramping);
std::unique_ptr<Game> make_space_invaders(bool ramping);

}  // namespace mpirl::envs::minatar
