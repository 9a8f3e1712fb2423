#pragma once
// Bounded FIFO of sequence items (the foundation's minimal replay; the prioritized replay issue
// replaces it). Items live in one preallocated payload laid out like a message of `capacity`
// sequences, so inserting and sampling are one memcpy per field per item.
#include <cstdint>
#include <vector>

#include "runtime/rollout.h"

namespace mpirl::buffer {

class SequenceQueue {
 public:
  SequenceQueue(const SeqLayout& layout, int64_t capacity);
  int64_t size() const { return size_; }
  int64_t capacity() const { return capacity_; }
  int64_t free() const { return capacity_ - size_; }
  // Appends sequence i of a payload holding n sequences; requires free() > 0.
  void push(const char* payload, int64_t n, int64_t i);
  // Moves the `count` oldest items into dst (a payload for `count` sequences); requires size() >= count.
  void pop_into(char* dst, int64_t count);

 private:
  const SeqLayout& layout_;
  int64_t capacity_, head_ = 0, size_ = 0;
  std::vector<char> storage_;
};

}  // namespace mpirl::buffer
