#pragma once
// The layout of sequences on the wire and in the replay: one item is one env's T-step sequence.
// A message holding n sequences stores each field as [n, per-sequence shape...] (env-major), so an
// item is a contiguous slice of every field and the replay moves items with one memcpy per field.
//
//   obs          float32 [T+1, obs...]  observation before each step, plus the bootstrap one
//                (uint8 for image envs, EnvSpec::obs_uint8: pixels stay uint8 up to the policy)
//   is_init      uint8   [T+1]          1 where the observation is the first of an episode
//   action       int64 [T] | float32 [T, A]
//   reward       float32 [T]
//   terminated   uint8   [T]            the step ended the episode in a terminal state
//   truncated    uint8   [T]            the step hit a time limit: bootstrap from boot_obs
//   logp         float32 [T]            behaviour log-probability of the action
//   dist         float32 [T, L]         behaviour logits (or mean and log-std)
//   boot_obs     float32 [K, obs...]    (uint8 like obs) last observation of each episode truncated in the sequence
//   boot_state   float32 [K, S]         the core state the actor had at that step (S > 0 only)
//   boot_step    int32   [K]            the step t it belongs to, -1 for an unused slot
//   version      int64   []             policy version that collected the sequence (oldest used)
//   actor        int32   []             actor rank
//   env_index    int32   []             env index within the actor
//   state0       float32 [S]            recurrent core state before step 0 (S > 0 only)
//   initial_priority float32 []         the priority the actor computed for the sequence (R2D2 with
//                r2d2.initial_priority = "actor" only; actor/sequence_priority.h): the replay
//                inserts the item with it; negative: with the largest priority so far
// The learner computes the value of boot_obs with its current parameters (not the actor's old
// ones). K = min(T, ceil(T / max_episode_steps)) slots: truncations of one env are at least
// max_episode_steps apart; envs with no time limit have K = 0 and may not truncate.
// Rollout messages append episode statistics: episode_return float32 [m], episode_length int32 [m].
#include <array>
#include <cstdint>
#include <vector>

#include "comm/wire.h"
#include "core/config.h"
#include "envs/env.h"

namespace mpirl {

enum class Seq : int {
  Obs, IsInit, Action, Reward, Terminated, Truncated, Logp, Dist, BootObs, BootState, BootStep, Version, Actor,
  EnvIndex, State0, InitialPriority, Count
};
inline constexpr size_t kSeqFields = size_t(Seq::Count);

struct SeqField {
  Seq id;
  const char* name;
  wire::DType dtype;
  std::vector<int64_t> shape;  // per sequence
  size_t bytes = 0;            // per sequence
};

class SeqLayout {
 public:
  // initial_priority: the layout carries the actor-computed priority field (seq_layout_priority(cfg)).
  SeqLayout(const envs::EnvSpec& spec, int64_t T, int64_t state_size = 0, bool initial_priority = false);
  int64_t T() const { return T_; }
  int64_t state_size() const { return S_; }
  int64_t boot_slots() const { return K_; }  // K
  // The fields present, in wire order.
  const std::vector<SeqField>& fields() const { return fields_; }
  bool has(Seq f) const { return pos_[size_t(f)] >= 0; }
  size_t position(Seq f) const;                  // index in fields(); checks has(f)
  const SeqField& field(Seq f) const { return fields_[position(f)]; }
  size_t bytes_per_sequence() const;

  // Offset of a field in a payload holding n sequences, and typed pointers into one.
  size_t offset(Seq f, int64_t n) const { return field_offset(position(f), n); }
  size_t field_offset(size_t position, int64_t n) const;
  template <class T>
  T* ptr(char* payload, Seq f, int64_t n) const { return reinterpret_cast<T*>(payload + offset(f, n)); }
  template <class T>
  const T* ptr(const char* payload, Seq f, int64_t n) const {
    return reinterpret_cast<const T*>(payload + offset(f, n));
  }

  // Descriptors for n sequences (+ m episode stats when with_stats).
  std::vector<wire::ArrayDesc> arrays(int64_t n, bool with_stats = false, int64_t m = 0) const;
  // Checks that a decoded message holds sequences of this layout; throws naming the sender.
  int64_t check(const wire::Message& msg, int sender) const;  // returns n

  // Copies sequence i of a message with n_src sequences into slot j of one with n_dst.
  void copy_sequence(const char* src, int64_t n_src, int64_t i, char* dst, int64_t n_dst, int64_t j) const;

 private:
  int64_t T_, S_, K_;
  std::vector<SeqField> fields_;
  std::array<int, kSeqFields> pos_;
};

// A SampleReply: B sequences of the layout, m episode statistics (at most
// kMaxEpisodeStatsPerReply), then per sequence: slot int64, generation int64, weight float32,
// insert_seq int64 (the replay's insertion number), prob float64 (its probability of a draw within
// the shard that sampled it: what a learner needs for importance weights over several shards).
std::vector<wire::ArrayDesc> sample_reply_arrays(const SeqLayout& layout, int64_t B, int64_t m);
// The largest SampleReply frame for B sequences and `learners` learners (receive buffers are
// posted with this size before the reply is sent).
size_t sample_reply_capacity(const SeqLayout& layout, int64_t B, int learners);
// Where a SampleReply's payload starts: room for the largest envelope (its array descriptors and
// the status: fixed fields, one int64 per learner, two strings of at most kMaxStatusString).
size_t sample_reply_payload_offset(int learners);

// Steps each rollout repeats from the end of the one before it (same actor, same envs): R2D2's
// burn-in, so that every burn-in runs over the steps that really came before its sequence and every
// step is trained on once; 0 for the other algorithms. An actor's first rollout repeats nothing.
int64_t rollout_overlap(const Config& cfg);
// Whether the run's sequences carry the actor-computed initial priority (R2D2 with
// r2d2.initial_priority = "actor"); every rank builds its layout with this.
bool seq_layout_priority(const Config& cfg);
// The env steps rollout number `seq` of an actor (0, 1, ...) holds that no rollout before it did.
inline int64_t new_steps(int64_t T, int64_t overlap, uint64_t seq) { return seq == 0 ? T : T - overlap; }

// Boot slots for a sequence of T steps of an env with this spec.
int64_t boot_slots(const envs::EnvSpec& spec, int64_t T);

}  // namespace mpirl
