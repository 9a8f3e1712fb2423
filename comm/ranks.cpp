// Role names and the rank layout's queries; where the ranks go is comm/rank_placement.cpp, the
// communicators comm/communicators.cpp.
#include "comm/ranks.h"

#include <algorithm>

namespace mpirl {

const char* role_name(Role r) {
  switch (r) {
    case Role::Learner: return "learner";
    case Role::Replay: return "replay";
    case Role::Actor: return "actor";
    case Role::Inference: return "inference";
  }
  return "?";
}

Layout::Layout(int world_size, int num_learners) : world(world_size), learners(num_learners) {
  roles_.assign(size_t(std::max(world, 0)), Role::Actor);
  for (int r = 0; r < world; ++r) roles_[size_t(r)] = r < learners ? Role::Learner : r == learners ? Role::Replay : Role::Actor;
  server_.assign(size_t(std::max(world, 0)), -1);
  if (learners < world) replay_ranks_ = {learners};
  index_actors();
}

int Layout::shard_index(int rank) const {
  for (size_t k = 0; k < replay_ranks_.size(); ++k)
    if (replay_ranks_[k] == rank) return int(k);
  return -1;
}

std::vector<int> Layout::actors_of_shard(int shard) const {
  std::vector<int> out;
  for (int r : actor_ranks_)
    if (shard_of_[size_t(r)] == shard) out.push_back(r);
  return out;
}

void Layout::index_actors() {
  actor_ranks_.clear();
  actor_index_.assign(size_t(world), -1);
  for (int r = 0; r < world; ++r)
    if (roles_[size_t(r)] == Role::Actor) {
      actor_index_[size_t(r)] = int(actor_ranks_.size());
      actor_ranks_.push_back(r);
    }
  if (shard_of_.size() != size_t(world)) shard_of_.assign(size_t(world), -1);
  for (int r : actor_ranks_)
    if (shard_of_[size_t(r)] < 0) shard_of_[size_t(r)] = 0;
}

std::vector<int> Layout::served_by(int inference_rank) const {
  std::vector<int> out;
  for (int r : actor_ranks_)
    if (server_[size_t(r)] == inference_rank) out.push_back(r);
  return out;
}

}  // namespace mpirl
