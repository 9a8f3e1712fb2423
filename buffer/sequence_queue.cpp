#include "buffer/sequence_queue.h"

#include "runtime/error.h"

namespace mpirl::buffer {

SequenceQueue::SequenceQueue(const SeqLayout& layout, int64_t capacity)
    : layout_(layout), capacity_(capacity), storage_(wire::payload_bytes(layout.arrays(capacity))) {
  MPIRL_CHECK(capacity >= 1, "capacity {}", capacity);
}

void SequenceQueue::push(const char* payload, int64_t n, int64_t i) {
  MPIRL_CHECK(size_ < capacity_, "push into a full queue");
  int64_t slot = (head_ + size_) % capacity_;
  layout_.copy_sequence(payload, n, i, storage_.data(), capacity_, slot);
  ++size_;
}

void SequenceQueue::pop_into(char* dst, int64_t count) {
  MPIRL_CHECK(size_ >= count, "pop {} from {}", count, size_);
  for (int64_t j = 0; j < count; ++j) {
    layout_.copy_sequence(storage_.data(), capacity_, head_, dst, count, j);
    head_ = (head_ + 1) % capacity_;
    --size_;
  }
}

}  // namespace mpirl::buffer
