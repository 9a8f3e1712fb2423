// Where the ranks go (comm/ranks.h): the replay shards on the hosts, each actor's shard, the
// inference ranks and the actors each serves (make_layout).
#include "comm/ranks.h"

#include <algorithm>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "core/error.h"

namespace mpirl {

namespace {
// Host order: hosts in order of their first rank from `first` on.
std::vector<std::string> host_order(const std::vector<std::string>& hosts, int first, int world) {
  std::vector<std::string> order;
  for (int r = first; r < world; ++r) {
    const std::string h = hosts.empty() ? std::string() : hosts[size_t(r)];
    if (std::find(order.begin(), order.end(), h) == order.end()) order.push_back(h);
  }
  return order;
}
}  // namespace

void Layout::place_shards(int K, const std::vector<std::string>& hosts) {
  auto host_of = [&](int r) { return hosts.empty() ? std::string() : hosts[size_t(r)]; };
  const auto order = host_order(hosts, learners + 1, world);
  std::vector<int> shards_on(order.size(), 0);
  const auto first = std::find(order.begin(), order.end(), host_of(learners));
  if (first != order.end()) ++shards_on[size_t(first - order.begin())];
  // Round by round: a host gets its (n+1)-th shard only once every host with a free rank has n.
  for (int round = 0; int(replay_ranks_.size()) < K; ++round) {
    bool placed = false;
    for (size_t h = 0; h < order.size() && int(replay_ranks_.size()) < K; ++h) {
      if (shards_on[h] > round) continue;
      for (int r = learners + 1; r < world; ++r)
        if (roles_[size_t(r)] == Role::Actor && host_of(r) == order[h]) {
          roles_[size_t(r)] = Role::Replay;
          replay_ranks_.push_back(r);
          ++shards_on[h];
          placed = true;
          break;
        }
    }
    if (!placed && round >= *std::max_element(shards_on.begin(), shards_on.end())) break;  // no free rank left
  }
}

void Layout::assign_shards(const std::vector<std::string>& hosts) {
  auto host_of = [&](int r) { return hosts.empty() ? std::string() : hosts[size_t(r)]; };
  shard_of_.assign(size_t(world), -1);
  int spill = 0;
  std::vector<std::string> seen;
  std::vector<int> next_on_host;
  for (int r = 0; r < world; ++r) {
    if (roles_[size_t(r)] != Role::Actor) continue;
    std::vector<int> local;
    for (size_t k = 0; k < replay_ranks_.size(); ++k)
      if (host_of(replay_ranks_[k]) == host_of(r)) local.push_back(int(k));
    if (local.empty()) {
      shard_of_[size_t(r)] = spill++ % int(replay_ranks_.size());
      continue;
    }
    auto it = std::find(seen.begin(), seen.end(), host_of(r));
    size_t h = size_t(it - seen.begin());
    if (it == seen.end()) {
      seen.push_back(host_of(r));
      next_on_host.push_back(0);
    }
    shard_of_[size_t(r)] = local[size_t(next_on_host[h]++) % local.size()];
  }
  // A shard on a host without actors of its own (shard 0 beside learners on a node of their own,
  // as slurm/train.sbatch places them) takes the last actor of the shard that has the most, while
  // that one keeps at least one: its rollouts cross the network, every other actor's stay local.
  for (;;) {
    std::vector<int> count(replay_ranks_.size(), 0);
    for (int r : actor_ranks_)
      if (shard_of_[size_t(r)] >= 0) ++count[size_t(shard_of_[size_t(r)])];
    const auto empty = std::find(count.begin(), count.end(), 0);
    const auto most = std::max_element(count.begin(), count.end());
    if (empty == count.end() || *most < 2) break;
    const int from = int(most - count.begin());
    for (auto r = actor_ranks_.rbegin(); r != actor_ranks_.rend(); ++r)
      if (shard_of_[size_t(*r)] == from) {
        shard_of_[size_t(*r)] = int(empty - count.begin());
        break;
      }
  }
}

Layout make_layout(const Config& cfg, int world_size, const std::vector<std::string>& hosts) {
  const int L = cfg.roles.learners, K = cfg.roles.replays;
  const bool central = cfg.actor.inference == "central";
  const int need = L + K + 1 + (central ? 1 : 0);
  if (world_size < need)
    throw ConfigError(fmt::format(
        "world size {} is too small: roles.learners = {} needs {} learner rank(s) + {} replay rank{}{} + at least 1 "
        "actor rank = {} ranks (start with `mpirun -n {} mpirl train ...`; an MPI program started without its "
        "launcher runs as separate singletons of size 1)",
        world_size, L, L, K, K == 1 ? "" : fmt::format("s (roles.replays = {})", K),
        central ? " + 1 inference rank (actor.inference = \"central\")" : "", need, need));
  Layout l(world_size, L);
  if (K > 1) {
    if (!hosts.empty() && hosts.size() != size_t(world_size))
      throw Error(fmt::format("make_layout: {} host names for {} ranks", hosts.size(), world_size));
    l.place_shards(K, hosts);
    if (l.replays() != K) throw ConfigError(fmt::format("roles.replays = {}: only {} ranks are free for shards", K, l.replays()));
    l.index_actors();
  }
  auto finish = [&] {
    l.assign_shards(hosts);
    // A shard no actor sends to would never fill, and the learners' first batches ask every shard.
    for (int k = 0; k < l.replays(); ++k)
      if (l.actors_of_shard(k).empty())
        throw ConfigError(fmt::format(
            "roles.replays = {}: replay shard {} (rank {}) gets no actor: there are fewer actor ranks than shards "
            "to share among them. Start more ranks or fewer shards",
            K, k, l.replay_ranks_[size_t(k)]));
    // actor.synchronous: every actor sends the same whole number of rollouts per update.
    const int64_t per_update = int64_t(cfg.learner.batch_size) * L, per_round = int64_t(l.actors()) * cfg.env.num_envs;
    if (cfg.actor.synchronous && per_update % per_round != 0)
      throw ConfigError(fmt::format(
          "actor.synchronous = true: an update takes learner.batch_size x learners = {} x {} = {} sequences, which "
          "{} actor rank(s) x env.num_envs = {} x {} = {} cannot share in whole rollouts; make it a multiple of {} "
          "(learner.batch_size, env.num_envs or the number of ranks)",
          cfg.learner.batch_size, L, per_update, l.actors(), l.actors(), cfg.env.num_envs, per_round, per_round));
    return l;
  };
  if (!central) return finish();
  // Per host, in order of first rank: its ranks after the learners and the replay.
  std::vector<std::string> order;
  auto host_of = [&](int r) { return hosts.empty() ? std::string() : hosts[size_t(r)]; };
  for (int r = L + 1; r < world_size; ++r)
    if (l.roles_[size_t(r)] == Role::Actor && std::find(order.begin(), order.end(), host_of(r)) == order.end())
      order.push_back(host_of(r));
  const int k = cfg.roles.inference_per_node;
  const bool on_learner_hosts = cfg.roles.inference_hosts == "learners";
  std::vector<std::vector<int>> servers(order.size()), actors(order.size());
  for (size_t h = 0; h < order.size(); ++h) {
    std::vector<int> ranks;
    for (int r = L + 1; r < world_size; ++r)
      if (l.roles_[size_t(r)] == Role::Actor && host_of(r) == order[h]) ranks.push_back(r);
    bool learner_host = false;
    for (int r = 0; r < L; ++r) learner_host |= host_of(r) == order[h];
    // "each": every host that keeps at least one actor; "learners": the learners' hosts (their GPUs).
    const bool serves = on_learner_hosts ? learner_host && int(ranks.size()) >= k : int(ranks.size()) > k;
    for (size_t i = 0; i < ranks.size(); ++i) {
      if (serves && int(i) < k) {
        l.roles_[size_t(ranks[i])] = Role::Inference;
        l.inference_ranks_.push_back(ranks[i]);
        servers[h].push_back(ranks[i]);
      } else {
        actors[h].push_back(ranks[i]);
      }
    }
  }
  if (l.inference_ranks_.empty())
    throw ConfigError(
        on_learner_hosts
            ? fmt::format("actor.inference = \"central\" with roles.inference_hosts = \"learners\" and "
                          "roles.inference_per_node = {} needs {} rank(s) after the learners and the replay on a "
                          "learner's host; none has that many",
                          k, k)
            : fmt::format("actor.inference = \"central\" with roles.inference_per_node = {} needs a host with at "
                          "least {} ranks after the learners and the replay ({} inference + 1 actor); the largest "
                          "has fewer. Start more ranks per host or lower roles.inference_per_node",
                          k, k + 1, k));
  if (std::count(l.roles_.begin(), l.roles_.end(), Role::Actor) == 0)
    throw ConfigError(fmt::format("actor.inference = \"central\": all {} ranks after the learners and the replay "
                                  "serve inference, none is left to act",
                                  world_size - L - K));
  std::sort(l.inference_ranks_.begin(), l.inference_ranks_.end());
  // Actors of a host with inference ranks: round-robin over them; the others over all of them.
  int spill = 0;
  for (size_t h = 0; h < order.size(); ++h)
    for (size_t i = 0; i < actors[h].size(); ++i) {
      const auto& pool = servers[h].empty() ? l.inference_ranks_ : servers[h];
      const size_t pick = servers[h].empty() ? size_t(spill++) : i;
      l.server_[size_t(actors[h][i])] = pool[pick % pool.size()];
    }
  l.index_actors();
  return finish();
}

}  // namespace mpirl
