#include "buffer/messages.h"

#include "core/error.h"

namespace mpirl::buffer {

PriorityUpdateView read_priority_update(const wire::Message& msg, int src) {
  const auto& a = msg.env.arrays;
  auto bad = [&](const std::string& what) {
    throw Error(fmt::format("PriorityUpdate from rank {} is malformed: {}", src, what));
  };
  if (a.size() != 3 || a[0].name != "slot" || a[1].name != "generation" || a[2].name != "priority")
    bad("expected arrays slot, generation, priority");
  if (a[0].dtype != wire::DType::I64 || a[1].dtype != wire::DType::I64 || a[2].dtype != wire::DType::F32)
    bad("expected i64, i64, f32");
  if (a[0].shape.size() != 1 || a[1].shape != a[0].shape || a[2].shape != a[0].shape) bad("arrays differ in shape");
  return {msg.array<int64_t>(0), msg.array<int64_t>(1), msg.array<float>(2), a[0].shape[0]};
}

CheckpointRequestView read_checkpoint_request(const wire::Message& msg, int src) {
  const auto& a = msg.env.arrays;
  if (src != 0 || a.size() != 2 || a[0].name != "dir" || a[0].dtype != wire::DType::U8 || a[0].shape.size() != 1 ||
      a[1].name != "final" || a[1].dtype != wire::DType::U8 || a[1].elements() != 1)
    throw Error(fmt::format("CheckpointRequest from rank {} is malformed (only learner 0 sends one: arrays dir, final)",
                            src));
  return {std::string(reinterpret_cast<const char*>(msg.array<uint8_t>(0)), size_t(a[0].shape[0])),
          msg.array<uint8_t>(1)[0] != 0};
}

int64_t read_sample_request(const wire::Message& msg, int src, int64_t batch_size) {
  const auto& a = msg.env.arrays;
  if (a.empty()) return batch_size;
  if (a.size() != 1 || a[0].name != "n" || a[0].dtype != wire::DType::I64 || a[0].elements() != 1)
    throw Error(fmt::format("SampleRequest from rank {} is malformed: expected no array or one i64 'n'", src));
  const int64_t n = msg.array<int64_t>(0)[0];
  if (n < 0 || n > batch_size)
    throw Error(fmt::format("SampleRequest from rank {} asks for {} sequences; learner.batch_size is {}", src, n,
                            batch_size));
  return n;
}

int64_t read_actor_done(const wire::Message& msg, int src) {
  const auto& a = msg.env.arrays;
  if (a.size() != 1 || a[0].name != "env_steps" || a[0].dtype != wire::DType::I64 || a[0].elements() != 1)
    throw Error(fmt::format("ActorDone from rank {} does not carry its env step count", src));
  return msg.array<int64_t>(0)[0];
}

EpisodeStatsView read_episode_stats(const wire::Message& msg, size_t first, int src) {
  const size_t ir = first, il = first + 1;
  const auto& a = msg.env.arrays;
  if (a.size() != il + 1 || a[ir].name != "episode_return" || a[il].name != "episode_length" ||
      a[ir].dtype != wire::DType::F32 || a[il].dtype != wire::DType::I32 || a[ir].shape.size() != 1 ||
      a[il].shape != a[ir].shape)
    throw Error(fmt::format("rollout from rank {} lacks consistent episode statistics", src));
  return {msg.array<float>(ir), msg.array<int32_t>(il), size_t(msg.desc(ir).elements())};
}

}  // namespace mpirl::buffer
