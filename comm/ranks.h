#pragma once
// Rank layout: ranks 0..L-1 are learners, rank L is the replay (shard 0), the rest are actors; with
// roles.replays = K > 1, shards 1..K-1 take the first free rank of each host in turn (hosts in order
// of their first rank after the learners; a host gets a second shard only once every host has one),
// and each actor sends to a shard of its own host (round-robin) or, when its host has none, to any
// (round-robin over all); a shard left without actors (on a host of learners only) takes actors
// from the shard that has the most. With central
// inference (actor.inference = "central"), on every host (roles.inference_hosts = "each": a host
// keeps at least one actor, else it has none; "learners": the hosts of learners only) the first
// roles.inference_per_node of those remaining ranks serve inference instead, and each actor is
// served by an inference rank of its own host (round-robin), or of any host when its own has none.
#include <string>
#include <vector>

#include <mpi.h>

#include "comm/protocol.h"
#include "core/config.h"

namespace mpirl {

enum class Role { Learner, Replay, Actor, Inference };
const char* role_name(Role r);

class Layout {
 public:
  Layout() = default;
  // Every rank an actor (after the learners and the replay): local inference.
  Layout(int world, int learners);
  int world = 0, learners = 0;
  int replay_rank() const { return replay_ranks_.empty() ? learners : replay_ranks_[0]; }  // shard 0
  // Replay shards: their ranks in shard order, the shard an actor sends to, a replay rank's shard
  // index (-1: not a replay), the actors that send to shard k.
  int replays() const { return int(replay_ranks_.size()); }
  const std::vector<int>& replay_ranks() const { return replay_ranks_; }
  int replay_of(int actor_rank) const { return replay_ranks_[size_t(shard_of_[size_t(actor_rank)])]; }
  int shard_of(int actor_rank) const { return shard_of_[size_t(actor_rank)]; }
  int shard_index(int rank) const;
  std::vector<int> actors_of_shard(int shard) const;
  int actors() const { return int(actor_ranks_.size()); }
  int actor_rank(int index) const { return actor_ranks_[size_t(index)]; }
  const std::vector<int>& actor_ranks() const { return actor_ranks_; }
  // The index of an actor rank among the actors (-1: not an actor).
  int actor_index(int rank) const { return rank >= 0 && rank < world ? actor_index_[size_t(rank)] : -1; }
  Role role_of(int rank) const { return roles_[size_t(rank)]; }
  // Central inference: the inference ranks, the one serving an actor rank, the actors one serves.
  bool central() const { return !inference_ranks_.empty(); }
  const std::vector<int>& inference_ranks() const { return inference_ranks_; }
  int server_of(int actor_rank) const { return server_[size_t(actor_rank)]; }
  std::vector<int> served_by(int inference_rank) const;

 private:
  friend Layout make_layout(const Config&, int, const std::vector<std::string>&);
  void index_actors();
  // roles.replays = K: shards 1..K-1 on ranks that were actors; then each actor's shard.
  void place_shards(int K, const std::vector<std::string>& hosts);
  void assign_shards(const std::vector<std::string>& hosts);
  std::vector<Role> roles_;
  std::vector<int> actor_ranks_, actor_index_, inference_ranks_, server_;
  std::vector<int> replay_ranks_, shard_of_;  // shard_of_: per rank, an actor's shard (-1 otherwise)
};

// Throws ConfigError when the world is too small for the configured roles. `hosts`: the host name
// of every rank (empty: all on one host), which places the inference ranks.
Layout make_layout(const Config& cfg, int world_size, const std::vector<std::string>& hosts = {});

// The host name of every world rank (a collective over MPI_COMM_WORLD).
std::vector<std::string> gather_hosts();

// Communicators every rank creates collectively at start-up.
struct Comms {
  MPI_Comm world = MPI_COMM_WORLD;
  MPI_Comm learners = MPI_COMM_NULL;  // learners only (gradient all-reduce)
  // Learner 0 (root, rank 0 in it) + whoever runs the policy: the actors (local inference) or the
  // inference ranks (central): parameter broadcasts.
  MPI_Comm publish = MPI_COMM_NULL;
  int rank = 0;
  Layout layout;
  std::vector<std::string> hosts;     // host name of every world rank (for messages)
  // Learners only: this learner's index among the learners on its node, and how many there are
  // (MPI_COMM_TYPE_SHARED over the learner communicator: actors on the node do not count).
  int node_learner_index = 0, node_learners = 1;
  // Inference ranks only: this rank's index among the inference ranks of its host.
  int node_inference_index = 0;
  std::string host(int r) const { return r >= 0 && size_t(r) < hosts.size() ? hosts[size_t(r)] : "?"; }
  Role role() const { return layout.role_of(rank); }
  // How many distinct hosts the ranks run on, and a one-line map "n1: learner 0, replay 1 | n2:
  // actors 2-3" (hosts in order of their first rank).
  int num_hosts() const;
  std::string placement() const;
  static Comms create(const Layout& layout, const std::vector<std::string>& hosts);
  void free();
};

}  // namespace mpirl
