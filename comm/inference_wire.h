#pragma once
// The messages of central inference (comm/protocol.h): their arrays, and checks of what arrives
// that name the sender. One request carries one env group of one actor:
//
//   InferRequest  obs      float32 | uint8 [n, obs...]  the group's observations at this step
//                 is_init  uint8   [n]                  1 where an episode starts (the core resets)
//                 group    int32   [2]                  group index, index of its first env
//   InferReply    dist     float32 [n, L]               logits, or mean ++ log_std (what the rollout records)
//                 state    float32 [n, S]               core state after the step (S > 0 only)
//                 group    int32   [2]                  as asked
//   envelope: seq counts the actor's requests (the reply echoes it), policy_version = the
//   parameters' version that computed the reply.
//
// Frames are preallocated with the payload at wire::kHeaderRegion (no allocation per step).
#include <cstdint>
#include <vector>

#include "comm/wire.h"
#include "envs/env.h"

namespace mpirl {

// Env group g of G over an actor's E envs: its first env and its size (sizes differ by at most one).
struct EnvGroup {
  int first = 0, n = 0;
};
EnvGroup env_group(int num_envs, int groups, int g);

std::vector<wire::ArrayDesc> infer_request_arrays(const envs::EnvSpec& spec, int64_t n);
std::vector<wire::ArrayDesc> infer_reply_arrays(const envs::EnvSpec& spec, int64_t n, int64_t state_size);
// Frame sizes with the payload at kHeaderRegion.
size_t infer_request_frame_bytes(const envs::EnvSpec& spec, int64_t n);
size_t infer_reply_frame_bytes(const envs::EnvSpec& spec, int64_t n, int64_t state_size);

struct InferRequestView {
  int group = 0, first_env = 0;
  int64_t n = 0;
  const char* obs = nullptr;         // n rows of spec.obs_bytes()
  const uint8_t* is_init = nullptr;  // n bytes
};
// Checks that a decoded InferRequest holds rows of this spec for a group of at most `max_rows`
// rows and a valid group index (< groups); throws mpirl::Error naming the sender otherwise.
InferRequestView read_infer_request(const wire::Message& msg, const envs::EnvSpec& spec, int groups,
                                    int64_t max_rows, int sender);

struct InferReplyView {
  int group = 0, first_env = 0;
  int64_t n = 0;
  const float* dist = nullptr;   // [n, L]
  const float* state = nullptr;  // [n, S] (nullptr when S = 0)
};
// Checks a decoded InferReply against the group the actor asked for; throws naming the sender.
InferReplyView read_infer_reply(const wire::Message& msg, const envs::EnvSpec& spec, int64_t state_size, int group,
                                int first_env, int64_t n, int sender);

}  // namespace mpirl
