#include "comm/ranks.h"

#include <unistd.h>

#include <algorithm>

#include <fmt/format.h>

#include "core/error.h"

namespace mpirl {

const char* role_name(Role r) {
  switch (r) {
    case Role::Learner: return "learner";
    case Role::Replay: return "replay";
    case Role::Actor: return "actor";
  }
  return "?";
}

Role Layout::role_of(int rank) const {
  if (rank < learners) return Role::Learner;
  if (rank == learners) return Role::Replay;
  return Role::Actor;
}

Layout make_layout(const Config& cfg, int world_size) {
  Layout l{world_size, cfg.roles.learners};
  int need = cfg.roles.learners + 2;
  if (world_size < need)
    throw ConfigError(fmt::format(
        "world size {} is too small: roles.learners = {} needs {} learner rank(s) + 1 replay rank + at least 1 "
        "actor rank = {} ranks (start with `mpirun -n {} mpirl train ...`; an MPI program started without its "
        "launcher runs as separate singletons of size 1)",
        world_size, cfg.roles.learners, cfg.roles.learners, need, need));
  return l;
}

Comms Comms::create(const Layout& layout) {
  Comms c;
  c.layout = layout;
  MPIRL_MPI(MPI_Comm_rank(MPI_COMM_WORLD, &c.rank));
  Role r = layout.role_of(c.rank);
  MPIRL_MPI(MPI_Comm_split(MPI_COMM_WORLD, r == Role::Learner ? 0 : MPI_UNDEFINED, c.rank, &c.learners));
  bool pub = (c.rank == 0) || r == Role::Actor;
  MPIRL_MPI(MPI_Comm_split(MPI_COMM_WORLD, pub ? 0 : MPI_UNDEFINED, c.rank, &c.publish));
  constexpr int kHost = 64;
  char mine[kHost] = {0};
  gethostname(mine, kHost - 1);
  std::vector<char> all(size_t(kHost) * size_t(layout.world));
  MPIRL_MPI(MPI_Allgather(mine, kHost, MPI_CHAR, all.data(), kHost, MPI_CHAR, MPI_COMM_WORLD));
  for (int i = 0; i < layout.world; ++i) c.hosts.emplace_back(all.data() + size_t(i) * kHost);
  if (c.learners != MPI_COMM_NULL) {
    MPI_Comm node;
    MPIRL_MPI(MPI_Comm_split_type(c.learners, MPI_COMM_TYPE_SHARED, c.rank, MPI_INFO_NULL, &node));
    MPIRL_MPI(MPI_Comm_rank(node, &c.node_learner_index));
    MPIRL_MPI(MPI_Comm_size(node, &c.node_learners));
    MPI_Comm_free(&node);
  }
  return c;
}

int Comms::num_hosts() const {
  std::vector<std::string> seen;
  for (const auto& h : hosts)
    if (std::find(seen.begin(), seen.end(), h) == seen.end()) seen.push_back(h);
  return int(seen.size());
}

std::string Comms::placement() const {
  std::vector<std::string> order;
  for (const auto& h : hosts)
    if (std::find(order.begin(), order.end(), h) == order.end()) order.push_back(h);
  std::string out;
  for (const auto& h : order) {
    std::string line;
    Role last = Role::Learner;
    int run_start = -1, run_end = -1;
    auto flush = [&] {
      if (run_start < 0) return;
      if (!line.empty()) line += ", ";
      line += run_start == run_end ? fmt::format("{} {}", role_name(last), run_start)
                                   : fmt::format("{}s {}-{}", role_name(last), run_start, run_end);
    };
    for (int r = 0; r < layout.world; ++r) {
      if (host(r) != h) continue;
      const Role role = layout.role_of(r);
      if (run_start >= 0 && role == last && r == run_end + 1) {
        run_end = r;
        continue;
      }
      flush();
      last = role, run_start = r, run_end = r;
    }
    flush();
    out += (out.empty() ? "" : " | ") + h + ": " + line;
  }
  return out;
}

void Comms::free() {
  if (learners != MPI_COMM_NULL) MPI_Comm_free(&learners);
  if (publish != MPI_COMM_NULL) MPI_Comm_free(&publish);
}

}  // namespace mpirl
