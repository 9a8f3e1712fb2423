#include <gtest/gtest.h>

#include <cstring>
#include <functional>
#include <sstream>

#include <boost/archive/binary_oarchive.hpp>

#include "envs/builtin.h"
#include "comm/param_channel.h"
#include "comm/seq_layout.h"
#include "comm/wire.h"

using namespace mpirl;
using namespace mpirl::wire;

namespace {
Envelope sample_env() {
  Envelope e;
  e.kind = Kind::SampleReply;
  e.sender = 3;
  e.seq = 42;
  e.policy_version = 17;
  e.arrays = {{"a", DType::F32, {2, 3}}, {"b", DType::U8, {5}}, {"c", DType::I64, {1}}};
  e.has_status = true;
  e.status.env_steps = 1234;
  e.status.sampled_by_learner = {5, 7};
  e.status.dump.last_error = "disk full";
  return e;
}
std::vector<char> sample_frame(const Envelope& e) {
  std::vector<char> payload(payload_bytes(e.arrays), 0);
  std::vector<size_t> off;
  payload_bytes(e.arrays, &off);
  float* a = reinterpret_cast<float*>(payload.data() + off[0]);
  for (int i = 0; i < 6; ++i) a[i] = float(i) * 1.5f;
  payload[off[1] + 4] = 9;
  int64_t c = -77;
  std::memcpy(payload.data() + off[2], &c, 8);
  return build_frame(e, payload.data(), payload.size());
}
std::string error_of(const std::vector<char>& f, int source, std::vector<Kind> kinds = {}) {
  try {
    decode(f.data(), f.size(), source, kinds);
  } catch (const std::exception& e) {
    return e.what();
  }
  return "";
}
}  // namespace

TEST(Wire, RoundTrip) {
  auto e = sample_env();
  auto f = sample_frame(e);
  auto m = decode(f.data(), f.size(), 3, {Kind::SampleReply});
  EXPECT_EQ(m.env.kind, Kind::SampleReply);
  EXPECT_EQ(m.env.seq, 42u);
  EXPECT_EQ(m.env.policy_version, 17);
  ASSERT_TRUE(m.env.has_status);
  EXPECT_EQ(m.env.status.env_steps, 1234);
  EXPECT_EQ(m.env.status.sampled_by_learner, (std::vector<int64_t>{5, 7}));
  EXPECT_EQ(m.env.status.dump.last_error, "disk full");
  ASSERT_EQ(m.env.arrays.size(), 3u);
  EXPECT_EQ(m.env.arrays[0].shape, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(m.array<float>(0)[5], 7.5f);
  EXPECT_EQ(m.array<uint8_t>(1)[4], 9);
  EXPECT_EQ(m.array<int64_t>(2)[0], -77);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(m.array<int64_t>(2)) % 8, 0u);
}

TEST(Wire, CorruptOrMismatchedMessagesNameTheSender) {
  auto e = sample_env();
  auto f = sample_frame(e);
  // Truncated payload: byte count does not match the declared shapes.
  auto cut = f;
  cut.resize(cut.size() - 3);
  auto msg = error_of(cut, 3);
  EXPECT_NE(msg.find("from rank 3"), std::string::npos) << msg;
  EXPECT_NE(msg.find("declares"), std::string::npos) << msg;
  // Extra bytes.
  auto longer = f;
  longer.push_back(0);
  EXPECT_NE(error_of(longer, 3).find("declares"), std::string::npos);
  // Shorter than the header.
  EXPECT_NE(error_of(std::vector<char>(5), 4).find("from rank 4"), std::string::npos);
  // Garbage envelope.
  auto garbage = f;
  for (size_t i = 8; i < 40 && i < garbage.size(); ++i) garbage[i] = char(0xA5);
  EXPECT_NE(error_of(garbage, 3).find("from rank 3"), std::string::npos);
  // Wrong magic / schema version.
  auto bad = sample_env();
  bad.magic = 0xDEADBEEF;
  EXPECT_NE(error_of(sample_frame(bad), 3).find("bad magic"), std::string::npos);
  auto old = sample_env();
  old.schema = kSchemaVersion + 1;
  EXPECT_NE(error_of(sample_frame(old), 3).find("schema version"), std::string::npos);
  // Unexpected kind, and a sender that lies about who it is.
  EXPECT_NE(error_of(f, 3, {Kind::Rollout}).find("unexpected kind"), std::string::npos);
  EXPECT_NE(error_of(f, 5).find("came from rank 5"), std::string::npos);
}

// Lengths from the bytes are bounded before anything is allocated; a boolean byte must be 0 or 1;
// the payload must start aligned. Each is an error naming the sender, never an allocation of what
// the bytes claim.
TEST(Wire, HostileLengthsFlagsAndOffsetsAreRefusedBeforeAllocating) {
  // A hand-made envelope: magic, schema, kind, sender, seq, version, then a huge array count.
  auto frame_with = [](const std::function<void(boost::archive::binary_oarchive&)>& body, uint32_t offset = 64) {
    std::ostringstream os(std::ios::binary);
    {
      boost::archive::binary_oarchive ar(os, boost::archive::no_header | boost::archive::no_codecvt);
      ar << kMagic << kSchemaVersion << uint16_t(Kind::Rollout) << int32_t(3) << uint64_t(1) << int64_t(0);
      body(ar);
    }
    const std::string e = os.str();
    std::vector<char> f(std::max<size_t>(offset, 8 + e.size()), 0);
    const uint32_t hdr[2] = {uint32_t(e.size()), offset};
    std::memcpy(f.data(), hdr, 8);
    std::memcpy(f.data() + 8, e.data(), e.size());
    return f;
  };
  const auto many_arrays = frame_with([](auto& ar) { ar << (uint32_t(1) << 31); });
  auto m = error_of(many_arrays, 3);
  EXPECT_NE(m.find("array count of 2147483648 exceeds"), std::string::npos) << m;
  EXPECT_NE(m.find("from rank 3"), std::string::npos) << m;
  const auto many_dims = frame_with([](auto& ar) {
    ar << uint32_t(1) << uint32_t(1) << 'x' << uint8_t(DType::F32) << (uint32_t(1) << 31);
  });
  m = error_of(many_dims, 3);
  EXPECT_NE(m.find("dimension count of 2147483648 exceeds"), std::string::npos) << m;
  const auto long_name = frame_with([](auto& ar) { ar << uint32_t(1) << uint32_t(0xFFFFFFF0u); });
  EXPECT_NE(error_of(long_name, 3).find("array name of 4294967280 exceeds"), std::string::npos);
  const auto flag2 = frame_with([](auto& ar) { ar << uint32_t(0) << uint8_t(2); });
  EXPECT_NE(error_of(flag2, 3).find("has_status is the byte 2"), std::string::npos) << error_of(flag2, 3);
  const auto fine = frame_with([](auto& ar) { ar << uint32_t(0) << uint8_t(0); });
  EXPECT_EQ(error_of(fine, 3), "");
  const auto unaligned = frame_with([](auto& ar) { ar << uint32_t(0) << uint8_t(0); }, 72);
  EXPECT_NE(error_of(unaligned, 3).find("payload offset 72 is not a multiple of 64"), std::string::npos);
}

TEST(Wire, SequenceLayoutCheckAndCopy) {
  envs::CartPole env(0);
  SeqLayout layout(env.spec(), 4);
  auto arrays = layout.arrays(3, true, 2);
  std::vector<char> src(payload_bytes(arrays));
  for (size_t i = 0; i < src.size(); ++i) src[i] = char(i * 7);
  Envelope e;
  e.kind = Kind::Rollout;
  e.sender = 2;
  e.arrays = arrays;
  auto f = build_frame(e, src.data(), src.size());
  auto m = decode(f.data(), f.size(), 2);
  EXPECT_EQ(layout.check(m, 2), 3);
  // Copy sequence 1 of 3 into slot 0 of a 1-sequence payload, and compare field by field.
  std::vector<char> dst(payload_bytes(layout.arrays(1)));
  layout.copy_sequence(src.data(), 3, 1, dst.data(), 1, 0);
  for (size_t fi = 0; fi < layout.fields().size(); ++fi) {
    size_t bytes = layout.fields()[fi].bytes;
    EXPECT_EQ(0, std::memcmp(dst.data() + layout.field_offset(fi, 1), src.data() + layout.field_offset(fi, 3) + bytes, bytes))
        << layout.fields()[fi].name;
  }
  // A rollout for another T is rejected with the sender named.
  SeqLayout other(env.spec(), 5);
  try {
    other.check(m, 2);
    FAIL();
  } catch (const std::exception& ex) {
    EXPECT_NE(std::string(ex.what()).find("rank 2"), std::string::npos);
  }
}

TEST(SeqLayout, TypedFieldsAreDisjointAndAbsentOnesAreRefused) {
  envs::CartPole env(1);
  for (int64_t S : {0, 6}) {
    SeqLayout layout(env.spec(), 8, S);
    EXPECT_EQ(layout.has(Seq::State0), S > 0);
    EXPECT_EQ(layout.has(Seq::BootState), S > 0);
    EXPECT_TRUE(layout.has(Seq::BootObs));
    const int64_t n = 3;
    size_t end = 0;
    for (size_t i = 0; i < layout.fields().size(); ++i) {
      const auto& f = layout.fields()[i];
      EXPECT_EQ(layout.position(f.id), i) << f.name;
      EXPECT_EQ(layout.offset(f.id, n), layout.field_offset(i, n)) << f.name;
      EXPECT_GE(layout.offset(f.id, n), end) << f.name << " overlaps the field before it";
      EXPECT_EQ(layout.offset(f.id, n) % wire::kAlign, 0u) << f.name;
      end = layout.offset(f.id, n) + f.bytes * size_t(n);
    }
    EXPECT_EQ(end, payload_bytes(layout.arrays(n)));
    if (S == 0) {
      EXPECT_THROW(layout.offset(Seq::State0, n), std::exception);
    }
  }
}

TEST(SeqLayout, BootSlotsBoundTheTruncationsOfOneSequence) {
  envs::EnvSpec s;
  s.obs_shape = {1};
  s.num_actions = 2;
  s.max_episode_steps = 0;
  EXPECT_EQ(boot_slots(s, 32), 0);  // no time limit: no truncation
  s.max_episode_steps = -1;
  EXPECT_EQ(boot_slots(s, 32), 1);  // may truncate, no limit declared: one per rollout
  s.max_episode_steps = 0;
  s.max_episode_steps = 500;
  EXPECT_EQ(boot_slots(s, 32), 1);
  s.max_episode_steps = 200;
  EXPECT_EQ(boot_slots(s, 400), 2);
  EXPECT_EQ(boot_slots(s, 401), 3);  // steps 0..400 can hold truncations at 0, 200 and 400
  s.max_episode_steps = 1;
  EXPECT_EQ(boot_slots(s, 16), 16);
}

TEST(ParamChannel, TestsPerPollGrowWithTheMessageOnePer64KiB) {
  EXPECT_EQ(ParamChannel::auto_tests_per_poll(0), 1);
  EXPECT_EQ(ParamChannel::auto_tests_per_poll(20 * 1024), 1);     // CartPole's MLP: one test, as before
  EXPECT_EQ(ParamChannel::auto_tests_per_poll(65536), 1);
  EXPECT_EQ(ParamChannel::auto_tests_per_poll(65537), 2);
  EXPECT_EQ(ParamChannel::auto_tests_per_poll(6746780 + 4096), 104);  // the Atari Nature CNN
  EXPECT_EQ(ParamChannel::auto_tests_per_poll(size_t(1) << 30), 128);  // capped
}
