#include "inference/check.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include <fmt/format.h>

#include "comm/inference_wire.h"
#include "inference/batcher.h"
#include "inference/engine.h"
#include "models/acting.h"
#include "models/policy.h"

namespace mpirl::inference {

CheckOutcome check_central_inference(const Config& cfg, const envs::EnvSpec& spec, torch::Device device, bool perturb) {
  const int A = 2, E = 6, G = 2, steps = 5;
  const int64_t L = spec.dist_size();
  const models::ModelOptions opts = models::model_options(cfg);
  torch::manual_seed(cfg.run.seed + 17);
  models::Policy local(spec, opts);
  local->eval();
  {  // an untrained head is nearly uniform: make the rows (and the greedy choice) matter
    torch::NoGradGuard g;
    for (auto& p : local->named_parameters())
      if (p.key().rfind("pi.", 0) == 0) p.value().mul_(10);
  }
  std::vector<float> flat(size_t(models::num_params(local)));
  models::write_flat(local, flat.data());
  EngineOptions eo;
  eo.device = device;
  eo.step_path = true;  // the path a GPU takes, on whatever device this is
  Engine engine(spec, opts, A * E, eo);
  engine.load(flat.data());
  Batcher batcher(engine, A, E, G, E, 1.0);  // at most E rows: batches mix groups of both actors
  std::vector<models::Acting> acting;
  for (int a = 0; a < A; ++a) acting.emplace_back(local, E, 1 + uint64_t(a));
  std::vector<int64_t> shape{A, E, steps};
  shape.insert(shape.end(), spec.obs_shape.begin(), spec.obs_shape.end());
  const auto obs = spec.obs_uint8 ? torch::randint(256, shape, torch::kUInt8) : torch::randn(shape);
  auto init = (torch::rand({A, E, steps}) < 0.3).to(torch::kUInt8);
  init.select(2, 0).fill_(1);
  CheckOutcome out;
  // cuDNN convolutions use TF32 on a GPU unless told not to (LibTorch's default): about 1e-3 relative.
  out.tolerance = device.is_cuda() ? 5e-3 : 1e-5;
  out.what = fmt::format("{} policy rows, greedy actions and core states on {} against local acting on the CPU",
                         spec.id, device.str());
  // One batch; its rows go to each request's place among the A x E rows.
  auto run_one = [&](std::vector<float>& rows) {
    for (const auto& s : batcher.run_batch(0.0))
      std::memcpy(rows.data() + (int64_t(s.req.actor) * E + s.req.first) * L, engine.dist() + s.row * L,
                  size_t(s.req.n * L) * sizeof(float));
  };
  c10::InferenceMode guard;
  for (int t = 0; t < steps; ++t) {
    std::vector<float> ldist(size_t(A * E * L)), cdist(size_t(A * E * L));
    std::vector<torch::Tensor> keep;
    for (int a = 0; a < A; ++a) {
      auto o = obs.select(0, a).select(1, t).contiguous();
      auto i = init.select(0, a).select(1, t).contiguous();
      acting[size_t(a)].step(o, i.data_ptr<uint8_t>(), 1, {ldist.data() + a * E * L, L, nullptr, 0}, true);
    }
    for (int g = G - 1; g >= 0; --g)  // groups arrive out of order, actors interleaved
      for (int a = 0; a < A; ++a) {
        const EnvGroup eg = env_group(E, G, g);
        auto o = obs.select(0, a).select(1, t).narrow(0, eg.first, eg.n).contiguous();
        auto i = init.select(0, a).select(1, t).narrow(0, eg.first, eg.n).contiguous();
        keep.push_back(o);
        keep.push_back(i);
        Request r;
        r.actor = a;
        r.group = g;
        r.first = eg.first;
        r.n = eg.n;
        r.obs = static_cast<const char*>(o.data_ptr());
        r.is_init = i.data_ptr<uint8_t>();
        batcher.add(r);
        while (batcher.due(0.0)) run_one(cdist);
      }
    while (batcher.waiting() > 0) run_one(cdist);
    if (perturb) for (auto& v : cdist) v += 1.0f;
    for (size_t k = 0; k < cdist.size(); ++k)
      out.max_error = std::max(out.max_error, double(std::fabs(cdist[k] - ldist[k])) / (1.0 + std::fabs(ldist[k])));
    if (spec.discrete)
      for (int r = 0; r < A * E; ++r) {
        const float* l = ldist.data() + r * L;
        const float* c = cdist.data() + r * L;
        const int64_t la = std::max_element(l, l + L) - l, ca = std::max_element(c, c + L) - c;
        std::vector<float> sorted(l, l + L);
        std::sort(sorted.rbegin(), sorted.rend());
        if (la != ca && (L < 2 || sorted[0] - sorted[1] > out.tolerance)) ++out.actions_differing;
      }
    if (engine.state_size() > 0)
      for (int a = 0; a < A; ++a) {
        const auto st = acting[size_t(a)].state();
        for (int e = 0; e < E; ++e)
          for (int64_t j = 0; j < engine.state_size(); ++j)
            out.max_error = std::max(out.max_error, double(std::fabs(batcher.state_of(a, e)[j] - st[e][j].item<float>())) /
                                                        (1.0 + std::fabs(st[e][j].item<float>())));
      }
  }
  out.ok = out.max_error <= out.tolerance && out.actions_differing == 0;
  return out;
}

}  // namespace mpirl::inference
