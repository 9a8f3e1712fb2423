#pragma once
// The actor role's loop (private to actor/): class Actor fills rollouts into preallocated message
// slots and sends them to the replay. actor.cpp: its setup, loop, credits, sends and stop;
// collect_rollout.cpp: stepping the env groups into a slot.
#include <cstdint>
#include <memory>
#include <vector>

#include "actor/group_policy.h"
#include "actor/reward_norm.h"
#include "actor/sequence_priority.h"
#include "comm/ranks.h"
#include "comm/rollout_codec.h"
#include "comm/seq_layout.h"
#include "comm/transport.h"
#include "comm/wire.h"
#include "core/config.h"
#include "core/error.h"
#include "envs/vector_env.h"

namespace mpirl::actor {

// One preallocated rollout message: header region, then the payload for E sequences and room for
// up to E*T finished-episode statistics.
// (A MsgBuffer: kept for MPI if the actor dies with its send in flight.)
// With compressed observations the frame sent is z's (buf keeps the raw rollout, whose last
// observations start the next one).
struct Slot : MsgBuffer {
  MsgBuffer z;
  char* payload() { return buf.data() + wire::kHeaderRegion; }
};

class Actor {
 public:
  Actor(const Config& cfg, const Comms& comms, int64_t segment);
  void run();

 private:
  template <class T>
  T* field(Slot& s, Seq f) { return layout_->ptr<T>(s.payload(), f, E_); }
  float* f32(Slot& s, Seq f) { return field<float>(s, f); }
  uint8_t* u8(Slot& s, Seq f) { return field<uint8_t>(s, f); }
  // Observation t of env e in a slot (float32 or uint8 as the spec says).
  uint8_t* obs_row(Slot& s, int64_t e, int64_t t) {
    return u8(s, Seq::Obs) + (e * (T_ + 1) + t) * spec_.obs_bytes();
  }

  void post_ctl() { MPIRL_MPI(MPI_Irecv(ctl_.buf.data(), int(ctl_.buf.size()), MPI_BYTE, comms_.layout.replay_of(comms_.rank),
                                        kTagActorCtl, comms_.world, &ctl_.req)); }

  // The replay's credits and control messages, sends, the stop (actor.cpp).
  bool poll_ctl();
  template <class Done>
  bool wait_until(Done done);
  bool wait_for(Slot& s);
  bool take_turn();
  void send(Slot& s);
  void finish();
  // Stepping the env groups into a slot from step t0 (collect_rollout.cpp): 0 for an actor's first
  // rollout, O_ after it (the steps before t0 are the previous rollout's last O_, from carry_over).
  bool collect(Slot& s, int64_t t0);
  void record_truncation(Slot& s, int g, int64_t e, int64_t t);
  void carry_over(Slot& from, Slot& to);

  const Config& cfg_;
  const Comms& comms_;
  const int64_t E_, T_;
  const int64_t O_;  // rollout overlap (comm/seq_layout.h: rollout_overlap): R2D2's burn-in
  const uint64_t seed_;  // of a resumed run's segment
  Groups groups_;
  std::vector<std::unique_ptr<envs::VectorEnv>> venv_;  // one per env group; built-in or Python
  envs::EnvSpec spec_;
  std::unique_ptr<SeqLayout> layout_;
  std::unique_ptr<GroupPolicy> policy_;  // local or central inference (actor/group_policy.h)
  std::vector<Slot> slots_;
  std::vector<int64_t> boot_count_;  // per env: boot slots used in the rollout being collected
  std::vector<float> overlap_state_;  // [E, S]: each env's core state before step T - O (the next state0)
  MsgBuffer ctl_;  // the posted receive of the replay's control messages (4 KiB)
  int credits_ = 0;
  // actor.synchronous: rollouts per parameter version (0: no limit), the version of the rollouts
  // counted and how many have started with it.
  int64_t turn_quota_ = 0, turn_version_ = -1, turn_count_ = 0;
  int64_t min_version_ = -1;
  std::vector<int64_t> step_version_;  // [T]: the oldest parameters' version behind each step of the rollout
  uint64_t seq_ = 0;
  int64_t env_steps_sent_ = 0;  // counted here; the replay and the learners count their own
  PriorityOptions priority_;  // R2D2's actor-computed initial priorities (actor/sequence_priority.h)
  std::unique_ptr<RewardNormalizer> reward_norm_;  // actor.reward_norm, else null
  std::unique_ptr<ObsCodec> codec_;  // compressed observations (actor.compress_obs), else null
  bool stop_ = false, done_acked_ = false;
};

}  // namespace mpirl::actor
