#include "comm/obs_codec.h"

#include <zstd.h>

#include <cstring>
#include <limits>

#include "core/error.h"

namespace mpirl {
namespace {

constexpr uint32_t kMagic = 0x315A4F4Du;  // "MOZ1"
constexpr uint8_t kVersion = 1, kDedup = 1, kDelta = 2;
constexpr uint8_t kFull = 0, kShifted = 1;

void put32(char* p, uint32_t v) { std::memcpy(p, &v, 4); }
uint32_t get32(const char* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}

// dst = a ^ b over n bytes (the compiler vectorises it).
void xor_into(uint8_t* dst, const uint8_t* a, const uint8_t* b, size_t n) {
  for (size_t i = 0; i < n; ++i) dst[i] = uint8_t(a[i] ^ b[i]);
}

void check_dims(int64_t frames, int64_t planes, int64_t plane_bytes) {
  constexpr int64_t kMax = std::numeric_limits<uint32_t>::max();
  MPIRL_CHECK(frames > 0 && planes > 0 && plane_bytes > 0 && frames <= kMax && planes <= kMax && plane_bytes <= kMax &&
                  1 + frames * (1 + planes * plane_bytes) <= kMax,
              "obs codec: {} frames x {} planes x {} bytes is out of range", frames, planes, plane_bytes);
}

}  // namespace

ObsCodec::ObsCodec(ObsCodecOptions opts) : opts_(opts) {
  auto* c = ZSTD_createCCtx();
  auto* d = ZSTD_createDCtx();
  MPIRL_CHECK(c && d, "obs codec: zstd contexts could not be created");
  cctx_ = c;
  dctx_ = d;
  const size_t r1 = ZSTD_CCtx_setParameter(c, ZSTD_c_compressionLevel, opts_.level);
  const size_t r2 = ZSTD_CCtx_setParameter(c, ZSTD_c_checksumFlag, 1);  // a flipped byte is caught
  MPIRL_CHECK(!ZSTD_isError(r1) && !ZSTD_isError(r2), "obs codec: zstd level {}: {}", opts_.level,
              ZSTD_getErrorName(ZSTD_isError(r1) ? r1 : r2));
}

ObsCodec::~ObsCodec() {
  ZSTD_freeCCtx(static_cast<ZSTD_CCtx*>(cctx_));
  ZSTD_freeDCtx(static_cast<ZSTD_DCtx*>(dctx_));
}

size_t ObsCodec::encode(const uint8_t* src, int64_t frames, int64_t planes, int64_t plane_bytes,
                        std::vector<char>& out) {
  check_dims(frames, planes, plane_bytes);
  const size_t F = size_t(frames), C = size_t(planes), P = size_t(plane_bytes), FB = C * P;
  stream_.resize(1 + F + F * FB);
  stream_[0] = uint8_t((opts_.dedup ? kDedup : 0) | (opts_.delta ? kDelta : 0));
  uint8_t* tags = stream_.data() + 1;
  uint8_t* d = tags + F;
  for (size_t t = 0; t < F; ++t) {
    const uint8_t* cur = src + t * FB;
    const uint8_t* prev = t > 0 ? cur - FB : nullptr;
    if (opts_.dedup && prev && C > 1 && std::memcmp(cur, prev + P, (C - 1) * P) == 0) {
      tags[t] = kShifted;
      if (opts_.delta)
        xor_into(d, cur + (C - 1) * P, prev + (C - 1) * P, P);
      else
        std::memcpy(d, cur + (C - 1) * P, P);
      d += P;
      continue;
    }
    tags[t] = kFull;
    if (opts_.delta && prev)
      xor_into(d, cur, prev, FB);
    else
      std::memcpy(d, cur, FB);
    d += FB;
  }
  const size_t stream_bytes = size_t(d - stream_.data());
  const size_t at = out.size();
  out.resize(at + kObsCodecHeaderBytes + ZSTD_compressBound(stream_bytes));
  char* h = out.data() + at;
  put32(h, kMagic);
  h[4] = char(kVersion);
  h[5] = h[6] = h[7] = 0;
  put32(h + 8, uint32_t(F));
  put32(h + 12, uint32_t(C));
  put32(h + 16, uint32_t(P));
  put32(h + 20, uint32_t(stream_bytes));
  const size_t z = ZSTD_compress2(static_cast<ZSTD_CCtx*>(cctx_), h + kObsCodecHeaderBytes,
                                  out.size() - at - kObsCodecHeaderBytes, stream_.data(), stream_bytes);
  MPIRL_CHECK(!ZSTD_isError(z), "obs codec: zstd compression failed: {}", ZSTD_getErrorName(z));
  out.resize(at + kObsCodecHeaderBytes + z);
  return kObsCodecHeaderBytes + z;
}

void ObsCodec::decode(const char* data, size_t n, uint8_t* dst, int64_t frames, int64_t planes, int64_t plane_bytes,
                      const std::string& what) {
  check_dims(frames, planes, plane_bytes);
  const size_t F = size_t(frames), C = size_t(planes), P = size_t(plane_bytes), FB = C * P;
  if (n < kObsCodecHeaderBytes)
    throw Error(fmt::format("{}: {} bytes, shorter than the {}-byte header of compressed observations", what, n,
                            kObsCodecHeaderBytes));
  if (get32(data) != kMagic || uint8_t(data[4]) != kVersion)
    throw Error(fmt::format("{}: not compressed observations of this version (magic {:08x}, version {})", what,
                            get32(data), int(uint8_t(data[4]))));
  if (data[5] != 0 || data[6] != 0 || data[7] != 0)
    throw Error(fmt::format("{}: the compressed observations' header has non-zero reserved bytes", what));
  if (get32(data + 8) != F || get32(data + 12) != C || get32(data + 16) != P)
    throw Error(fmt::format("{}: compressed observations of {} frames x {} planes x {} bytes, expected {} x {} x {}",
                            what, get32(data + 8), get32(data + 12), get32(data + 16), F, C, P));
  const size_t stream_bytes = get32(data + 20);
  if (stream_bytes < 1 + F || stream_bytes > 1 + F + F * FB)
    throw Error(fmt::format("{}: a stream of {} bytes cannot hold {} frames of {} bytes", what, stream_bytes, F, FB));
  const char* z = data + kObsCodecHeaderBytes;
  const size_t zn = n - kObsCodecHeaderBytes;
  const unsigned long long content = ZSTD_getFrameContentSize(z, zn);
  if (content != stream_bytes)
    throw Error(fmt::format("{}: the zstd frame declares {} bytes, the header {}", what,
                            content == ZSTD_CONTENTSIZE_ERROR     ? std::string("no valid size (not a zstd frame)")
                            : content == ZSTD_CONTENTSIZE_UNKNOWN ? std::string("an unknown number of")
                                                                  : std::to_string(content),
                            stream_bytes));
  stream_.resize(stream_bytes);
  const size_t got = ZSTD_decompressDCtx(static_cast<ZSTD_DCtx*>(dctx_), stream_.data(), stream_bytes, z, zn);
  if (ZSTD_isError(got) || got != stream_bytes)
    throw Error(fmt::format("{}: zstd could not decode the observations: {}", what,
                            ZSTD_isError(got) ? ZSTD_getErrorName(got) : "short output"));
  const uint8_t flags = stream_[0];
  if ((flags & ~(kDedup | kDelta)) != 0)
    throw Error(fmt::format("{}: unknown flags {:#x} in the compressed observations", what, int(flags)));
  const bool delta = flags & kDelta;
  const uint8_t* tags = stream_.data() + 1;
  const uint8_t* s = tags + F;
  size_t left = stream_bytes - 1 - F;
  for (size_t t = 0; t < F; ++t) {
    uint8_t* cur = dst + t * FB;
    const uint8_t* prev = t > 0 ? cur - FB : nullptr;
    if (tags[t] == kShifted) {
      if (!prev || C < 2 || !(flags & kDedup))
        throw Error(fmt::format("{}: frame {} refers to a previous frame it cannot have", what, t));
      if (left < P) throw Error(fmt::format("{}: the stream ends inside frame {}", what, t));
      std::memmove(cur, prev + P, (C - 1) * P);
      if (delta)
        xor_into(cur + (C - 1) * P, s, prev + (C - 1) * P, P);
      else
        std::memcpy(cur + (C - 1) * P, s, P);
      s += P;
      left -= P;
    } else if (tags[t] == kFull) {
      if (left < FB) throw Error(fmt::format("{}: the stream ends inside frame {}", what, t));
      if (delta && prev)
        xor_into(cur, s, prev, FB);
      else
        std::memcpy(cur, s, FB);
      s += FB;
      left -= FB;
    } else {
      throw Error(fmt::format("{}: frame {} has an unknown tag {}", what, t, int(tags[t])));
    }
  }
  if (left != 0) throw Error(fmt::format("{}: {} bytes after the last frame", what, left));
}

}  // namespace mpirl
