#include "comm/wire.h"

#include <cstring>
#include <sstream>

#include <boost/archive/binary_iarchive.hpp>
#include <boost/archive/binary_oarchive.hpp>
#include <boost/serialization/string.hpp>
#include <boost/serialization/vector.hpp>

#include "core/error.h"

namespace boost::serialization {
template <class Ar>
void serialize(Ar& ar, mpirl::wire::ArrayDesc& a, const unsigned) {
  uint8_t dt = uint8_t(a.dtype);
  ar & a.name & dt & a.shape;
  a.dtype = mpirl::wire::DType(dt);
}
template <class Ar>
void serialize(Ar& ar, mpirl::wire::Envelope& e, const unsigned) {
  uint16_t kind = uint16_t(e.kind);
  ar & e.magic & e.schema;
  // Nothing after magic and schema is trusted until both are checked.
  if (Ar::is_loading::value && (e.magic != mpirl::wire::kMagic || e.schema != mpirl::wire::kSchemaVersion)) return;
  ar & kind & e.sender & e.seq & e.policy_version & e.arrays & e.has_status;
  if (e.has_status) ar & e.status;
  e.kind = mpirl::wire::Kind(kind);
}
}  // namespace boost::serialization

namespace mpirl::wire {
namespace {
// A read-only streambuf over a byte range.
struct MemoryBuf : std::streambuf {
  MemoryBuf(const char* p, size_t n) {
    char* b = const_cast<char*>(p);
    setg(b, b, b + n);
  }
};
}  // namespace

const char* kind_name(Kind k) {
  switch (k) {
    case Kind::Rollout: return "Rollout";
    case Kind::RolloutAck: return "RolloutAck";
    case Kind::ActorDone: return "ActorDone";
    case Kind::ActorDoneAck: return "ActorDoneAck";
    case Kind::SampleRequest: return "SampleRequest";
    case Kind::SampleReply: return "SampleReply";
    case Kind::LearnerBye: return "LearnerBye";
    case Kind::LearnerByeAck: return "LearnerByeAck";
    case Kind::Params: return "Params";
    case Kind::Stop: return "Stop";
    case Kind::PriorityUpdate: return "PriorityUpdate";
    case Kind::CheckpointRequest: return "CheckpointRequest";
    case Kind::CheckpointDone: return "CheckpointDone";
    case Kind::InferRequest: return "InferRequest";
    case Kind::InferReply: return "InferReply";
    case Kind::InferBye: return "InferBye";
    case Kind::InferStats: return "InferStats";
  }
  return "unknown";
}

size_t dtype_size(DType d) {
  switch (d) {
    case DType::F32: return 4;
    case DType::F64: return 8;
    case DType::I32: return 4;
    case DType::I64: return 8;
    case DType::U8: return 1;
  }
  return 0;
}

const char* dtype_name(DType d) {
  switch (d) {
    case DType::F32: return "float32";
    case DType::F64: return "float64";
    case DType::I32: return "int32";
    case DType::I64: return "int64";
    case DType::U8: return "uint8";
  }
  return "invalid";
}

size_t ArrayDesc::elements() const {
  size_t n = 1;
  for (auto d : shape) n *= size_t(d);
  return n;
}

size_t payload_bytes(const std::vector<ArrayDesc>& arrays, std::vector<size_t>* offsets) {
  size_t off = 0;
  if (offsets) offsets->clear();
  for (size_t i = 0; i < arrays.size(); ++i) {
    if (offsets) offsets->push_back(off);
    off += arrays[i].bytes();
    if (i + 1 < arrays.size()) off = align_up(off);
  }
  return off;
}

std::string serialize(const Envelope& env) {
  std::ostringstream os(std::ios::binary);
  {
    boost::archive::binary_oarchive ar(os, boost::archive::no_header | boost::archive::no_codecvt);
    ar << env;
  }
  return os.str();
}

size_t write_header(char* frame, size_t payload_offset, const Envelope& env) {
  std::string e = serialize(env);
  MPIRL_CHECK(kHeaderBytes + e.size() <= payload_offset, "envelope of {} bytes does not fit before offset {}",
              e.size(), payload_offset);
  uint32_t hdr[2] = {uint32_t(e.size()), uint32_t(payload_offset)};
  std::memcpy(frame, hdr, sizeof(hdr));
  std::memcpy(frame + kHeaderBytes, e.data(), e.size());
  return payload_offset + payload_bytes(env.arrays);
}

size_t natural_payload_offset(const Envelope& env) { return align_up(kHeaderBytes + serialize(env).size()); }

std::vector<char> build_frame(const Envelope& env, const void* payload, size_t payload_len) {
  MPIRL_CHECK(payload_len == payload_bytes(env.arrays), "payload of {} bytes, arrays declare {}", payload_len,
              payload_bytes(env.arrays));
  size_t off = natural_payload_offset(env);
  std::vector<char> frame(off + payload_len);
  write_header(frame.data(), off, env);
  if (payload_len) std::memcpy(frame.data() + off, payload, payload_len);
  return frame;
}

int Message::find(const std::string& name) const {
  for (size_t i = 0; i < env.arrays.size(); ++i)
    if (env.arrays[i].name == name) return int(i);
  return -1;
}

Message decode(const char* data, size_t size, int source, const std::vector<Kind>& expected) {
  auto from = [&] { return source >= 0 ? fmt::format("from rank {}", source) : std::string("from broadcast"); };
  auto bad = [&](const std::string& what) {
    throw Error(fmt::format("malformed message {} ({} bytes): {}", from(), size, what));
  };
  if (size < kHeaderBytes) bad("shorter than the 8-byte frame header");
  uint32_t hdr[2];
  std::memcpy(hdr, data, sizeof(hdr));
  if (kHeaderBytes + size_t(hdr[0]) > hdr[1] || hdr[1] > size)
    bad(fmt::format("envelope of {} bytes / payload offset {} outside the frame", hdr[0], hdr[1]));
  Message m;
  try {
    // Read the envelope in place (no string copy) and skip the archive's locale set-up: together
    // they were most of the cost of decoding a rollout.
    MemoryBuf mb(data + kHeaderBytes, hdr[0]);
    boost::archive::binary_iarchive ar(mb, boost::archive::no_header | boost::archive::no_codecvt);
    ar >> m.env;
  } catch (const std::exception& e) {
    bad(fmt::format("envelope does not deserialize ({})", e.what()));
  }
  if (m.env.magic != kMagic) bad(fmt::format("bad magic 0x{:08x} (expected 0x{:08x})", m.env.magic, kMagic));
  if (m.env.schema != kSchemaVersion)
    bad(fmt::format("schema version {} (this build speaks {})", m.env.schema, kSchemaVersion));
  if (!expected.empty()) {
    bool ok = false;
    for (auto k : expected) ok |= (k == m.env.kind);
    if (!ok) bad(fmt::format("unexpected kind {} ({})", int(m.env.kind), kind_name(m.env.kind)));
  }
  if (source >= 0 && m.env.sender != source)
    bad(fmt::format("envelope says sender {} but it came from rank {}", m.env.sender, source));
  for (auto& a : m.env.arrays) {
    if (dtype_size(a.dtype) == 0) bad(fmt::format("array '{}' has invalid dtype {}", a.name, int(a.dtype)));
    size_t n = 1;
    for (auto d : a.shape) {
      if (d < 0 || (d > 0 && n > (size_t(1) << 48) / size_t(d))) bad(fmt::format("array '{}' has a bad shape", a.name));
      n *= size_t(d);
    }
  }
  size_t declared = payload_bytes(m.env.arrays, &m.offsets);
  if (hdr[1] + declared != size)
    bad(fmt::format("{} {} declares {} payload bytes but carries {}", kind_name(m.env.kind), from(), declared,
                    size - hdr[1]));
  m.payload = data + hdr[1];
  return m;
}

}  // namespace mpirl::wire
