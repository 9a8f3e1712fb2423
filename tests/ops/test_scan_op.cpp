// torch.ops.mpirl.linear_scan from C++ alone: the operator found through the dispatcher (as any
// LibTorch program would call it; the learner itself calls kernels::linear_scan), its values and its gradients
// (autograd registered in C++) against the plain ATen recurrence, which shares no code with the
// kernels, and against the learner's own linear_scan.
#include <gtest/gtest.h>

#include <ATen/core/dispatch/Dispatcher.h>
#include <torch/torch.h>

#include "kernels/scan.h"

namespace {

torch::Tensor op_scan(const torch::Tensor& a, const torch::Tensor& b, const std::optional<torch::Tensor>& h0,
                      bool reverse) {
  static auto op = c10::Dispatcher::singleton()
                       .findSchemaOrThrow("mpirl::linear_scan", "")
                       .typed<torch::Tensor(const torch::Tensor&, const torch::Tensor&,
                                            const std::optional<torch::Tensor>&, bool)>();
  return op.call(a, b, h0, reverse);
}

// Decays in (0, 1) with about one reset (a = 0) in six steps.
torch::Tensor decays(int64_t T, int64_t B, int64_t D) {
  auto a = torch::rand({T, B, D}, torch::kFloat64) * 0.9 + 0.05;
  return a * (torch::rand({T, B, 1}, torch::kFloat64) > 1.0 / 6).to(torch::kFloat64);
}

}  // namespace

TEST(ScanOp, ValuesAndGradientsEqualTheAtenRecurrenceThroughTheDispatcher) {
  torch::manual_seed(5);
  for (bool reverse : {false, true})
    for (bool with_h0 : {true, false}) {
      const auto a0 = decays(37, 3, 5), b0 = torch::randn({37, 3, 5}, torch::kFloat64);
      const auto h00 = torch::randn({3, 5}, torch::kFloat64), w = torch::randn({37, 3, 5}, torch::kFloat64);
      auto run = [&](bool op) {
        auto a = a0.clone().requires_grad_(), b = b0.clone().requires_grad_(), h0 = h00.clone().requires_grad_();
        torch::Tensor h = op ? op_scan(a, b, with_h0 ? std::optional<torch::Tensor>(h0) : std::nullopt, reverse)
                             : mpirl::kernels::linear_scan_aten(a, b, with_h0 ? h0 : torch::Tensor(), reverse);
        (h * w).sum().backward();
        return std::vector<torch::Tensor>{h.detach(), a.grad(), b.grad(), with_h0 ? h0.grad() : torch::zeros({3, 5})};
      };
      const auto got = run(true), want = run(false);
      const char* what[] = {"h", "dL/da", "dL/db", "dL/dh0"};
      for (size_t i = 0; i < got.size(); ++i) {
        ASSERT_TRUE(got[i].defined()) << what[i];
        EXPECT_TRUE(torch::allclose(got[i].to(torch::kFloat64), want[i].to(torch::kFloat64), 1e-12, 1e-12))
            << what[i] << " reverse " << reverse << " h0 " << with_h0 << "\n"
            << (got[i] - want[i]).abs().max();
      }
      EXPECT_TRUE(torch::equal(got[0], mpirl::kernels::linear_scan(a0, b0, with_h0 ? h00 : torch::Tensor(), reverse)));
    }
}

TEST(ScanOp, BadShapesNameTheOperator) {
  try {
    op_scan(torch::ones({4, 3}), torch::ones({4, 2}), std::nullopt, false);
    FAIL() << "no error";
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find("mpirl::linear_scan: a [4, 3] and b [4, 2] differ in shape"), std::string::npos)
        << e.what();
  }
}
