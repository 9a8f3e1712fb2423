#pragma once
// Lossless compression of uint8 pixel observations (issue 31): one sequence's frames
// [frames, planes, plane_bytes] (an Atari obs is planes = 4 stacked 84x84 frames) in one buffer.
//
//   1. Frame-stack de-duplication: where frame t's planes 0..C-2 equal frame t-1's planes 1..C-1
//      (checked byte for byte, not assumed: a reset or an env without a stack just fails the
//      check), frame t stores only its new plane C-1.
//   2. Delta: each stored plane is XORed with the plane it most likely repeats (the previous
//      frame's newest plane, or the same plane of the previous frame), so still pixels are zeros.
//   3. zstd at a chosen level over the result.
//
// Decoding is bit-exact and checks everything it reads: the header against the shape the caller
// expects, zstd's content size, the tags; a malformed buffer throws mpirl::Error naming what was
// wrong (it never reads or writes out of bounds).
//
// Format (little-endian): magic "MOZ1" u32, version u8 (1), 3 reserved bytes (0), frames u32,
// planes u32, plane_bytes u32, stream_bytes u32, then one zstd frame with a content checksum
// holding the stream: flags u8 (bit 0 dedup, bit 1 delta), a tag byte per frame (0: all planes
// stored, 1: only the new plane), then the stored planes in frame order. Everything that changes
// the meaning of the bytes is under zstd's checksum or checked against the caller's shape, so a
// flipped byte anywhere is an error, never a silently different observation.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace mpirl {

struct ObsCodecOptions {
  int level = 1;       // zstd level (1..19; negative: zstd's fast levels)
  bool dedup = true;   // frame-stack de-duplication
  bool delta = false;  // XOR against the reference plane before zstd (measured: no gain on Atari)
};

inline constexpr size_t kObsCodecHeaderBytes = 24;

// Holds zstd's contexts (reused between calls); one per thread.
class ObsCodec {
 public:
  explicit ObsCodec(ObsCodecOptions opts = {});
  ~ObsCodec();
  ObsCodec(const ObsCodec&) = delete;
  ObsCodec& operator=(const ObsCodec&) = delete;

  // Appends the encoding of `frames` frames of `planes` x `plane_bytes` bytes to `out`; returns
  // the bytes appended.
  size_t encode(const uint8_t* src, int64_t frames, int64_t planes, int64_t plane_bytes, std::vector<char>& out);
  // Decodes `n` bytes into dst (frames x planes x plane_bytes bytes, the shape the caller expects);
  // throws mpirl::Error starting with `what` when the buffer is not such an encoding.
  void decode(const char* data, size_t n, uint8_t* dst, int64_t frames, int64_t planes, int64_t plane_bytes,
              const std::string& what);
  const ObsCodecOptions& options() const { return opts_; }

 private:
  ObsCodecOptions opts_;
  void* cctx_ = nullptr;  // ZSTD_CCtx
  void* dctx_ = nullptr;  // ZSTD_DCtx
  std::vector<uint8_t> stream_;
};

}  // namespace mpirl
