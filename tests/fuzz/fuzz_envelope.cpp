// libFuzzer target: any bytes as a received frame, through wire::decode and then every consumer's
// check of what it accepts (the rollout and sample-reply layouts of a CartPole run, with and without
// a recurrent state, inference requests and replies, priority updates, checkpoint requests,
// ActorDone, episode statistics, parameter broadcasts' sizes). Each may throw mpirl::Error; nothing
// may crash, read out of bounds or allocate what the bytes claim.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

#include "buffer/messages.h"
#include "comm/inference_wire.h"
#include "comm/seq_layout.h"
#include "comm/wire.h"
#include "core/error.h"
#include "tests/fuzz/fuzz_specs.h"

using namespace mpirl;

using fuzz::cartpole;
using fuzz::pixels;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const SeqLayout plain(cartpole(), 8), recurrent(cartpole(), 8, 6);
  static const envs::EnvSpec px = pixels();
  // decode reads the frame in place: a copy aligned as MPI receive buffers are.
  std::vector<uint64_t> aligned((size + 7) / 8 + 1);
  std::memcpy(aligned.data(), data, size);
  const char* frame = reinterpret_cast<const char*>(aligned.data());
  wire::Message msg;
  try {
    msg = wire::decode(frame, size, -1);  // any sender (as a broadcast): every consumer gets a try
  } catch (const Error&) {
    return 0;
  }
  auto guarded = [](auto&& f) {
    try {
      f();
    } catch (const Error&) {
    }
  };
  guarded([&] { plain.check(msg, 3); });
  guarded([&] { recurrent.check(msg, 3); });
  guarded([&] { buffer::read_episode_stats(msg, plain.fields().size(), 3); });
  guarded([&] { buffer::read_priority_update(msg, 3); });
  guarded([&] { buffer::read_checkpoint_request(msg, 0); });
  guarded([&] { buffer::read_actor_done(msg, 3); });
  guarded([&] { read_infer_request(msg, cartpole(), 2, 8, 3); });
  guarded([&] { read_infer_request(msg, px, 1, 16, 3); });
  guarded([&] { read_infer_reply(msg, cartpole(), 0, 0, 0, 4, 3); });
  guarded([&] { read_infer_reply(msg, px, 6, 1, 2, 8, 3); });
  return 0;
}
