#pragma once
// The layout of sequences on the wire and in the replay: one item is one env's T-step sequence.
// A message holding n sequences stores each field as [n, per-sequence shape...] (env-major), so an
// item is a contiguous slice of every field and the replay moves items with one memcpy per field.
//
//   obs          float32 [T+1, obs...]  observation before each step, plus the bootstrap one
//   is_init      uint8   [T+1]          1 where the observation is the first of an episode
//   action       int64 [T] | float32 [T, A]
//   reward       float32 [T]
//   terminated   uint8   [T]            the step ended the episode in a terminal state
//   truncated    uint8   [T]            the step hit a time limit (bootstrap from trunc_value)
//   logp         float32 [T]            behaviour log-probability of the action
//   dist         float32 [T, L]         behaviour logits (or mean and log-std)
//   trunc_value  float32 [T]            behaviour value of the last state where truncated, else 0
//   version      int64   []             policy version that collected the sequence (oldest used)
//   actor        int32   []             actor rank
//   env_index    int32   []             env index within the actor
//   state0       float32 [S]            recurrent core state before step 0 (only when S > 0)
// Messages may append episode statistics: episode_return float32 [m], episode_length int32 [m].
#include <cstdint>
#include <vector>

#include "envs/env.h"
#include "runtime/wire.h"

namespace mpirl {

struct SeqField {
  const char* name;
  wire::DType dtype;
  std::vector<int64_t> shape;  // per sequence
  size_t bytes = 0;            // per sequence
};

class SeqLayout {
 public:
  SeqLayout(const envs::EnvSpec& spec, int64_t T, int64_t state_size = 0);
  int64_t T() const { return T_; }
  int64_t state_size() const { return S_; }
  const std::vector<SeqField>& fields() const { return fields_; }
  int index(const char* name) const;  // throws if unknown
  size_t bytes_per_sequence() const;

  // Descriptors for n sequences (+ m episode stats when with_stats).
  std::vector<wire::ArrayDesc> arrays(int64_t n, bool with_stats = false, int64_t m = 0) const;
  // Checks that a decoded message holds sequences of this layout; throws naming the sender.
  int64_t check(const wire::Message& msg, int sender) const;  // returns n

  // Copies sequence i of a message with n_src sequences into slot j of one with n_dst.
  void copy_sequence(const char* src, int64_t n_src, int64_t i, char* dst, int64_t n_dst, int64_t j) const;
  // Offset of field f for a payload holding n sequences.
  size_t field_offset(size_t f, int64_t n) const;

 private:
  int64_t T_, S_;
  std::vector<SeqField> fields_;
};

}  // namespace mpirl
