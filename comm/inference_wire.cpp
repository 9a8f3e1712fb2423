#include "comm/inference_wire.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "core/error.h"

namespace mpirl {

using wire::DType;

EnvGroup env_group(int num_envs, int groups, int g) {
  const int64_t first = int64_t(g) * num_envs / groups, end = int64_t(g + 1) * num_envs / groups;
  return {int(first), int(end - first)};
}

std::vector<wire::ArrayDesc> infer_request_arrays(const envs::EnvSpec& spec, int64_t n) {
  std::vector<int64_t> obs{n};
  obs.insert(obs.end(), spec.obs_shape.begin(), spec.obs_shape.end());
  return {{"obs", spec.obs_uint8 ? DType::U8 : DType::F32, obs}, {"is_init", DType::U8, {n}}, {"group", DType::I32, {2}}};
}

std::vector<wire::ArrayDesc> infer_reply_arrays(const envs::EnvSpec& spec, int64_t n, int64_t state_size) {
  std::vector<wire::ArrayDesc> a = {{"dist", DType::F32, {n, spec.dist_size()}}};
  if (state_size > 0) a.push_back({"state", DType::F32, {n, state_size}});
  a.push_back({"group", DType::I32, {2}});
  return a;
}

size_t infer_request_frame_bytes(const envs::EnvSpec& spec, int64_t n) {
  return wire::kHeaderRegion + wire::payload_bytes(infer_request_arrays(spec, n));
}

size_t infer_reply_frame_bytes(const envs::EnvSpec& spec, int64_t n, int64_t state_size) {
  return wire::kHeaderRegion + wire::payload_bytes(infer_reply_arrays(spec, n, state_size));
}

namespace {

// The arrays must be exactly `want` except for the row count, which is read from the first.
int64_t check_arrays(const wire::Message& msg, const std::vector<wire::ArrayDesc>& want_for_1, int sender,
                     int64_t max_rows) {
  const auto& a = msg.env.arrays;
  auto bad = [&](const std::string& what) {
    throw Error(fmt::format("{} from rank {} is malformed: {}", wire::kind_name(msg.env.kind), sender, what));
  };
  if (a.size() != want_for_1.size())
    bad(fmt::format("{} arrays, expected {}", a.size(), want_for_1.size()));
  const int64_t n = a[0].shape.empty() ? -1 : a[0].shape[0];
  if (n < 1 || n > max_rows) bad(fmt::format("{} rows, expected 1 to {}", n, max_rows));
  for (size_t i = 0; i < a.size(); ++i) {
    auto want = want_for_1[i];
    if (want.name != "group") want.shape[0] = n;
    if (a[i].name != want.name || a[i].dtype != want.dtype || a[i].shape != want.shape)
      bad(fmt::format("array {} is '{}' {} [{}], expected '{}' {} [{}]", i, a[i].name, wire::dtype_name(a[i].dtype),
                      fmt::join(a[i].shape, ","), want.name, wire::dtype_name(want.dtype), fmt::join(want.shape, ",")));
  }
  return n;
}

}  // namespace

InferRequestView read_infer_request(const wire::Message& msg, const envs::EnvSpec& spec, int groups,
                                    int64_t max_rows, int sender) {
  InferRequestView v;
  v.n = check_arrays(msg, infer_request_arrays(spec, 1), sender, max_rows);
  const int32_t* g = msg.array<int32_t>(2);
  if (g[0] < 0 || g[0] >= groups || g[1] < 0)
    throw Error(fmt::format("InferRequest from rank {} names group {} (first env {}); the run has {} group(s)", sender,
                            g[0], g[1], groups));
  v.group = g[0];
  v.first_env = g[1];
  v.obs = msg.array<char>(0);
  v.is_init = msg.array<uint8_t>(1);
  for (int64_t i = 0; i < v.n; ++i)
    if (v.is_init[i] > 1)
      throw Error(fmt::format("InferRequest from rank {}: is_init[{}] = {}, expected 0 or 1", sender, i, v.is_init[i]));
  return v;
}

InferReplyView read_infer_reply(const wire::Message& msg, const envs::EnvSpec& spec, int64_t state_size, int group,
                                int first_env, int64_t n, int sender) {
  InferReplyView v;
  v.n = check_arrays(msg, infer_reply_arrays(spec, 1, state_size), sender, n);
  const int32_t* g = msg.array<int32_t>(state_size > 0 ? 2 : 1);
  if (v.n != n || g[0] != group || g[1] != first_env)
    throw Error(fmt::format("InferReply from rank {} answers group {} (first env {}, {} rows); the actor asked for "
                            "group {} (first env {}, {} rows)",
                            sender, g[0], g[1], v.n, group, first_env, n));
  v.group = group;
  v.first_env = first_env;
  v.dist = msg.array<float>(0);
  v.state = state_size > 0 ? msg.array<float>(1) : nullptr;
  return v;
}

}  // namespace mpirl
