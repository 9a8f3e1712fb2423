#include <cstring>

#include "actor/group_policy.h"
#include "comm/wire.h"
#include "core/clock.h"
#include "core/error.h"

namespace mpirl::actor {

RemotePolicy::RemotePolicy(const Config& cfg, const Comms& comms, const envs::EnvSpec& spec, const Groups& groups,
                           uint64_t seed)
    : cfg_(cfg), comms_(comms), spec_(spec), groups_(groups), server_(comms.layout.server_of(comms.rank)),
      S_(models::state_size(cfg, spec)), sampler_(spec, seed), g_(groups.g.size()) {
  MPIRL_CHECK(server_ >= 0, "actor rank {} has no inference rank", comms.rank);
  for (size_t i = 0; i < g_.size(); ++i) {
    const int64_t n = groups_.g[i].n;
    g_[i].request.buf.resize(infer_request_frame_bytes(spec_, n));
    g_[i].reply.buf.resize(infer_reply_frame_bytes(spec_, n, S_));
    discrete_.emplace_back(spec_.discrete ? size_t(n) : 0);
    box_.emplace_back(spec_.discrete ? 0 : size_t(n * spec_.action_dim));
  }
  state_.assign(size_t(cfg.env.num_envs) * size_t(S_), 0.0f);
  eps_ = actor_epsilons(cfg, comms);
}

const void* RemotePolicy::actions(int g) const {
  return spec_.discrete ? static_cast<const void*>(discrete_[size_t(g)].data()) : box_[size_t(g)].data();
}

void RemotePolicy::post_reply(int g) {
  Group& grp = g_[size_t(g)];
  grp.arrived = false;
  MPIRL_MPI(MPI_Irecv(grp.reply.buf.data(), int(grp.reply.buf.size()), MPI_BYTE, server_, kTagInferReply + g, comms_.world,
                      &grp.reply.req));
}

void RemotePolicy::observed(int g, const void* obs, int64_t obs_stride, const uint8_t* is_init, int64_t init_stride) {
  if (stop_) return;  // nothing more is asked once a Stop has come back
  Group& grp = g_[size_t(g)];
  MPIRL_CHECK(!grp.outstanding, "group {} asked twice", g);
  wait_request(grp.request.req);  // the last request of this group was received (its reply came)
  const EnvGroup& eg = groups_.g[size_t(g)];
  wire::Envelope env;
  env.kind = wire::Kind::InferRequest;
  env.sender = comms_.rank;
  env.seq = grp.seq = seq_++;
  env.arrays = infer_request_arrays(spec_, eg.n);
  std::vector<size_t> off;
  wire::payload_bytes(env.arrays, &off);
  char* frame = grp.request.buf.data();
  const size_t total = wire::write_header(frame, wire::kHeaderRegion, env);
  char* p = frame + wire::kHeaderRegion;
  const int64_t OB = spec_.obs_bytes(), stride_bytes = obs_stride * spec_.obs_elem_bytes();
  for (int64_t e = 0; e < eg.n; ++e) {
    std::memcpy(p + off[0] + e * OB, static_cast<const char*>(obs) + e * stride_bytes, size_t(OB));
    p[off[1] + size_t(e)] = char(is_init[e * init_stride]);
  }
  const int32_t grp_id[2] = {g, eg.first};
  std::memcpy(p + off[2], grp_id, sizeof(grp_id));
  post_reply(g);  // before the request: the reply can never arrive unexpected
  MPIRL_MPI(MPI_Isend(frame, int(total), MPI_BYTE, server_, kTagInferReq, comms_.world, &grp.request.req));
  grp.outstanding = true;
  settle(grp.request.req);
}

void RemotePolicy::settle(MPI_Request& req) {
  // A transport without single-copy (shared memory with it off, TCP) moves a large request in
  // fragments, sent during the sender's MPI calls: a request left pending while the actor steps
  // its other group (no MPI calls for milliseconds) would reach the inference rank only after it.
  // So it is pushed out now, while the inference rank receives it -- unless that takes longer than
  // kSettleS (the rank is busy with a batch): then it completes at the actor's next MPI call.
  constexpr double kSettleS = 1e-3;
  Backoff b(50);
  const double t0 = now_seconds();
  for (;;) {
    int done = 0;
    MPIRL_MPI(MPI_Test(&req, &done, MPI_STATUS_IGNORE));
    if (done || now_seconds() - t0 > kSettleS) return;
    b.idle();
  }
}

bool RemotePolicy::test_reply(int g) {
  Group& grp = g_[size_t(g)];
  if (!grp.outstanding) return false;
  if (grp.arrived) return true;
  int done = 0;
  MPI_Status st;
  MPIRL_MPI(MPI_Test(&grp.reply.req, &done, &st));
  if (!done) return false;
  MPIRL_MPI(MPI_Get_count(&st, MPI_BYTE, &grp.reply_bytes));
  grp.arrived = true;
  answered_once_ = true;
  grp.msg = wire::decode(grp.reply.buf.data(), size_t(grp.reply_bytes), server_,
                         {wire::Kind::InferReply, wire::Kind::Stop});
  if (grp.msg.env.seq != grp.seq)
    throw Error(fmt::format("actor rank {}: reply {} from inference rank {} for group {}, whose request was {}",
                            comms_.rank, grp.msg.env.seq, server_, g, grp.seq));
  if (grp.msg.env.kind == wire::Kind::Stop) stop_ = true;
  return true;
}

void RemotePolicy::check_silence(double waited_since) {
  // Only once the server has answered: before its first parameters it may wait for the learner's
  // start-up (self-checks, CUDA), which has no bound here.
  const double timeout = cfg_.run.stall_timeout_s;
  if (timeout <= 0 || !answered_once_) return;
  const double silent = now_seconds() - waited_since;
  if (silent > timeout)
    throw Error(fmt::format("actor rank {}: no reply from inference rank {} @ {} for {:.1f} s, more than "
                            "run.stall_timeout_s = {} s: a stalled or lost inference rank",
                            comms_.rank, server_, comms_.host(server_), silent, timeout));
}

bool RemotePolicy::act(int g, const void*, int64_t, const uint8_t*, int64_t, const Rows& out) {
  Group& grp = g_[size_t(g)];
  if (!grp.outstanding) return false;  // stopped before it was asked
  Backoff b(100);
  const double since = now_seconds();
  while (!test_reply(g)) {
    poll();
    check_silence(since);
    b.idle();
  }
  grp.outstanding = false;
  for (auto& other : g_) {  // any request still being pushed out gets another MPI call now
    int done = 0;
    if (other.request.req != MPI_REQUEST_NULL) MPIRL_MPI(MPI_Test(&other.request.req, &done, MPI_STATUS_IGNORE));
  }
  const wire::Message& msg = grp.msg;
  if (msg.env.kind == wire::Kind::Stop) return false;
  const EnvGroup& eg = groups_.g[size_t(g)];
  const auto v = read_infer_reply(msg, spec_, S_, g, eg.first, eg.n, server_);
  version_ = msg.env.policy_version;
  void* acts = spec_.discrete ? static_cast<void*>(discrete_[size_t(g)].data()) : box_[size_t(g)].data();
  sampler_.rows(v.dist, spec_.dist_size(), eg.n, acts, out, false, eps_.empty() ? nullptr : eps_.data() + eg.first);
  if (S_ > 0) std::memcpy(state_.data() + int64_t(eg.first) * S_, v.state, size_t(eg.n * S_) * sizeof(float));
  return true;
}

bool RemotePolicy::poll() {
  for (size_t g = 0; g < g_.size(); ++g) test_reply(int(g));
  return !stop_;
}

void RemotePolicy::finish() {
  // Every request is answered (a result or a Stop); then no more will come from this actor.
  for (size_t g = 0; g < g_.size(); ++g) {
    Backoff b(100);
    const double since = now_seconds();
    while (g_[g].outstanding && !test_reply(int(g))) {
      check_silence(since);
      b.idle();
    }
    g_[g].outstanding = false;
    wait_request(g_[g].request.req);
  }
  wire::Envelope env;
  env.kind = wire::Kind::InferBye;
  env.sender = comms_.rank;
  env.seq = seq_++;
  MsgBuffer bye;
  bye.buf = wire::build_frame(env, nullptr, 0);
  MPIRL_MPI(MPI_Isend(bye.buf.data(), int(bye.buf.size()), MPI_BYTE, server_, kTagInferReq, comms_.world, &bye.req));
  wait_request(bye.req);
}

}  // namespace mpirl::actor
