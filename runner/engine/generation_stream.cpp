#include "runner/engine/generation_stream.h"

namespace kvtrie::engine {

const char* done_reason_name(StopKind kind) {
  switch (kind) {
    case StopKind::Eos:
    case StopKind::StopString:
      return "stop";
    case StopKind::Length:
      return "length";
    case StopKind::Cancelled:
      return "cancelled";
  }
  return "stop";
}

void StreamChannel::push(Chunk chunk) {
  {
    std::lock_guard lock(mutex_);
    if (finished_) return;
    chunks_.push_back(std::move(chunk));
  }
  ready_.notify_all();
}

void StreamChannel::finish(Chunk last) {
  {
    std::lock_guard lock(mutex_);
    if (finished_) return;
    chunks_.push_back(std::move(last));
    finished_ = true;
  }
  ready_.notify_all();
}

bool StreamChannel::finished() const {
  std::lock_guard lock(mutex_);
  return finished_;
}

StreamChannel::Poll StreamChannel::next(Chunk& out, std::chrono::milliseconds timeout) {
  std::unique_lock lock(mutex_);
  if (delivered_) return Poll::End;
  if (!ready_.wait_for(lock, timeout, [&] { return !chunks_.empty(); })) return Poll::Timeout;
  out = std::move(chunks_.front());
  chunks_.pop_front();
  if (out.final) delivered_ = true;
  return Poll::Chunk;
}

void StreamChannel::cancel() {
  cancelled_.store(true, std::memory_order_release);
}

GenerationStream& GenerationStream::operator=(GenerationStream&& other) noexcept {
  if (this != &other) {
    if (channel_) channel_->cancel();
    channel_ = std::move(other.channel_);
  }
  return *this;
}

GenerationStream::~GenerationStream() {
  // Dropping the reader before the end means nobody wants the rest: let the engine free the slot.
  if (channel_) channel_->cancel();
}

StreamChannel::Poll GenerationStream::next(Chunk& out, std::chrono::milliseconds timeout) {
  if (!channel_) return StreamChannel::Poll::End;
  return channel_->next(out, timeout);
}

void GenerationStream::cancel() {
  if (channel_) channel_->cancel();
}

}  // namespace kvtrie::engine
