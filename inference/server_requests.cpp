// The actors' requests to the inference rank (inference/server_internal.h): received without
// blocking, checked and queued for a batch, answered with the batch's rows or with Stop.
#include <algorithm>
#include <cstring>

#include "comm/inference_wire.h"
#include "comm/wire.h"
#include "core/clock.h"
#include "core/error.h"
#include "inference/server_internal.h"

namespace mpirl::inference {

int Server::served_index(int rank) const {
  auto it = std::find(served_.begin(), served_.end(), rank);
  return it == served_.end() ? -1 : int(it - served_.begin());
}

MsgBuffer& Server::free_buffer(int* index) {
  for (size_t i = 0; i < rbufs_.size(); ++i)
    if (!rbuf_busy_[i]) {
      rbuf_busy_[i] = 1;
      *index = int(i);
      return rbufs_[i];
    }
  rbufs_.emplace_back();
  rbuf_busy_.push_back(1);
  *index = int(rbufs_.size() - 1);
  return rbufs_.back();
}

// Requests are matched as soon as they are announced (MPI_Improbe) and received without blocking
// (MPI_Imrecv): a large request whose sender is busy stepping envs (a transport without
// single-copy moves it in fragments, one batch per MPI call of the sender) never holds up the
// requests of the other actors.
bool Server::receive() {
  bool any = false;
  for (;;) {
    int flag = 0;
    MPI_Message m;
    MPI_Status st;
    MPIRL_MPI(MPI_Improbe(MPI_ANY_SOURCE, kTagInferReq, comms_.world, &flag, &m, &st));
    if (!flag) break;
    any = true;
    int count = 0;
    MPIRL_MPI(MPI_Get_count(&st, MPI_BYTE, &count));
    int b = -1;
    MsgBuffer& buf = free_buffer(&b);
    if (buf.buf.size() < size_t(count)) buf.buf.resize(size_t(count));
    MPIRL_MPI(MPI_Imrecv(buf.buf.data(), count, MPI_BYTE, &m, &buf.req));
    incoming_.push_back({b, st.MPI_SOURCE, count});
  }
  for (size_t i = 0; i < incoming_.size();) {
    const Incoming in = incoming_[i];
    int done = 0;
    MPIRL_MPI(MPI_Test(&rbufs_[size_t(in.buffer)].req, &done, MPI_STATUS_IGNORE));
    if (!done) {
      ++i;
      continue;
    }
    incoming_.erase(incoming_.begin() + std::ptrdiff_t(i));
    handle(in);
    any = true;
  }
  return any;
}

void Server::handle(const Incoming& in) {
  const int src = in.src, b = in.buffer;
  const std::vector<char>& buf = rbufs_[size_t(b)].buf;
  const int a = served_index(src);
  if (a < 0)
    throw Error(fmt::format("inference rank {}: a request from rank {} ({} @ {}), which this rank does not serve",
                            comms_.rank, src, role_name(comms_.layout.role_of(src)), comms_.host(src)));
  const auto msg = wire::decode(buf.data(), size_t(in.count), src, {wire::Kind::InferRequest, wire::Kind::InferBye});
  if (msg.env.kind == wire::Kind::InferBye) {
    rbuf_busy_[size_t(b)] = 0;
    if (bye_[size_t(a)]) throw Error(fmt::format("inference rank {}: a second InferBye from actor rank {}", comms_.rank, src));
    bye_[size_t(a)] = 1;
    ++byes_;
    return;
  }
  const auto v = read_infer_request(msg, spec_, G_, max_group_, src);
  const EnvGroup want = env_group(E_, G_, v.group);
  if (v.first_env != want.first || v.n != want.n)
    throw Error(fmt::format("InferRequest from rank {}: group {} holds envs [{}, {}), the request [{}, {})", src,
                            v.group, want.first, want.first + want.n, v.first_env, v.first_env + v.n));
  if (bye_[size_t(a)]) throw Error(fmt::format("inference rank {}: a request from actor rank {} after its InferBye", comms_.rank, src));
  Request r;
  r.actor = a;
  r.group = v.group;
  r.first = v.first_env;
  r.n = v.n;
  r.seq = msg.env.seq;
  r.arrived = now_seconds();
  r.obs = v.obs;
  r.is_init = v.is_init;
  r.buffer = b;
  if (stopping_) return answer_stop(r);
  batcher_.add(r);
}

void Server::answer_stop(const Request& r) {
  rbuf_busy_[size_t(r.buffer)] = 0;
  wire::Envelope env;
  env.kind = wire::Kind::Stop;
  env.sender = comms_.rank;
  env.seq = r.seq;
  auto& out = sends_.acquire();
  out = wire::build_frame(env, nullptr, 0);
  sends_.send(out, out.size(), served_[size_t(r.actor)], kTagInferReply + r.group, comms_.world);
}

void Server::serve() {
  const auto& served = batcher_.run_batch(now_seconds());
  const int64_t L = spec_.dist_size(), S = batcher_.state_size();
  for (const auto& s : served) {
    const Request& r = s.req;
    rbuf_busy_[size_t(r.buffer)] = 0;
    wire::Envelope env;
    env.kind = wire::Kind::InferReply;
    env.sender = comms_.rank;
    env.seq = r.seq;
    env.policy_version = version_;
    env.arrays = infer_reply_arrays(spec_, r.n, S);
    std::vector<size_t> off;
    const size_t payload = wire::payload_bytes(env.arrays, &off);
    auto& out = sends_.acquire();
    out.resize(wire::kHeaderRegion + payload);
    wire::write_header(out.data(), wire::kHeaderRegion, env);
    char* p = out.data() + wire::kHeaderRegion;
    std::memcpy(p + off[0], engine_.dist() + s.row * L, size_t(r.n * L) * sizeof(float));
    if (S > 0) std::memcpy(p + off[1], batcher_.state_of(r.actor, r.first), size_t(r.n * S) * sizeof(float));
    const int32_t g[2] = {r.group, r.first};
    std::memcpy(p + off.back(), g, sizeof(g));
    sends_.send(out, out.size(), served_[size_t(r.actor)], kTagInferReply + r.group, comms_.world);
  }
  batcher_.replied(now_seconds());
}

}  // namespace mpirl::inference
