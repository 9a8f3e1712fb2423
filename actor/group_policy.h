#pragma once
// Where an actor's actions come from, one env group at a time (private to actor/):
//   LocalPolicy   the policy on this rank's CPU (models::Acting per group), parameters from the
//                 publish broadcast;
//   RemotePolicy  an inference rank (comm/inference_wire.h): the group's observations go out as
//                 soon as the group has stepped, the distribution rows and core states come back,
//                 and the actor samples from those rows itself (models::Sampler).
// Both write a group's step straight into the rollout: the distribution rows and log-probs through
// `Rows`, the actions as int64 [n] or float32 [n, A] from actions(g).
#include <cstdint>
#include <memory>
#include <vector>

#include <torch/torch.h>

#include "comm/inference_wire.h"
#include "comm/param_channel.h"
#include "comm/ranks.h"
#include "comm/transport.h"
#include "comm/wire.h"
#include "core/config.h"
#include "models/acting.h"
#include "models/sampler.h"

namespace mpirl::actor {

class GroupPolicy {
 public:
  using Rows = models::Sampler::Rows;
  virtual ~GroupPolicy() = default;
  // Blocks until the policy can act (local: the first parameters); false when the run stops first.
  virtual bool start() = 0;
  // Group g's observations of its next step are in place: `obs` rows of the group, `obs_stride`
  // elements apart; is_init `init_stride` apart (central: sends them to the inference rank).
  virtual void observed(int g, const void* obs, int64_t obs_stride, const uint8_t* is_init, int64_t init_stride) = 0;
  // Acts for group g on the observations given to observed(); false when the run stops instead.
  virtual bool act(int g, const void* obs, int64_t obs_stride, const uint8_t* is_init, int64_t init_stride,
                   const Rows& out) = 0;
  virtual const void* actions(int g) const = 0;
  // The parameters' version behind the last act() of any group.
  virtual int64_t version() const = 0;
  // Env e's core state after its last step (S floats); nullptr without a core.
  virtual const float* state(int e) = 0;
  // Between steps and while waiting: false once the run stops.
  virtual bool poll() = 0;
  // The run is stopping: settles every message in flight (central: each request's reply, then InferBye).
  virtual void finish() = 0;
};

struct Groups {
  std::vector<EnvGroup> g;
  int of_env(int e) const;  // the group holding env e
};

// learner.algo = "r2d2": the epsilons of this actor's env.num_envs envs, rungs of one Ape-X ladder
// over every env of every actor (models/sampler.h); empty for the other algorithms.
std::vector<double> actor_epsilons(const Config& cfg, const Comms& comms);

class LocalPolicy final : public GroupPolicy {
 public:
  LocalPolicy(const Config& cfg, const Comms& comms, const envs::EnvSpec& spec, const Groups& groups, uint64_t seed);
  bool start() override;
  void observed(int, const void*, int64_t, const uint8_t*, int64_t) override {}
  bool act(int g, const void* obs, int64_t obs_stride, const uint8_t* is_init, int64_t init_stride,
           const Rows& out) override;
  const void* actions(int g) const override;
  int64_t version() const override { return version_; }
  const float* state(int e) override;
  bool poll() override;
  void finish() override {}

 private:
  envs::EnvSpec spec_;
  Groups groups_;
  models::Policy policy_;
  ParamChannel params_;
  std::vector<models::Acting> acting_;  // one per group
  std::vector<float> flat_;
  int64_t version_ = -1;
  bool stop_ = false;
};

class RemotePolicy final : public GroupPolicy {
 public:
  RemotePolicy(const Config& cfg, const Comms& comms, const envs::EnvSpec& spec, const Groups& groups, uint64_t seed);
  bool start() override { return true; }
  void observed(int g, const void* obs, int64_t obs_stride, const uint8_t* is_init, int64_t init_stride) override;
  bool act(int g, const void* obs, int64_t obs_stride, const uint8_t* is_init, int64_t init_stride,
           const Rows& out) override;
  const void* actions(int g) const override;
  int64_t version() const override { return version_; }
  const float* state(int e) override { return S_ > 0 ? state_.data() + int64_t(e) * S_ : nullptr; }
  bool poll() override;
  void finish() override;

 private:
  struct Group {
    MsgBuffer request, reply;  // the request frame; the posted receive of its reply
    bool outstanding = false;  // a request is in flight
    bool arrived = false;      // its reply (or a Stop) is in `reply`
    uint64_t seq = 0;
    int reply_bytes = 0;
    wire::Message msg;  // the reply, decoded (views into `reply`)
  };
  void post_reply(int g);
  void settle(MPI_Request& req);  // tests a just-posted request until it is sent (at most 1 ms)
  bool test_reply(int g);  // true once group g's reply is in (sets stop_ on a Stop)
  void check_silence(double waited_since);

  const Config& cfg_;
  const Comms& comms_;
  envs::EnvSpec spec_;
  Groups groups_;
  int server_;
  int64_t S_;
  models::Sampler sampler_;
  std::vector<Group> g_;
  std::vector<std::vector<int64_t>> discrete_;  // per group: int64 [n] (discrete specs)
  std::vector<std::vector<float>> box_;         // per group: float32 [n, A] (box specs)
  std::vector<float> state_;                   // [E, S]: each env's core state after its last step
  std::vector<double> eps_;                    // [E] R2D2's epsilons, or empty
  int64_t version_ = -1;
  uint64_t seq_ = 0;
  bool stop_ = false, answered_once_ = false;
};

}  // namespace mpirl::actor
