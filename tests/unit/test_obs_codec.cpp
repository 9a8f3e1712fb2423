// comm/obs_codec.h: compressed uint8 observations decode bit-exactly, the frame-stack
// de-duplication stores exactly the planes a hand count says, and every malformed buffer is an
// error (never a crash, never a silently different observation).
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <vector>

#include "comm/obs_codec.h"
#include "core/error.h"

using namespace mpirl;

namespace {

constexpr int64_t kC = 4, kH = 12, kW = 10, kP = kH * kW;

// A frame-stacked sequence like Atari's: a stream of planes (each a small change of the one
// before: a moving block on a noisy background), frame t = planes t..t+3; at every index in
// `resets` the stack restarts from a fresh plane repeated 4 times (what a reset gives).
std::vector<uint8_t> stacked_frames(int64_t F, const std::vector<int64_t>& resets, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<uint8_t> plane(kP);
  for (auto& b : plane) b = uint8_t(rng() % 8);
  auto step_plane = [&] {
    const int64_t at = int64_t(rng() % uint32_t(kP - 3));
    for (int64_t i = 0; i < 3; ++i) plane[size_t(at + i)] = uint8_t(200 + rng() % 50);
  };
  std::vector<uint8_t> frames(size_t(F * kC * kP));
  std::vector<std::vector<uint8_t>> stack(kC, plane);
  for (int64_t t = 0; t < F; ++t) {
    if (t > 0) {
      bool reset = false;
      for (int64_t r : resets) reset |= r == t;
      if (reset) {
        for (auto& b : plane) b = uint8_t(rng() % 8);
        for (auto& s : stack) s = plane;
      } else {
        step_plane();
        stack.erase(stack.begin());
        stack.push_back(plane);
      }
    }
    for (int64_t c = 0; c < kC; ++c)
      std::memcpy(frames.data() + size_t((t * kC + c) * kP), stack[size_t(c)].data(), size_t(kP));
  }
  return frames;
}

uint32_t stream_bytes_of(const std::vector<char>& enc) {
  uint32_t v;
  std::memcpy(&v, enc.data() + 20, 4);
  return v;
}

}  // namespace

TEST(ObsCodec, RandomFramesRoundTripBitExactlyUnderEveryOption) {
  std::mt19937 rng(7);
  const int64_t F = 9;
  std::vector<uint8_t> frames(size_t(F * kC * kP));
  for (auto& b : frames) b = uint8_t(rng());
  for (int level : {-3, 1, 5})
    for (bool dedup : {false, true})
      for (bool delta : {false, true}) {
        ObsCodec codec({level, dedup, delta});
        std::vector<char> enc;
        const size_t n = codec.encode(frames.data(), F, kC, kP, enc);
        ASSERT_EQ(n, enc.size());
        std::vector<uint8_t> back(frames.size(), 0xAB);
        codec.decode(enc.data(), enc.size(), back.data(), F, kC, kP, "test");
        EXPECT_EQ(back, frames) << level << dedup << delta;
        // Random bytes have no repeated planes: every frame stored whole (flags + tags + frames).
        EXPECT_EQ(stream_bytes_of(enc), uint32_t(1 + F + F * kC * kP));
      }
}

TEST(ObsCodec, FrameStackDedupStoresOnlyNewPlanesAndResetsWhole) {
  const int64_t F = 33;  // T + 1 for T = 32
  const std::vector<int64_t> resets{10, 11, 25};
  auto frames = stacked_frames(F, resets, 3);
  // Hand count: frame 0 and each reset frame whole (4 planes); every other frame one plane. A
  // reset at t + 1 right after one at t: frame 11 = 4 copies of a fresh plane, never a shift of 10.
  const int64_t whole = 1 + int64_t(resets.size());
  const uint32_t want = uint32_t(1 + F + whole * kC * kP + (F - whole) * kP);
  for (bool delta : {false, true}) {
    ObsCodec codec({1, true, delta});
    std::vector<char> enc;
    codec.encode(frames.data(), F, kC, kP, enc);
    EXPECT_EQ(stream_bytes_of(enc), want) << delta;
    std::vector<uint8_t> back(frames.size());
    codec.decode(enc.data(), enc.size(), back.data(), F, kC, kP, "test");
    EXPECT_EQ(back, frames);
  }
  ObsCodec plain({1, false, false});
  std::vector<char> a, b;
  plain.encode(frames.data(), F, kC, kP, a);
  EXPECT_EQ(stream_bytes_of(a), uint32_t(1 + F + F * kC * kP));
  // Appending: a second encoding after the first, each decodable from its own offset.
  ObsCodec codec;
  const size_t n1 = codec.encode(frames.data(), F, kC, kP, b);
  const size_t n2 = codec.encode(frames.data(), F, kC, kP, b);
  ASSERT_EQ(b.size(), n1 + n2);
  std::vector<uint8_t> back(frames.size());
  codec.decode(b.data() + n1, n2, back.data(), F, kC, kP, "second");
  EXPECT_EQ(back, frames);
}

TEST(ObsCodec, OnePlaneFramesAndOneFrameRoundTrip) {
  std::mt19937 rng(11);
  std::vector<uint8_t> frames(size_t(5 * kP));
  for (auto& b : frames) b = uint8_t(rng() % 3);
  ObsCodec codec;
  for (int64_t F : {int64_t(1), int64_t(5)}) {
    std::vector<char> enc;
    codec.encode(frames.data(), F, 1, kP, enc);
    std::vector<uint8_t> back(size_t(F * kP));
    codec.decode(enc.data(), enc.size(), back.data(), F, 1, kP, "test");
    EXPECT_TRUE(std::equal(back.begin(), back.end(), frames.begin()));
  }
}

TEST(ObsCodec, EveryFlippedByteAndEveryTruncationIsAnErrorOrTheSameFrames) {
  const int64_t F = 6;
  auto frames = stacked_frames(F, {3}, 5);
  ObsCodec codec;
  std::vector<char> enc;
  codec.encode(frames.data(), F, kC, kP, enc);
  std::vector<uint8_t> back(frames.size());
  int errors = 0, same = 0;
  for (size_t i = 0; i < enc.size(); ++i)
    for (uint8_t mask : {uint8_t(0x01), uint8_t(0x80), uint8_t(0xFF)}) {
      auto bad = enc;
      bad[i] = char(uint8_t(bad[i]) ^ mask);
      try {
        codec.decode(bad.data(), bad.size(), back.data(), F, kC, kP, "flip");
        EXPECT_EQ(back, frames) << "byte " << i << " ^ " << int(mask) << " decoded to different frames";
        ++same;
      } catch (const Error&) {
        ++errors;
      }
    }
  EXPECT_GT(errors, 0);
  for (size_t n = 0; n < enc.size(); ++n)
    EXPECT_THROW(codec.decode(enc.data(), n, back.data(), F, kC, kP, "cut"), Error) << n;
  // A buffer of another shape names both shapes.
  try {
    codec.decode(enc.data(), enc.size(), back.data(), F, kC, kP / 2, "rollout from rank 3");
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("rollout from rank 3"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("expected 6 x 4 x 60"), std::string::npos) << e.what();
  }
  std::printf("%d flips detected, %d harmless\n", errors, same);
}
