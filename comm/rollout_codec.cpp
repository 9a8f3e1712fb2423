#include "comm/rollout_codec.h"

#include <cstring>

#include <fmt/ranges.h>

#include "core/error.h"

namespace mpirl {
namespace {

// A field that travels compressed: uint8 frames [F, C, H, W] (obs: F = T+1; boot_obs: F = K).
bool image_field(const SeqField& f) {
  return (f.id == Seq::Obs || f.id == Seq::BootObs) && f.dtype == wire::DType::U8 && f.shape.size() == 4;
}
int64_t frames(const SeqField& f) { return f.shape[0]; }
int64_t planes(const SeqField& f) { return f.shape[1]; }
int64_t plane_bytes(const SeqField& f) { return f.shape[2] * f.shape[3]; }

}  // namespace

bool obs_compressible(const envs::EnvSpec& spec) { return spec.obs_uint8 && spec.obs_shape.size() == 3; }

size_t encode_rollout(ObsCodec& codec, const SeqLayout& layout, const char* raw, int64_t n, int64_t m,
                      wire::Envelope env, std::vector<char>& frame, size_t* obs_bytes) {
  const auto& fields = layout.fields();
  MPIRL_CHECK(image_field(fields[0]), "compressed rollouts need image observations");
  auto plain = layout.arrays(n, true, m);
  std::vector<size_t> plain_off;
  wire::payload_bytes(plain, &plain_off);
  // The encodings of each image field first (their sizes shape the message).
  thread_local std::vector<std::vector<char>> z;
  thread_local std::vector<std::vector<int64_t>> lens;
  z.resize(fields.size());
  lens.resize(fields.size());
  env.arrays.clear();
  size_t total_z = 0;
  for (size_t i = 0; i < fields.size(); ++i) {
    const auto& f = fields[i];
    if (!image_field(f)) {
      env.arrays.push_back(plain[i]);
      continue;
    }
    z[i].clear();
    lens[i].assign(static_cast<size_t>(n), 0);
    const auto* src = reinterpret_cast<const uint8_t*>(raw + plain_off[i]);
    for (int64_t s = 0; s < n; ++s)
      lens[i][size_t(s)] = int64_t(codec.encode(src + size_t(s) * f.bytes, frames(f), planes(f), plane_bytes(f), z[i]));
    total_z += z[i].size();
    env.arrays.push_back({std::string(f.name) + "_z", wire::DType::U8, {int64_t(z[i].size())}});
    env.arrays.push_back({std::string(f.name) + "_z_bytes", wire::DType::I64, {n}});
  }
  if (obs_bytes) *obs_bytes = total_z;
  env.arrays.push_back(plain[fields.size()]);  // the episode statistics
  env.arrays.push_back(plain[fields.size() + 1]);
  std::vector<size_t> off;
  const size_t payload = wire::payload_bytes(env.arrays, &off);
  const size_t at = wire::natural_payload_offset(env);
  frame.resize(at + payload);
  char* p = frame.data() + at;
  size_t k = 0;
  for (size_t i = 0; i < fields.size(); ++i) {
    if (image_field(fields[i])) {
      std::memcpy(p + off[k++], z[i].data(), z[i].size());
      std::memcpy(p + off[k++], lens[i].data(), lens[i].size() * 8);
    } else {
      std::memcpy(p + off[k++], raw + plain_off[i], plain[i].bytes());
    }
  }
  for (size_t i = fields.size(); i < plain.size(); ++i) std::memcpy(p + off[k++], raw + plain_off[i], plain[i].bytes());
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
  const auto& fields = layout.fields();
  if (!image_field(fields[0])) bad("this run's observations are not images, so never compressed");
  // Every array's name, type and shape first (n from obs_z_bytes), then the data.
  if (a.size() < 2 || a[1].shape.size() != 1) bad("array 1 is not obs_z_bytes int64 [n]");
  const int64_t n = a[1].shape[0];
  if (n != expect_n) bad(fmt::format("{} sequences, expected {}", n, expect_n));
  size_t k = 0;
  auto expect = [&](const std::string& name, wire::DType dtype, const std::vector<int64_t>* shape) {
    if (k >= a.size()) bad(fmt::format("{} arrays, expected '{}' next", a.size(), name));
    const auto& g = a[k];
    if (g.name != name || g.dtype != dtype || (shape ? g.shape != *shape : g.shape.size() != 1))
      bad(fmt::format("array {} is '{}' {} [{}], expected '{}' {}{}", k, g.name, wire::dtype_name(g.dtype),
                      fmt::join(g.shape, ","), name, wire::dtype_name(dtype),
                      shape ? fmt::format(" [{}]", fmt::join(*shape, ",")) : std::string(" [Z]")));
    ++k;
  };
  for (const auto& f : fields) {
    if (image_field(f)) {
      expect(std::string(f.name) + "_z", wire::DType::U8, nullptr);
      const std::vector<int64_t> want{n};
      expect(std::string(f.name) + "_z_bytes", wire::DType::I64, &want);
    } else {
      std::vector<int64_t> want{n};
      want.insert(want.end(), f.shape.begin(), f.shape.end());
      expect(f.name, f.dtype, &want);
    }
  }
  k = 0;
  for (size_t i = 0; i < fields.size(); ++i) {
    const auto& f = fields[i];
    char* out = dst + layout.field_offset(i, n);
    if (!image_field(f)) {
      std::memcpy(out, msg.payload + msg.offsets[k], a[k].bytes());
      ++k;
      continue;
    }
    const int64_t zn = a[k].shape[0];
    const char* z = msg.array<char>(k);
    const int64_t* lens = msg.array<int64_t>(k + 1);
    int64_t used = 0;
    for (int64_t s = 0; s < n; ++s) {
      if (lens[s] <= 0 || lens[s] > zn - used)
        bad(fmt::format("{} encoding {} claims {} bytes, {} of {}'s {} are left", f.name, s, lens[s], zn - used,
                        a[k].name, zn));
      codec.decode(z + used, size_t(lens[s]), reinterpret_cast<uint8_t*>(out) + size_t(s) * f.bytes, frames(f),
                   planes(f), plane_bytes(f), fmt::format("compressed rollout from rank {}, {} of sequence {}", sender,
                                                          f.name, s));
      used += lens[s];
    }
    if (used != zn) bad(fmt::format("the {} encodings hold {} bytes, {} {}", f.name, used, a[k].name, zn));
    k += 2;
  }
  return n;
}

}  // namespace mpirl
