#include "learner/graph_step.h"

#include <fmt/format.h>

#include "core/error.h"
#include "core/test_hooks.h"

#if MPIRL_WITH_CUDA
#include <ATen/cuda/CUDAEvent.h>
#include <ATen/cuda/CUDAGraph.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#endif

namespace mpirl::learner {

#if MPIRL_WITH_CUDA
struct StaticStep::Graphs {
  at::cuda::CUDAGraph first, second;  // second: only when the reducer cannot be captured
  int count = 0;
};
#else
struct StaticStep::Graphs {
  int count = 0;
};
#endif

StaticStep::StaticStep(Mode mode, StepFns fns, GradientReducer& reducer, std::vector<torch::Tensor> params,
                       std::vector<torch::Tensor> state)
    : mode_(mode), fns_(std::move(fns)), reducer_(reducer), params_(std::move(params)), state_(std::move(state)) {
#if !MPIRL_WITH_CUDA
  if (mode_ == Mode::Graph) throw Error("learner.cuda_graph: this mpirl was built without CUDA");
#endif
}

StaticStep::~StaticStep() = default;

int StaticStep::graphs() const { return graphs_ ? graphs_->count : 0; }

namespace {
const char* kFieldNames[] = {"obs",         "actions",    "rewards", "terminated", "truncated", "behaviour_logp",
                             "proximal_logp", "trunc_value", "advantages", "targets", "is_init", "state0"};
std::vector<torch::Tensor*> fields(TrainBatch& b) {
  return {&b.obs,         &b.actions,    &b.rewards, &b.terminated, &b.truncated, &b.behaviour_logp,
          &b.proximal_logp, &b.trunc_value, &b.advantages, &b.targets, &b.is_init, &b.state0};
}
std::string describe(const torch::Tensor& t) {
  if (!t.defined()) return "absent";
  return fmt::format("{} [{}]", std::string(c10::toString(t.scalar_type())), fmt::join(t.sizes(), ", "));
}
}  // namespace

void StaticStep::allocate(const TrainBatch& b) {
  auto src = fields(const_cast<TrainBatch&>(b));
  auto dst = fields(in_);
  for (size_t i = 0; i < dst.size(); ++i)
    if (src[i]->defined()) *dst[i] = torch::empty(src[i]->sizes(), src[i]->options());
  const int64_t B = b.rewards.size(1);
  auto f32 = b.rewards.options().dtype(torch::kFloat32);
  in_.weights = torch::ones({B}, f32);  // always present: one graph serves batches with and without them
  in_.keep = torch::ones({B}, f32);
}

void StaticStep::copy_in(const TrainBatch& b) {
  auto src = fields(const_cast<TrainBatch&>(b));
  auto dst = fields(in_);
  for (size_t i = 0; i < dst.size(); ++i) {
    const torch::Tensor &s = *src[i], &d = *dst[i];
    if (s.defined() != d.defined() || (s.defined() && (s.sizes() != d.sizes() || s.scalar_type() != d.scalar_type())))
      throw Error(fmt::format("static learner step: batch field '{}' is {}, but the step was built for {}",
                              kFieldNames[i], describe(s), describe(d)));
    if (s.defined()) dst[i]->copy_(s, /*non_blocking=*/true);
  }
  auto opt = [&](torch::Tensor& d, const torch::Tensor& s, const char* name) {
    if (!s.defined()) {
      d.fill_(1.0);
      return;
    }
    if (s.sizes() != d.sizes())
      throw Error(fmt::format("static learner step: batch field '{}' is {}, but the step was built for {}", name,
                              describe(s), describe(d)));
    d.copy_(s, true);
  };
  opt(in_.weights, b.weights, "weights");
  opt(in_.keep, b.keep, "keep");
}

void StaticStep::step_now() {
  out_.loss = fns_.grad(in_);
  reducer_.average(params_);
  out_.grad_norm = fns_.apply();
}

std::vector<torch::Tensor> StaticStep::saved_state() const {
  torch::NoGradGuard g;
  std::vector<torch::Tensor> saved;
  for (auto& t : state_) saved.push_back(t.clone());
  return saved;
}

void StaticStep::undo_warm_up(const std::vector<torch::Tensor>& saved) {
  {
    torch::NoGradGuard g;
    for (size_t i = 0; i < state_.size(); ++i) state_[i].copy_(saved[i]);  // the warm-up never happened
  }
  for (auto& p : params_)  // a captured backward allocates the gradients in the graph's pool
    if (p.grad().defined()) p.mutable_grad() = torch::Tensor();
}

const StepOut& StaticStep::run(const TrainBatch& b) {
  if (!in_.rewards.defined()) allocate(b);
  copy_in(b);
  if (!warmed_up_ && !graphs_ && test_hook("MPIRL_TEST_CAPTURE_FAULT"))  // before any step: nothing changed
    throw CaptureError("capturing the learner step as a CUDA graph failed: injected by MPIRL_TEST_CAPTURE_FAULT");
  if (mode_ == Mode::Uncaptured) {
    if (!warmed_up_) {  // as before a capture, so that the CPU tests check the warm-up leaves no trace
      auto saved = saved_state();
      for (int i = 0; i < kWarmupSteps; ++i) step_now();
      undo_warm_up(saved);
      warmed_up_ = true;
    }
    step_now();
    return out_;
  }
#if MPIRL_WITH_CUDA
  if (!graphs_) capture();
  graphs_->first.replay();
  if (graphs_->count == 2) {
    reducer_.average(params_);  // on the host, between the two graphs
    graphs_->second.replay();
  } else {
    reducer_.replayed();
  }
#endif
  return out_;
}

void StaticStep::capture() {
#if MPIRL_WITH_CUDA
  const torch::Device dev = in_.rewards.device();
  MPIRL_CHECK(dev.is_cuda(), "learner.cuda_graph needs the learner on CUDA, not {}", dev.str());
  c10::cuda::CUDAGuard device_guard(dev);
  auto current = c10::cuda::getCurrentCUDAStream(dev.index());
  auto side = c10::cuda::getStreamFromPool(/*isHighPriority=*/false, dev.index());
  // `side` waits for what `current` has queued, and the other way round.
  auto join = [](const c10::cuda::CUDAStream& from, const c10::cuda::CUDAStream& to) {
    at::cuda::CUDAEvent e;
    e.record(from);
    e.block(to);
  };
  auto saved = saved_state();
  join(current, side);
  {
    c10::cuda::CUDAStreamGuard on_side(side);
    for (int i = 0; i < kWarmupSteps; ++i) step_now();
  }
  join(side, current);
  undo_warm_up(saved);
  auto graphs = std::make_unique<Graphs>();
  join(current, side);
  {
    c10::cuda::CUDAStreamGuard on_side(side);
    at::cuda::CUDAGraph* capturing = &graphs->first;
    try {
      graphs->first.capture_begin();
      out_.loss = fns_.grad(in_);
      if (reducer_.capturable()) {
        reducer_.average(params_);
        out_.grad_norm = fns_.apply();
        graphs->first.capture_end();
        graphs->count = 1;
      } else {
        graphs->first.capture_end();
        capturing = &graphs->second;
        graphs->second.capture_begin(graphs->first.pool());
        out_.grad_norm = fns_.apply();
        graphs->second.capture_end();
        graphs->count = 2;
      }
    } catch (const std::exception& e) {
      // End the broken capture (stream and allocator pool) so that later CUDA calls do not fail
      // with capture errors that hide this one; its own error is expected and dropped.
      try {
        capturing->capture_end();
      } catch (const std::exception&) {
      }
      throw CaptureError(fmt::format("capturing the learner step as a CUDA graph failed (learner.cuda_graph = false runs "
                              "it eagerly): {}", e.what()));
    }
  }
  join(side, current);
  graphs_ = std::move(graphs);
#endif
}

}  // namespace mpirl::learner
