#include "comm/param_channel.h"

#include <cstring>

#include "core/error.h"
#include "comm/transport.h"
#include "comm/wire.h"

namespace mpirl {

ParamChannel::ParamChannel(MPI_Comm publish, int64_t num_params, int tests_per_poll)
    : comm_(publish), n_(num_params) {
  msg_.buf.resize(wire::kHeaderRegion + size_t(num_params) * sizeof(float));
  tests_ = tests_per_poll > 0 ? tests_per_poll : auto_tests_per_poll(msg_.buf.size());
}

int ParamChannel::auto_tests_per_poll(size_t message_bytes) {
  const size_t k = (message_bytes + 65535) / 65536;
  return int(k < 1 ? 1 : k > 128 ? 128 : k);
}

bool ParamChannel::test() {
  if (msg_.req == MPI_REQUEST_NULL) return true;
  int done = 0;
  for (int i = 0; i < tests_ && !done; ++i) MPIRL_MPI(MPI_Test(&msg_.req, &done, MPI_STATUS_IGNORE));
  return done != 0;
}

bool ParamChannel::idle() { return test(); }

void ParamChannel::start(bool stop, const float* params, int64_t version) {
  wire::Envelope env;
  env.kind = stop ? wire::Kind::Stop : wire::Kind::Params;
  MPIRL_MPI(MPI_Comm_rank(MPI_COMM_WORLD, &env.sender));
  env.seq = seq_++;
  env.policy_version = version;
  env.arrays = {{"params", wire::DType::F32, {n_}}};
  wire::write_header(msg_.buf.data(), wire::kHeaderRegion, env);
  if (!stop) std::memcpy(msg_.buf.data() + wire::kHeaderRegion, params, size_t(n_) * sizeof(float));
  MPIRL_MPI(MPI_Ibcast(msg_.buf.data(), int(msg_.buf.size()), MPI_BYTE, 0, comm_, &msg_.req));
}

void ParamChannel::publish(const float* params, int64_t version) {
  MPIRL_CHECK(idle(), "publish while the previous broadcast is in flight");
  start(false, params, version);
}

void ParamChannel::wait() { wait_request(msg_.req); }

void ParamChannel::publish_stop() {
  wait_request(msg_.req);
  start(true, nullptr, -1);
  wait_request(msg_.req);
}

void ParamChannel::post() {
  MPIRL_MPI(MPI_Ibcast(msg_.buf.data(), int(msg_.buf.size()), MPI_BYTE, 0, comm_, &msg_.req));
}

ParamChannel::Got ParamChannel::poll(float* dst, int64_t* version) {
  if (msg_.req == MPI_REQUEST_NULL) return Got::Nothing;
  if (!test()) return Got::Nothing;
  auto msg = wire::decode(msg_.buf.data(), msg_.buf.size(), -1, {wire::Kind::Params, wire::Kind::Stop});
  if (msg.env.kind == wire::Kind::Stop) return Got::Stop;
  if (msg.env.arrays.size() != 1 || msg.env.arrays[0].elements() != size_t(n_))
    throw Error(fmt::format("parameter broadcast from rank {} carries a different parameter count", msg.env.sender));
  std::memcpy(dst, msg.array<float>(0), size_t(n_) * sizeof(float));
  *version = msg.env.policy_version;
  post();
  return Got::Params;
}

}  // namespace mpirl
