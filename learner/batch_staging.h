#pragma once
// The batch source's staging buffers (learner-internal: batch_source.cpp and
// batch_source_stage.cpp; batch_source.h holds them by a forward declaration).
#include <c10/core/Event.h>

#include <memory>
#include <vector>

#include <torch/torch.h>

namespace mpirl::learner {

// Host copies of one batch, time-major (pinned when the device is CUDA), and the event that says
// the device copies out of them have finished (so they can be refilled).
struct BatchStaging {
  std::vector<torch::Tensor> host;  // indexed by position in the layout's fields
  std::unique_ptr<c10::Event> copied;
};

}  // namespace mpirl::learner
