#pragma once
// Rank layout: ranks 0..L-1 are learners, rank L is the replay, ranks L+1.. are actors.
#include <string>
#include <vector>

#include <mpi.h>

#include "comm/protocol.h"
#include "core/config.h"

namespace mpirl {

enum class Role { Learner, Replay, Actor };
const char* role_name(Role r);


struct Layout {
  int world = 0, learners = 0;
  int replay_rank() const { return learners; }
  int first_actor() const { return learners + 1; }
  int actors() const { return world - learners - 1; }
  Role role_of(int rank) const;
  int actor_index(int rank) const { return rank - first_actor(); }
};

// Throws ConfigError when the world is too small for the configured roles.
Layout make_layout(const Config& cfg, int world_size);

// Communicators every rank creates collectively at start-up.
struct Comms {
  MPI_Comm world = MPI_COMM_WORLD;
  MPI_Comm learners = MPI_COMM_NULL;  // learners only (gradient all-reduce)
  MPI_Comm publish = MPI_COMM_NULL;   // learner 0 (root, rank 0 in it) + actors: parameter broadcasts
  int rank = 0;
  Layout layout;
  std::vector<std::string> hosts;     // host name of every world rank (for messages)
  // Learners only: this learner's index among the learners on its node, and how many there are
  // (MPI_COMM_TYPE_SHARED over the learner communicator: actors on the node do not count).
  int node_learner_index = 0, node_learners = 1;
  std::string host(int r) const { return r >= 0 && size_t(r) < hosts.size() ? hosts[size_t(r)] : "?"; }
  Role role() const { return layout.role_of(rank); }
  // How many distinct hosts the ranks run on, and a one-line map "n1: learner 0, replay 1 | n2:
  // actors 2-3" (hosts in order of their first rank).
  int num_hosts() const;
  std::string placement() const;
  static Comms create(const Layout& layout);
  void free();
};

}  // namespace mpirl
