#pragma once
// Recurrent cores. Every core has two modes that compute the same function:
//   step(x_t [B, D], state [B, S], is_init_t [B])      -> {y_t [B, H], state'}   (actors, O(1))
//   sequence(x [T, B, D], state0 [B, S], is_init [T, B]) -> {y [T, B, H], state_T} (learners)
// is_init_t = 1 resets the state to zeros before x_t is read, so episodes may begin and end
// anywhere inside a sequence. The state is one real float tensor [B, S] (complex states are stored
// as interleaved real/imaginary parts) so it can travel on the wire and sit in the replay.
//
// Cores: "gru", "lstm" (cell loop with resets; the baselines), and the linear-recurrent ones whose
// sequence mode is one reset-aware scan over time (kernels/scan.h): "lru" (Orvieto et al. 2023),
// "ssm" (a diagonal complex SSM in the S5 style), "mingru" (Feng et al. 2024), "ffm" (Morad et
// al. 2023).
#include <torch/torch.h>

#include <string>
#include <vector>

namespace mpirl::models {

struct CoreOptions {
  std::string kind = "none";
  int64_t input = 0;    // D: features in
  int64_t hidden = 128;  // H: features out (and the state width of gru/lstm/mingru)
  int64_t state = 64;    // N: complex state size of lru/ssm; memory traces m of ffm
  int64_t ffm_context = 4;  // c: FFM's oscillation frequencies per trace
};

// Per-step scratch of CoreImpl::act for B rows (CoreImpl::act_buffers).
struct CoreActBuffers {
  std::vector<torch::Tensor> t;  // the core's [B, n] float32 intermediates
  std::vector<float> coef;       // per-channel coefficients derived from the parameters
};

class CoreImpl : public torch::nn::Module {
 public:
  virtual int64_t output_size() const = 0;
  virtual int64_t state_size() const = 0;
  torch::Tensor initial_state(int64_t B, const torch::TensorOptions& o = {}) const {
    return torch::zeros({B, state_size()}, o.dtype(torch::kFloat32));
  }
  virtual std::pair<torch::Tensor, torch::Tensor> step(const torch::Tensor& x, const torch::Tensor& state,
                                                       const torch::Tensor& is_init) = 0;
  virtual std::pair<torch::Tensor, torch::Tensor> sequence(const torch::Tensor& x, const torch::Tensor& state0,
                                                           const torch::Tensor& is_init) = 0;
  // The actor's step (models/cores_act.cpp): the function step() computes, on the CPU without
  // autograd and without allocating a tensor. x [B, D] (rows may be strided), init [B] float32;
  // `state` [B, S] (contiguous) is advanced in place. Returns y [B, H]: a buffer of `buf` or a
  // view of `state`, valid until the next call. The matmuls run as addmm into `buf`, the gates and
  // the recurrence as one loop over the rows, and parameter-derived coefficients (lambda, gains)
  // are recomputed each call, so fresh weights need no notification.
  virtual torch::Tensor act(const torch::Tensor& x, torch::Tensor& state, const torch::Tensor& init,
                            CoreActBuffers& buf) = 0;
  virtual CoreActBuffers act_buffers(int64_t B) const = 0;
};

// nullptr for kind "none"; throws for an unknown kind.
std::shared_ptr<CoreImpl> make_core(const CoreOptions& o);
std::vector<std::string> core_kinds();  // without "none"
// Floats of state per batch element, without building the core (0 for "none").
int64_t core_state_size(const CoreOptions& o);

}  // namespace mpirl::models
