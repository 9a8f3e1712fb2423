#include "comm/rollout_codec.h"

#include <cstring>

#include <fmt/ranges.h>

#include "core/error.h"

namespace mpirl {
namespace {

// The obs field of an image layout: uint8 [T+1, C, H, W]; its planes C and bytes per plane H x W.
bool image_layout(const SeqLayout& l) {
  const auto& f = l.fields()[0];
  return f.id == Seq::Obs && f.dtype == wire::DType::U8 && f.shape.size() == 4;
}
int64_t planes(const SeqLayout& l) { return l.fields()[0].shape[1]; }
int64_t plane_bytes(const SeqLayout& l) { return l.fields()[0].shape[2] * l.fields()[0].shape[3]; }

}  // namespace

bool obs_compressible(const envs::EnvSpec& spec) { return spec.obs_uint8 && spec.obs_shape.size() == 3; }

size_t encode_rollout(ObsCodec& codec, const SeqLayout& layout, const char* raw, int64_t n, int64_t m,
                      wire::Envelope env, std::vector<char>& frame, size_t* obs_bytes) {
  MPIRL_CHECK(image_layout(layout), "compressed rollouts need image observations");
  const int64_t F = layout.T() + 1;
  const size_t seq_obs = layout.field(Seq::Obs).bytes;
  // The encodings first (their total sizes the message), into the frame's tail, then moved.
  thread_local std::vector<char> z;
  z.clear();
  std::vector<int64_t> lens(static_cast<size_t>(n));
  const auto* obs = reinterpret_cast<const uint8_t*>(raw + layout.offset(Seq::Obs, n));
  for (int64_t i = 0; i < n; ++i)
    lens[size_t(i)] = int64_t(codec.encode(obs + size_t(i) * seq_obs, F, planes(layout), plane_bytes(layout), z));
  if (obs_bytes) *obs_bytes = z.size();
  auto plain = layout.arrays(n, true, m);
  std::vector<size_t> plain_off;
  wire::payload_bytes(plain, &plain_off);
  env.arrays = {{"obs_z", wire::DType::U8, {int64_t(z.size())}}, {"obs_z_bytes", wire::DType::I64, {n}}};
  env.arrays.insert(env.arrays.end(), plain.begin() + 1, plain.end());
  std::vector<size_t> off;
  const size_t payload = wire::payload_bytes(env.arrays, &off);
  const size_t at = wire::natural_payload_offset(env);
  frame.resize(at + payload);
  char* p = frame.data() + at;
  std::memcpy(p + off[0], z.data(), z.size());
  std::memcpy(p + off[1], lens.data(), lens.size() * 8);
  for (size_t i = 1; i < plain.size(); ++i) std::memcpy(p + off[i + 1], raw + plain_off[i], plain[i].bytes());
  return wire::write_header(frame.data(), at, env);
}

bool is_compressed_rollout(const wire::Message& msg) {
  return msg.env.kind == wire::Kind::Rollout && !msg.env.arrays.empty() && msg.env.arrays[0].name == "obs_z";
}

int64_t decode_rollout(ObsCodec& codec, const SeqLayout& layout, const wire::Message& msg, int sender, char* dst,
                       int64_t expect_n) {
  const auto& a = msg.env.arrays;
  auto bad = [&](const std::string& what) {
    throw Error(fmt::format("compressed rollout from rank {} does not match the run's sequence layout (T={}): {}",
                            sender, layout.T(), what));
  };
  if (!image_layout(layout)) bad("this run's observations are not images, so never compressed");
  const auto& fields = layout.fields();
  if (a.size() < fields.size() + 1) bad(fmt::format("{} arrays, expected at least {}", a.size(), fields.size() + 1));
  if (a[0].name != "obs_z" || a[0].dtype != wire::DType::U8 || a[0].shape.size() != 1)
    bad("array 0 is not obs_z uint8 [Z]");
  if (a[1].name != "obs_z_bytes" || a[1].dtype != wire::DType::I64 || a[1].shape.size() != 1)
    bad("array 1 is not obs_z_bytes int64 [n]");
  const int64_t n = a[1].shape[0];
  if (n != expect_n) bad(fmt::format("{} sequences, expected {}", n, expect_n));
  for (size_t i = 1; i < fields.size(); ++i) {
    const auto& f = fields[i];
    std::vector<int64_t> want{n};
    want.insert(want.end(), f.shape.begin(), f.shape.end());
    const auto& g = a[i + 1];
    if (g.name != f.name || g.dtype != f.dtype || g.shape != want)
      bad(fmt::format("array {} is '{}' {} [{}], expected '{}' {} [{}]", i + 1, g.name, wire::dtype_name(g.dtype),
                      fmt::join(g.shape, ","), f.name, wire::dtype_name(f.dtype), fmt::join(want, ",")));
  }
  const int64_t* lens = msg.array<int64_t>(1);
  int64_t total = 0;
  for (int64_t i = 0; i < n; ++i) {
    if (lens[i] <= 0 || lens[i] > a[0].shape[0] - total)
      bad(fmt::format("encoding {} claims {} bytes, {} of obs_z's {} are left", i, lens[i], a[0].shape[0] - total,
                      a[0].shape[0]));
    total += lens[i];
  }
  if (total != a[0].shape[0]) bad(fmt::format("the encodings hold {} bytes, obs_z {}", total, a[0].shape[0]));
  const int64_t F = layout.T() + 1;
  const size_t seq_obs = layout.field(Seq::Obs).bytes;
  auto* obs = reinterpret_cast<uint8_t*>(dst + layout.offset(Seq::Obs, n));
  const char* z = msg.array<char>(0);
  for (int64_t i = 0; i < n; ++i) {
    codec.decode(z, size_t(lens[i]), obs + size_t(i) * seq_obs, F, planes(layout), plane_bytes(layout),
                 fmt::format("compressed rollout from rank {}, sequence {}", sender, i));
    z += lens[i];
  }
  for (size_t i = 1; i < fields.size(); ++i)
    std::memcpy(dst + layout.field_offset(i, n), msg.payload + msg.offsets[i + 1], a[i + 1].bytes());
  return n;
}

}  // namespace mpirl
