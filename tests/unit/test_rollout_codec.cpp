// comm/rollout_codec.h: a compressed rollout decodes into exactly the plain payload the actor
// had (every field, bit for bit), and a malformed one is an error naming the sender.
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <vector>

#include "comm/rollout_codec.h"
#include "core/error.h"
#include "tests/fuzz/fuzz_specs.h"

using namespace mpirl;

namespace {

// The fuzz targets' pixel spec (uint8 [4, 10, 10]) with a time limit, so that boot slots are in use.
envs::EnvSpec pixels() {
  envs::EnvSpec s = fuzz::pixels();
  s.max_episode_steps = 7;
  return s;
}

// A plain payload of n sequences and m statistics: stacked frames (plane t of env e at frame t's
// last position), every other byte random.
std::vector<char> plain_payload(const SeqLayout& l, int64_t n, int64_t m, uint32_t seed) {
  auto arrays = l.arrays(n, true, m);
  std::vector<size_t> off;
  std::vector<char> p(wire::payload_bytes(arrays, &off));
  std::mt19937 rng(seed);
  for (auto& b : p) b = char(rng());
  const int64_t F = l.T() + 1, C = 4, P = 100;
  auto* obs = reinterpret_cast<uint8_t*>(p.data() + off[0]);
  for (int64_t e = 0; e < n; ++e)
    for (int64_t t = 0; t < F; ++t)
      for (int64_t c = 0; c < C; ++c)
        for (int64_t i = 0; i < P; ++i)
          obs[((e * F + t) * C + c) * P + i] = uint8_t((e * 31 + t + c) * 7 + (i == (t + c) % P ? 100 : 0));
  return p;
}

wire::Envelope rollout_env(int sender) {
  wire::Envelope env;
  env.kind = wire::Kind::Rollout;
  env.sender = sender;
  env.seq = 5;
  env.policy_version = 9;
  return env;
}

}  // namespace

TEST(RolloutCodec, DecodesToThePlainPayloadBitForBit) {
  const SeqLayout l(pixels(), 16);
  ASSERT_TRUE(obs_compressible(pixels()));
  const int64_t n = 3, m = 2;
  auto raw = plain_payload(l, n, m, 1);
  ObsCodec codec;
  std::vector<char> frame;
  size_t obs_z = 0;
  const size_t len = encode_rollout(codec, l, raw.data(), n, m, rollout_env(4), frame, &obs_z);
  ASSERT_EQ(len, frame.size());
  EXPECT_LT(obs_z, l.field(Seq::Obs).bytes * size_t(n) / 4);  // stacked frames: far smaller
  auto msg = wire::decode(frame.data(), frame.size(), 4, {wire::Kind::Rollout});
  ASSERT_TRUE(is_compressed_rollout(msg));
  ASSERT_TRUE(l.has(Seq::BootObs));
  EXPECT_GE(msg.find("boot_obs_z"), 0);  // boot slots are image frames too: compressed
  EXPECT_LT(msg.find("boot_obs"), 0);
  EXPECT_EQ(msg.env.policy_version, 9);
  std::vector<char> dst(raw.size(), 0);
  EXPECT_EQ(decode_rollout(codec, l, msg, 4, dst.data(), n), n);
  // Every field of the n sequences (the statistics are read from the message; the alignment
  // padding between fields is not data).
  const size_t nf = l.fields().size();
  for (size_t i = 0; i < nf; ++i)
    EXPECT_EQ(0, std::memcmp(dst.data() + l.field_offset(i, n), raw.data() + l.field_offset(i, n),
                             l.fields()[i].bytes * size_t(n)))
        << l.fields()[i].name;
  auto plain = l.arrays(n, true, m);
  std::vector<size_t> off;
  wire::payload_bytes(plain, &off);
  const int ir = msg.find("episode_return"), il = msg.find("episode_length");
  ASSERT_EQ(size_t(il), msg.env.arrays.size() - 1);  // the last two, as in a plain rollout
  ASSERT_EQ(ir, il - 1);
  EXPECT_EQ(0, std::memcmp(msg.array<float>(size_t(ir)), raw.data() + off[nf], size_t(m) * 4));
  EXPECT_EQ(0, std::memcmp(msg.array<int32_t>(size_t(il)), raw.data() + off[nf + 1], size_t(m) * 4));
  // A plain rollout is not a compressed one.
  wire::Envelope pe = rollout_env(4);
  pe.arrays = plain;
  auto pf = wire::build_frame(pe, raw.data(), raw.size());
  EXPECT_FALSE(is_compressed_rollout(wire::decode(pf.data(), pf.size(), 4)));
}

TEST(RolloutCodec, MalformedCompressedRolloutsNameTheSender) {
  const SeqLayout l(pixels(), 8);
  const int64_t n = 2;
  auto raw = plain_payload(l, n, 0, 2);
  ObsCodec codec;
  std::vector<char> frame;
  encode_rollout(codec, l, raw.data(), n, 0, rollout_env(6), frame);
  std::vector<char> dst(raw.size());
  auto expect_error = [&](const std::vector<char>& f, const std::string& what, int64_t expect_n = 2) {
    try {
      auto msg = wire::decode(f.data(), f.size(), 6);
      decode_rollout(codec, l, msg, 6, dst.data(), expect_n);
      ADD_FAILURE() << "no error for " << what;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("rank 6"), std::string::npos) << what << ": " << e.what();
    }
  };
  expect_error(frame, "more sequences than the receiver has room for", 1);
  // Sequence lengths that do not add up to obs_z: the lengths array is the second.
  auto msg = wire::decode(frame.data(), frame.size(), 6);
  const size_t lens_at = size_t(msg.payload - frame.data()) + msg.offsets[1];
  auto bad = frame;
  int64_t len0;
  std::memcpy(&len0, bad.data() + lens_at, 8);
  const int64_t big = len0 + 1000000;
  std::memcpy(bad.data() + lens_at, &big, 8);
  expect_error(bad, "a length past obs_z");
  bad = frame;
  const int64_t one = 1;
  std::memcpy(bad.data() + lens_at, &one, 8);
  expect_error(bad, "lengths that split an encoding");
  // A flipped byte inside the first encoding.
  bad = frame;
  const size_t z_at = size_t(msg.payload - frame.data()) + msg.offsets[0];
  bad[z_at + size_t(len0) / 2] ^= 0x10;
  expect_error(bad, "a corrupt encoding");
  // The layout of a run with float observations refuses it.
  envs::EnvSpec floats = pixels();
  floats.obs_uint8 = false;
  EXPECT_FALSE(obs_compressible(floats));
  const SeqLayout fl(floats, 8);
  try {
    decode_rollout(codec, fl, msg, 6, dst.data(), 2);
    ADD_FAILURE() << "a float layout accepted a compressed rollout";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("not images"), std::string::npos) << e.what();
  }
}
