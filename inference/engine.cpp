#include "inference/engine.h"

#include <chrono>
#include <cstring>
#include <thread>

#include <fmt/format.h>

#include "core/error.h"

namespace mpirl::inference {

Engine::Engine(const envs::EnvSpec& spec, const models::ModelOptions& model, int64_t max_rows,
               const EngineOptions& opts)
    : spec_(spec), max_rows_(max_rows), L_(spec.dist_size()), opts_(opts), policy_(spec, model) {
  MPIRL_CHECK(max_rows_ >= 1, "inference engine for {} rows", max_rows_);
  policy_->eval();
  policy_->to(opts_.device);
  S_ = policy_->state_size();
  const bool pin = opts_.device.is_cuda();
  auto host = torch::TensorOptions().device(torch::kCPU).pinned_memory(pin);
  std::vector<int64_t> shape{max_rows_};
  shape.insert(shape.end(), spec_.obs_shape.begin(), spec_.obs_shape.end());
  obs_ = torch::zeros(shape, host.dtype(spec_.obs_uint8 ? torch::kUInt8 : torch::kFloat32));
  state_ = torch::zeros({max_rows_, std::max<int64_t>(S_, 1)}, host.dtype(torch::kFloat32));
  dist_ = torch::zeros({max_rows_, L_}, host.dtype(torch::kFloat32));
  init_f_ = torch::zeros({max_rows_}, host.dtype(torch::kFloat32));
  init_u8_.assign(size_t(max_rows_), 0);
}

std::string Engine::describe() const {
  if (opts_.emulated())
    return fmt::format("emulated accelerator: {} us per batch + {} us per row, uniform policy", opts_.emulate_batch_us,
                       opts_.emulate_row_us);
  return fmt::format("{} ({})", opts_.device.str(),
                     opts_.device.is_cuda() || opts_.step_path || policy_->python() ? "Policy::step"
                                                                                    : "Policy::act, as local actors");
}

void Engine::load(const float* flat) { models::read_flat(policy_, flat); }

void Engine::run(int64_t n) {
  MPIRL_CHECK(n >= 1 && n <= max_rows_, "inference batch of {} rows (at most {})", n, max_rows_);
  c10::InferenceMode guard;
  if (opts_.emulated()) return run_emulated(n);
  if (opts_.device.is_cuda() || opts_.step_path || policy_->python()) return run_step(n);
  run_act(n);
}

void Engine::run_act(int64_t n) {
  auto it = act_.find(n);
  if (it == act_.end()) it = act_.emplace(n, policy_->act_buffers(n)).first;
  models::ActBuffers& buf = it->second;
  if (S_ > 0) {
    float* init = buf.init.data_ptr<float>();
    for (int64_t i = 0; i < n; ++i) init[i] = init_u8_[size_t(i)] ? 1.0f : 0.0f;
  }
  torch::Tensor state = S_ > 0 ? state_.narrow(0, 0, n) : torch::Tensor();
  const torch::Tensor& head = policy_->act(obs_.narrow(0, 0, n), state, buf);
  const float* h = head.data_ptr<float>();
  float* d = dist_.data_ptr<float>();
  if (spec_.discrete) {
    std::memcpy(d, h, size_t(n * L_) * sizeof(float));
    return;
  }
  const int64_t A = spec_.action_dim;
  const torch::Tensor log_std = policy_->log_std().contiguous();
  for (int64_t i = 0; i < n; ++i) {
    std::memcpy(d + i * L_, h + i * A, size_t(A) * sizeof(float));
    std::memcpy(d + i * L_ + A, log_std.data_ptr<float>(), size_t(A) * sizeof(float));
  }
}

void Engine::run_step(int64_t n) {
  const torch::Device dev = opts_.device;
  const bool cuda = dev.is_cuda();
  float* fi = init_f_.data_ptr<float>();
  for (int64_t i = 0; i < n; ++i) fi[i] = init_u8_[size_t(i)] ? 1.0f : 0.0f;
  // Pinned host rows -> device (non-blocking on a GPU: the copies and the forward pass queue on
  // one stream); the one copy back to the host synchronises.
  torch::Tensor obs = obs_.narrow(0, 0, n).to(dev, /*non_blocking=*/cuda);
  torch::Tensor init = init_f_.narrow(0, 0, n).to(dev, cuda);
  torch::Tensor state = S_ > 0 ? state_.narrow(0, 0, n).to(dev, cuda) : torch::Tensor();
  const torch::Tensor rows = policy_->acting_rows(policy_->step(obs, init, state));  // what act() gives
  if (S_ > 0) {
    torch::Tensor both = torch::cat({rows.to(torch::kFloat32), state.to(torch::kFloat32)}, 1).to(torch::kCPU);
    dist_.narrow(0, 0, n).copy_(both.narrow(1, 0, L_));
    state_.narrow(0, 0, n).copy_(both.narrow(1, L_, S_));
  } else {
    dist_.narrow(0, 0, n).copy_(rows.to(torch::kCPU, torch::kFloat32));
  }
}

void Engine::run_emulated(int64_t n) {
  std::this_thread::sleep_for(
      std::chrono::nanoseconds(int64_t(1000 * (opts_.emulate_batch_us + double(n) * opts_.emulate_row_us))));
  float* d = dist_.data_ptr<float>();
  std::fill(d, d + n * L_, 0.0f);
  if (!spec_.discrete && policy_->log_std().defined()) {  // a Python module's rows: log-std 0
    const int64_t A = spec_.action_dim;
    const torch::Tensor log_std = policy_->log_std().to(torch::kCPU).contiguous();
    for (int64_t i = 0; i < n; ++i) std::memcpy(d + i * L_ + A, log_std.data_ptr<float>(), size_t(A) * sizeof(float));
  }
}

torch::Device pick_inference_device(const std::string& setting, int index) {
  const int gpus = torch::cuda::is_available() ? int(torch::cuda::device_count()) : 0;
  if (setting == "cpu" || (setting == "auto" && gpus == 0)) return torch::kCPU;
  if (gpus == 0)
    throw ConfigError("config key 'inference.device' = \"cuda\", but no CUDA device is visible on this host");
  return torch::Device(torch::kCUDA, static_cast<c10::DeviceIndex>(index % gpus));
}

}  // namespace mpirl::inference
