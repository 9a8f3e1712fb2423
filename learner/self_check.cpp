#include "learner/self_check.h"

#include <algorithm>
#include <cstdlib>
#include <limits>
#include <sstream>

#include <fmt/format.h>

#include "core/test_hooks.h"
#include "core/error.h"
#include "kernels/scan.h"
#include "models/python_model.h"

namespace mpirl::learner {
namespace {

// Largest |x - ref| / (1 + |ref|), in double precision on the CPU.
double rel_error(const torch::Tensor& x, const torch::Tensor& ref) {
  auto r = ref.detach().to(torch::kCPU, ref.is_complex() ? torch::kComplexDouble : torch::kFloat64);
  auto v = x.detach().to(torch::kCPU, r.scalar_type());
  return ((v - r).abs() / (1 + r.abs())).max().item<double>();
}

// A [T, B] batch of the run's shapes with random contents (what the step check trains on).
TrainBatch synthetic_batch(const envs::EnvSpec& spec, int64_t T, int64_t B, int64_t S, torch::Device dev) {
  auto g = torch::make_generator<at::CPUGeneratorImpl>(20240607);
  auto f32 = torch::TensorOptions().dtype(torch::kFloat32);
  std::vector<int64_t> obs = {T + 1, B};
  obs.insert(obs.end(), spec.obs_shape.begin(), spec.obs_shape.end());
  TrainBatch b;
  b.obs = spec.obs_uint8 ? torch::randint(0, 256, obs, g, torch::TensorOptions().dtype(torch::kUInt8))
                         : torch::randn(obs, g, f32);
  b.is_init = (torch::rand({T + 1, B}, g, f32) < 0.1).to(torch::kFloat32);
  if (spec.discrete) {
    b.actions = torch::randint(0, spec.num_actions, {T, B}, g, torch::TensorOptions().dtype(torch::kInt64));
    b.behaviour_logp = std::log(1.0 / double(spec.num_actions)) + 0.1 * torch::randn({T, B}, g, f32);
  } else {
    b.actions = torch::randn({T, B, spec.action_dim}, g, f32).clamp(-1, 1);
    b.behaviour_logp = -1.0 * double(spec.action_dim) + 0.1 * torch::randn({T, B}, g, f32);
  }
  b.rewards = torch::randn({T, B}, g, f32);
  b.terminated = (torch::rand({T, B}, g, f32) < 0.05).to(torch::kFloat32);
  b.truncated = torch::zeros({T, B}, f32);
  if (S > 0) b.state0 = 0.1 * torch::randn({B, S}, g, f32);
  for (auto* t : {&b.obs, &b.is_init, &b.actions, &b.rewards, &b.terminated, &b.truncated, &b.behaviour_logp,
                  &b.state0})
    if (t->defined()) *t = t->to(dev);
  return b;
}

std::vector<torch::Tensor> params_on_cpu(Trainer& t) {
  std::vector<torch::Tensor> v;
  for (auto& p : t.policy()->parameters()) v.push_back(p.detach().to(torch::kCPU, torch::kFloat64).clone());
  return v;
}

}  // namespace

nlohmann::json to_json(const CheckResult& r) {
  return {{"check", r.name}, {"what", r.what},           {"ran", r.ran},
          {"ok", r.ok},      {"max_error", r.max_error}, {"tolerance", r.tolerance},
          {"failed_on", r.failed_on}, {"note", r.note}};
}

bool injected_fault(const std::string& name, int world_rank) {
  const char* e = test_hook("MPIRL_TEST_SELF_CHECK_FAULT");
  if (!e) return false;
  std::stringstream ss(e);
  std::string item;
  while (std::getline(ss, item, ','))
    if (item == fmt::format("{}:{}", name, world_rank)) return true;
  return false;
}

bool test_reducer_fallback() { return test_hook("MPIRL_TEST_REDUCER_FALLBACK") != nullptr; }

CheckResult check_scan(torch::Device device, int world_rank) {
  CheckResult r;
  r.name = "scan";
  r.what = fmt::format("linear_scan's kernels on {} vs the ATen reference: float32 and complex64, both directions, "
                       "T and N across the CUDA tiles; outputs and gradients against float64",
                       device.str());
  r.ran = true;
  r.tolerance = 1e-4;
  auto g = torch::make_generator<at::CPUGeneratorImpl>(7);
  auto f64 = torch::TensorOptions().dtype(torch::kFloat64);
  double worst = 0, worst_ref = 0;
  const bool fault = injected_fault("scan", world_rank);
  for (auto st : {torch::kFloat32, torch::kComplexFloat})
    for (bool reverse : {false, true})
      for (auto [T, N] : std::vector<std::pair<int64_t, int64_t>>{{7, 5}, {129, 70}, {300, 33}}) {
        const bool cplx = st == torch::kComplexFloat;
        auto mag = (torch::rand({T, N}, g, f64) * 0.6 + 0.35) * (torch::rand({T, N}, g, f64) > 0.2).to(torch::kFloat64);
        auto rnd = [&](std::vector<int64_t> s) {
          return cplx ? torch::complex(torch::randn(s, g, f64), torch::randn(s, g, f64)) : torch::randn(s, g, f64);
        };
        auto a = cplx ? torch::polar(mag, torch::rand({T, N}, g, f64) * 6.28) : mag;
        auto b = rnd({T, N}), h0 = rnd({N}), w = rnd({T, N});
        const auto wide = cplx ? torch::kComplexDouble : torch::kFloat64;
        // kind 0: native on the device; 1: ATen on the device; 2: ATen in float64 on the CPU.
        auto run = [&](int kind) {
          const torch::Device dev = kind == 2 ? torch::Device(torch::kCPU) : device;
          const auto type = kind == 2 ? wide : st;
          auto leaf = [&](const torch::Tensor& t) { return t.to(dev, type).detach().clone().requires_grad_(true); };
          auto A = leaf(a), Bv = leaf(b), H = leaf(h0);
          auto h = kind == 0 ? kernels::linear_scan_native(A, Bv, H, reverse) : kernels::linear_scan_aten(A, Bv, H, reverse);
          if (kind == 0 && fault) h = h + 1e-2;
          {
            models::GilRelease gil;  // torch imported by model.python: its engine refuses a held GIL
            torch::real(w.to(dev, type).conj() * h).sum().backward();
          }
          return std::vector<torch::Tensor>{h.detach(), A.grad(), Bv.grad(), H.grad()};
        };
        std::vector<torch::Tensor> native;
        try {  // local work only: catching here leaves no rank out of a collective
          native = run(0);
        } catch (const std::exception& e) {
          r.ok = false;
          r.max_error = std::numeric_limits<double>::infinity();
          r.note = std::string("the native kernels failed: ") + e.what();
          return r;
        }
        auto aten = run(1), ref = run(2);
        for (size_t i = 0; i < ref.size(); ++i) {
          worst = std::max(worst, rel_error(native[i], ref[i]));
          worst_ref = std::max(worst_ref, rel_error(aten[i], ref[i]));
        }
      }
  r.max_error = worst;
  r.ok = worst <= r.tolerance;
  r.note = fmt::format("the ATen reference's own float32 error: {:.2e}", worst_ref);
  return r;
}

CheckResult check_reducer(GradientReducer& reducer, MPI_Comm learners, int size, torch::Device device,
                          int world_rank) {
  CheckResult r;
  r.name = "reducer";
  r.what = fmt::format("{} vs MPI_Allreduce of integer-valued gradients", reducer.name());
  if (size <= 1) {
    r.note = "one learner: nothing to average";
    return r;
  }
  r.ran = true;
  // Integer sums are exact; NCCL's float average multiplies each input by float(1/n) first, which
  // rounds when n is not a power of two: a few float epsilons per learner.
  r.tolerance = std::max(1e-6, 4.0 * size * double(std::numeric_limits<float>::epsilon()));
  int me = 0;
  MPIRL_MPI(MPI_Comm_rank(learners, &me));
  const int64_t n = 4099;  // not a multiple of any bucket or vector width
  auto ints = (torch::arange(n, torch::kFloat64).remainder(97) - 48) * double(me + 1);  // |x| <= 48 x size
  std::vector<double> host(ints.data_ptr<double>(), ints.data_ptr<double>() + n), sum(static_cast<size_t>(n));
  MPIRL_MPI(MPI_Allreduce(host.data(), sum.data(), int(n), MPI_DOUBLE, MPI_SUM, learners));
  auto expected = torch::from_blob(sum.data(), {n}, torch::kFloat64).clone() / double(size);
  auto p = torch::zeros({n}, torch::TensorOptions().device(device).dtype(torch::kFloat32)).requires_grad_(true);
  p.mutable_grad() = ints.to(device, torch::kFloat32);
  reducer.average({p});
  reducer.wait();
  auto got = p.grad().to(torch::kCPU, torch::kFloat64);
  if (injected_fault("reducer", world_rank)) got[0] += 1;
  r.max_error = rel_error(got, expected);
  r.ok = r.max_error <= r.tolerance;
  return r;
}

CheckResult check_step(Trainer& trainer, const Config& cfg, const envs::EnvSpec& spec, int world_rank) {
  CheckResult r;
  r.name = "step";
  const StepMode mode = trainer.mode();
  r.what = fmt::format("one update as {} vs one eager update from the same state", trainer.describe());
  if (mode == StepMode::Eager) {
    r.note = "eager steps: nothing to compare";
    return r;
  }
  r.ran = true;
  r.tolerance = 1e-4;
  std::stringstream saved;
  {
    torch::serialize::OutputArchive ar;
    trainer.save(ar);
    ar.save_to(saved);
  }
  auto restore = [&] {
    torch::serialize::InputArchive ar;
    std::stringstream copy(saved.str());
    ar.load_from(copy, torch::Device(torch::kCPU));
    trainer.load(ar);
  };
  const int64_t T = cfg.actor.rollout_len, B = cfg.learner.batch_size;
  const int64_t S = trainer.policy()->state_size();
  trainer.set_mode(StepMode::Eager);
  auto b1 = synthetic_batch(spec, T, B, S, trainer.device());
  trainer.update(b1, {});
  trainer.wait_reducer();
  auto eager = params_on_cpu(trainer);
  restore();
  trainer.set_mode(mode);
  auto b2 = synthetic_batch(spec, T, B, S, trainer.device());
  trainer.update(b2, {});
  trainer.wait_reducer();
  auto candidate = params_on_cpu(trainer);
  if (injected_fault("step", world_rank)) candidate[0] += 1e-2;
  restore();
  trainer.set_mode(mode);  // the first real update captures afresh
  for (size_t i = 0; i < eager.size(); ++i) r.max_error = std::max(r.max_error, rel_error(candidate[i], eager[i]));
  r.ok = r.max_error <= r.tolerance;
  return r;
}

void agree(std::vector<CheckResult>& checks, MPI_Comm learners) {
  int size = 1, world = 0;
  MPIRL_MPI(MPI_Comm_size(learners, &size));
  MPIRL_MPI(MPI_Comm_rank(MPI_COMM_WORLD, &world));
  const int k = int(checks.size());
  std::vector<int> mine(size_t(k) + 1), all(size_t((k + 1) * size));
  std::vector<double> err(static_cast<size_t>(k)), max_err(static_cast<size_t>(k));
  mine[0] = world;
  for (int i = 0; i < k; ++i) {
    mine[size_t(i) + 1] = checks[size_t(i)].ran && !checks[size_t(i)].ok;
    err[size_t(i)] = checks[size_t(i)].max_error;
  }
  MPIRL_MPI(MPI_Allgather(mine.data(), k + 1, MPI_INT, all.data(), k + 1, MPI_INT, learners));
  MPIRL_MPI(MPI_Allreduce(err.data(), max_err.data(), k, MPI_DOUBLE, MPI_MAX, learners));
  for (int i = 0; i < k; ++i) {
    auto& c = checks[size_t(i)];
    c.failed_on.clear();
    for (int l = 0; l < size; ++l)
      if (all[size_t(l * (k + 1) + i + 1)]) c.failed_on.push_back(all[size_t(l * (k + 1))]);
    c.ok = c.failed_on.empty();
    c.max_error = max_err[size_t(i)];
  }
}

Fallbacks fallbacks(const std::vector<CheckResult>& checks, bool reducer_is_nccl) {
  Fallbacks f;
  for (const auto& c : checks) {
    if (c.ok) continue;
    if (c.name == "scan") f.aten_scan = true;
    if (c.name == "step") f.eager_steps = true;
    if (c.name == "reducer") {
      if (reducer_is_nccl) f.mpi_reducer = true;
      else
        f.fatal = fmt::format("the gradient all-reduce ({}) disagrees with MPI_Allreduce on rank(s) {} (max error "
                              "{:.3g}): there is no other reducer to fall back to",
                              c.what, fmt::join(c.failed_on, ", "), c.max_error);
    }
  }
  return f;
}

}  // namespace mpirl::learner
