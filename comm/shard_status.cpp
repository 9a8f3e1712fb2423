#include "comm/shard_status.h"

#include <algorithm>

namespace mpirl {

ReplayStatus merge_shard_status(const std::vector<ReplayStatus>& shards) {
  if (shards.size() == 1) return shards[0];
  ReplayStatus m;
  if (shards.empty()) return m;
  m = shards[0];
  m.shard = -1;
  for (size_t k = 1; k < shards.size(); ++k) {
    const ReplayStatus& s = shards[k];
    m.env_steps += s.env_steps;
    m.actor_env_steps += s.actor_env_steps;
    m.rollouts += s.rollouts;
    m.discarded_rollouts += s.discarded_rollouts;
    m.episodes += s.episodes;
    m.inserted += s.inserted;
    m.restored += s.restored;
    m.evicted += s.evicted;
    m.consumed += s.consumed;
    m.fill += s.fill;
    m.capacity += s.capacity;
    m.sampled += s.sampled;
    m.batches += s.batches;
    m.priority_updates += s.priority_updates;
    m.stale_priority_updates += s.stale_priority_updates;
    m.max_priority = std::max(m.max_priority, s.max_priority);
    m.priority_mass += s.priority_mass;
    if (m.sampled_by_learner.size() < s.sampled_by_learner.size()) m.sampled_by_learner.resize(s.sampled_by_learner.size(), 0);
    for (size_t l = 0; l < s.sampled_by_learner.size(); ++l) m.sampled_by_learner[l] += s.sampled_by_learner[l];
    auto& d = m.dump;
    d.dumps = std::min(d.dumps, s.dump.dumps);
    d.failures += s.dump.failures;
    d.items += s.dump.items;
    d.checksum ^= s.dump.checksum;
    d.seconds = std::max(d.seconds, s.dump.seconds);
    if (d.last_error.empty()) d.last_error = s.dump.last_error;
    d.final_failed = d.final_failed || s.dump.final_failed;
    auto& c = m.checkpoint;
    c.requests = std::min(c.requests, s.checkpoint.requests);
    c.completed = std::min(c.completed, s.checkpoint.completed);
    c.failures += s.checkpoint.failures;
    c.items += s.checkpoint.items;
    c.checksum ^= s.checkpoint.checksum;
    c.seconds = std::max(c.seconds, s.checkpoint.seconds);
    c.last_ok = c.last_ok && s.checkpoint.last_ok;
    if (c.last_error.empty()) c.last_error = s.checkpoint.last_error;
  }
  return m;
}

}  // namespace mpirl
