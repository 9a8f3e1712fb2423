#pragma once
// One global sampling distribution over K replay shards (issue 31; the sampling core of
// roles.replays = K, not yet wired into the ranks). Shard k holds items with sampling weights
// w_i (prioritized: priority^alpha, its sum tree's leaves; uniform: 1) and reports its mass
// M_k = sum of its w_i. A learner splits each batch of B over the shards with counts drawn from
// Multinomial(B, M_k / sum M) (split_batch), and shard k draws its n_k items within itself with
// probability w_i / M_k. Each item is then drawn with probability
//   (M_k / sum M) x (w_i / M_k) = w_i / sum M,
// exactly what one buffer holding every shard's items gives it, independently per draw. Reverb
// instead samples its servers round-robin ("uniform sampling when using multiple backends"): each
// shard gets B / K of the batch whatever its mass, which is not one distribution (the unit test
// shows both). The importance weights follow from the same identity (global_weights).
// FIFO across shards has no single order: each shard hands out its oldest items, and the batch
// takes from each shard in proportion to its size (mass = item count), so no item waits behind
// more than its own shard's older ones.
#include <cstdint>
#include <random>
#include <vector>

namespace mpirl {

// Items per shard for a batch of B: Multinomial(B, masses / sum); a shard of mass 0 gets none.
// Throws mpirl::Error when every mass is 0 or one is negative or not finite.
std::vector<int64_t> split_batch(int64_t B, const std::vector<double>& masses, std::mt19937_64& rng);

// Importance weights of a batch assembled from shards, as one buffer of all their items gives
// them: item j, drawn from shard shard_of[j] with probability local_prob[j] within it, has global
// probability P_j = local_prob[j] x M_k / sum M; w_j = (N x P_j)^-beta, divided by the batch's
// largest (N = total_items over all shards).
std::vector<float> global_weights(const std::vector<double>& local_prob, const std::vector<int>& shard_of,
                                  const std::vector<double>& masses, int64_t total_items, double beta);

}  // namespace mpirl
