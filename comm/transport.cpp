#include "comm/transport.h"

#include <atomic>
#include <new>
#include <thread>
#include <utility>

#include "core/error.h"

namespace mpirl {
namespace {

std::atomic<size_t> left_to_mpi{0};

}  // namespace

MsgBuffer::MsgBuffer(MsgBuffer&& o) noexcept : buf(std::move(o.buf)), req(std::exchange(o.req, MPI_REQUEST_NULL)) {}

MsgBuffer::~MsgBuffer() {
  if (req == MPI_REQUEST_NULL) return;
  // Never deleted: moving a vector keeps its storage where MPI knows it. (If even this allocation
  // fails, the storage is freed with `buf`: no worse than before, and the rank is aborting.)
  if (new (std::nothrow) std::vector<char>(std::move(buf))) ++left_to_mpi;
}

size_t msg_buffers_left_to_mpi() { return left_to_mpi.load(); }

int try_recv(MPI_Comm comm, int source, int tag, std::vector<char>& buf, size_t* size) {
  int flag = 0;
  MPI_Status st;
  MPIRL_MPI(MPI_Iprobe(source, tag, comm, &flag, &st));
  if (!flag) return -1;
  int count = 0;
  MPIRL_MPI(MPI_Get_count(&st, MPI_BYTE, &count));
  if (buf.size() < size_t(count)) buf.resize(size_t(count));
  MPIRL_MPI(MPI_Recv(buf.data(), count, MPI_BYTE, st.MPI_SOURCE, tag, comm, MPI_STATUS_IGNORE));
  *size = size_t(count);
  return st.MPI_SOURCE;
}

std::vector<char>& SendPool::acquire() {
  progress();
  for (auto& s : slots_)
    if (!s.busy) {
      s.busy = true;
      return s.buf;
    }
  slots_.emplace_back();
  slots_.back().busy = true;
  return slots_.back().buf;
}

void SendPool::send(std::vector<char>& buf, size_t bytes, int dest, int tag, MPI_Comm comm) {
  for (auto& s : slots_)
    if (&s.buf == &buf) {
      MPIRL_CHECK(s.req == MPI_REQUEST_NULL, "send buffer reused while in flight");
      MPIRL_MPI(MPI_Isend(buf.data(), int(bytes), MPI_BYTE, dest, tag, comm, &s.req));
      return;
    }
  MPIRL_CHECK(false, "buffer not from this pool");
}

void SendPool::progress() {
  for (auto& s : slots_) {
    if (s.req == MPI_REQUEST_NULL) continue;
    int done = 0;
    MPIRL_MPI(MPI_Test(&s.req, &done, MPI_STATUS_IGNORE));
    if (done) s.busy = false;
  }
}

size_t SendPool::in_flight() const {
  size_t n = 0;
  for (auto& s : slots_) n += (s.req != MPI_REQUEST_NULL);
  return n;
}

void SendPool::wait_all(const std::function<void()>& while_waiting) {
  Backoff b;
  for (;;) {
    progress();
    if (in_flight() == 0) return;
    if (while_waiting) while_waiting();
    b.idle();
  }
}

void wait_request(MPI_Request& req, const std::function<void()>& while_waiting, MPI_Status* status) {
  Backoff b;
  for (;;) {
    int done = 0;
    MPIRL_MPI(MPI_Test(&req, &done, status ? status : MPI_STATUS_IGNORE));
    if (done) return;
    if (while_waiting) while_waiting();
    b.idle();
  }
}


}  // namespace mpirl
