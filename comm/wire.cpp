#include "comm/wire.h"

#include <cstring>
#include <sstream>

#include <boost/archive/binary_iarchive.hpp>
#include <boost/archive/binary_oarchive.hpp>

#include "core/error.h"

namespace mpirl::wire {
namespace {

// The envelope's codec: Boost binary archives, every field written by hand and every length read
// and bounded before anything is allocated (Boost's own vector and string loading resizes to
// whatever count the bytes say: a 30-byte envelope claiming 2^31 dimensions would zero-fill
// 16 GiB before any check). Booleans travel as bytes and must be 0 or 1.
constexpr uint32_t kMaxArrays = 1024, kMaxDims = 16, kMaxName = 256, kMaxLearnersInStatus = 1 << 16;
constexpr uint32_t kMaxString = 1 << 16;

[[noreturn]] void too_long(const char* what, uint64_t n, uint64_t max) {
  throw Error(fmt::format("{} of {} exceeds the limit of {}", what, n, max));
}

template <class Ar>
void put_string(Ar& ar, const std::string& s) {
  const uint32_t n = uint32_t(s.size());
  ar << n;
  if (n) ar.save_binary(s.data(), n);
}
template <class Ar>
std::string get_string(Ar& ar, uint32_t max, const char* what) {
  uint32_t n = 0;
  ar >> n;
  if (n > max) too_long(what, n, max);
  std::string s(n, '\0');
  if (n) ar.load_binary(s.data(), n);
  return s;
}
template <class Ar>
bool get_bool(Ar& ar, const char* what) {
  uint8_t b = 0;
  ar >> b;
  if (b > 1) throw Error(fmt::format("{} is the byte {}, not 0 or 1", what, int(b)));
  return b == 1;
}

template <class Ar>
void put_status(Ar& ar, const ReplayStatus& s) {
  ar << s.env_steps << s.actor_env_steps << s.rollouts << s.discarded_rollouts << s.episodes << s.inserted
     << s.restored << s.evicted << s.consumed << s.fill << s.capacity << s.restored_seq_end << s.sampled << s.batches
     << s.priority_updates << s.stale_priority_updates << s.max_priority << s.shard << s.priority_mass
     << s.importance_exponent;
  const uint32_t n = uint32_t(s.sampled_by_learner.size());
  ar << n;
  for (int64_t v : s.sampled_by_learner) ar << v;
  const auto& d = s.dump;
  ar << d.dumps << d.failures << d.items << d.checksum << d.seconds;
  put_string(ar, d.path);
  put_string(ar, d.last_error);
  ar << uint8_t(d.final_failed);
  const auto& c = s.checkpoint;
  ar << c.requests << c.completed << c.failures << c.items << c.checksum << c.seconds << uint8_t(c.last_ok);
  put_string(ar, c.dir);
  put_string(ar, c.last_error);
}
template <class Ar>
void get_status(Ar& ar, ReplayStatus& s) {
  ar >> s.env_steps >> s.actor_env_steps >> s.rollouts >> s.discarded_rollouts >> s.episodes >> s.inserted >>
      s.restored >> s.evicted >> s.consumed >> s.fill >> s.capacity >> s.restored_seq_end >> s.sampled >> s.batches >>
      s.priority_updates >> s.stale_priority_updates >> s.max_priority >> s.shard >> s.priority_mass >>
      s.importance_exponent;
  uint32_t n = 0;
  ar >> n;
  if (n > kMaxLearnersInStatus) too_long("the status's learner count", n, kMaxLearnersInStatus);
  s.sampled_by_learner.resize(n);
  for (auto& v : s.sampled_by_learner) ar >> v;
  auto& d = s.dump;
  ar >> d.dumps >> d.failures >> d.items >> d.checksum >> d.seconds;
  d.path = get_string(ar, kMaxString, "the dump path");
  d.last_error = get_string(ar, kMaxString, "the dump error");
  d.final_failed = get_bool(ar, "the dump's final_failed");
  auto& c = s.checkpoint;
  ar >> c.requests >> c.completed >> c.failures >> c.items >> c.checksum >> c.seconds;
  c.last_ok = get_bool(ar, "the checkpoint's last_ok");
  c.dir = get_string(ar, kMaxString, "the checkpoint directory");
  c.last_error = get_string(ar, kMaxString, "the checkpoint error");
}

template <class Ar>
void put_envelope(Ar& ar, const Envelope& e) {
  ar << e.magic << e.schema << uint16_t(e.kind) << e.sender << e.seq << e.policy_version;
  const uint32_t n = uint32_t(e.arrays.size());
  ar << n;
  for (const auto& a : e.arrays) {
    put_string(ar, a.name);
    const uint8_t dt = uint8_t(a.dtype);
    const uint32_t dims = uint32_t(a.shape.size());
    ar << dt << dims;
    for (int64_t d : a.shape) ar << d;
  }
  ar << uint8_t(e.has_status);
  if (e.has_status) put_status(ar, e.status);
}
template <class Ar>
void get_envelope(Ar& ar, Envelope& e) {
  uint16_t kind = 0;
  ar >> e.magic >> e.schema;
  // Nothing after magic and schema is trusted until both are checked (decode() names them).
  if (e.magic != kMagic || e.schema != kSchemaVersion) return;
  ar >> kind >> e.sender >> e.seq >> e.policy_version;
  e.kind = Kind(kind);
  uint32_t n = 0;
  ar >> n;
  if (n > kMaxArrays) too_long("the array count", n, kMaxArrays);
  e.arrays.resize(n);
  for (auto& a : e.arrays) {
    a.name = get_string(ar, kMaxName, "an array name");
    uint8_t dt = 0;
    uint32_t dims = 0;
    ar >> dt >> dims;
    a.dtype = DType(dt);
    if (dims > kMaxDims) too_long(fmt::format("array '{}''s dimension count", a.name).c_str(), dims, kMaxDims);
    a.shape.resize(dims);
    for (auto& d : a.shape) ar >> d;
  }
  e.has_status = get_bool(ar, "has_status");
  if (e.has_status) get_status(ar, e.status);
}

}  // namespace
}  // namespace mpirl::wire

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
    case Kind::ReplayBusy: return "ReplayBusy";
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
    put_envelope(ar, env);
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
  if (hdr[1] % kAlign != 0)  // every writer aligns it; the arrays are read in place
    bad(fmt::format("payload offset {} is not a multiple of {}", hdr[1], kAlign));
  Message m;
  try {
    // Read the envelope in place (no string copy) and skip the archive's locale set-up: together
    // they were most of the cost of decoding a rollout.
    MemoryBuf mb(data + kHeaderBytes, hdr[0]);
    boost::archive::binary_iarchive ar(mb, boost::archive::no_header | boost::archive::no_codecvt);
    get_envelope(ar, m.env);
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
