// The ranks' host names and the communicators every rank creates at start-up (comm/ranks.h).
#include "comm/ranks.h"

#include <unistd.h>

#include <algorithm>

#include <fmt/format.h>

#include "core/error.h"

namespace mpirl {

std::vector<std::string> gather_hosts() {
  int world = 0;
  MPIRL_MPI(MPI_Comm_size(MPI_COMM_WORLD, &world));
  constexpr int kHost = 64;
  char mine[kHost] = {0};
  gethostname(mine, kHost - 1);
  std::vector<char> all(size_t(kHost) * size_t(world));
  MPIRL_MPI(MPI_Allgather(mine, kHost, MPI_CHAR, all.data(), kHost, MPI_CHAR, MPI_COMM_WORLD));
  std::vector<std::string> hosts;
  for (int i = 0; i < world; ++i) hosts.emplace_back(all.data() + size_t(i) * kHost);
  return hosts;
}

Comms Comms::create(const Layout& layout, const std::vector<std::string>& hosts) {
  Comms c;
  c.layout = layout;
  c.hosts = hosts;
  MPIRL_MPI(MPI_Comm_rank(MPI_COMM_WORLD, &c.rank));
  Role r = layout.role_of(c.rank);
  MPIRL_MPI(MPI_Comm_split(MPI_COMM_WORLD, r == Role::Learner ? 0 : MPI_UNDEFINED, c.rank, &c.learners));
  const Role runs_policy = layout.central() ? Role::Inference : Role::Actor;
  bool pub = (c.rank == 0) || r == runs_policy;
  MPIRL_MPI(MPI_Comm_split(MPI_COMM_WORLD, pub ? 0 : MPI_UNDEFINED, c.rank, &c.publish));
  if (c.learners != MPI_COMM_NULL) {
    MPI_Comm node;
    MPIRL_MPI(MPI_Comm_split_type(c.learners, MPI_COMM_TYPE_SHARED, c.rank, MPI_INFO_NULL, &node));
    MPIRL_MPI(MPI_Comm_rank(node, &c.node_learner_index));
    MPIRL_MPI(MPI_Comm_size(node, &c.node_learners));
    MPI_Comm_free(&node);
  }
  if (r == Role::Inference)
    for (int s : layout.inference_ranks())
      if (s < c.rank && c.host(s) == c.host(c.rank)) ++c.node_inference_index;
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
                                   : fmt::format("{} {}-{}", last == Role::Inference ? "inference" : role_name(last) + std::string("s"),
                                                 run_start, run_end);
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
