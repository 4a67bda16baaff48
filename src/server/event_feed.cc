#include "server/event_feed.h"

#include <algorithm>

namespace kestrel::server {

EventFeed::EventFeed(store::MetadataStore& meta, int page, int64_t fresh_ms, size_t keep)
    : meta_(meta), page_(std::max(1, page)), fresh_ms_(fresh_ms), keep_(std::max<size_t>(1, keep)) {}

// Reads what was committed after the cursor, a few pages at most (the rest
// at the next refresh: one refresh never holds the I/O thread long).
Status EventFeed::Refresh() {
  for (int pages = 0; pages < 8; ++pages) {
    ++store_reads_;
    KESTREL_ASSIGN_OR_RETURN(auto got, meta_.ReadEvents(cursor_, 0, page_));
    for (auto& ev : got) {
      cursor_ = ev.id;
      window_.push_back(std::move(ev));
    }
    while (window_.size() > keep_) {
      floor_ = window_.front().id;
      window_.pop_front();
    }
    if (static_cast<int>(got.size()) < page_) break;
  }
  return {};
}

Result<std::vector<store::EventRecord>> EventFeed::Since(int64_t after_id, int64_t job_id, int64_t now_ms) {
  if (!started_) {
    // The window starts where the first stream is: nothing before it is read.
    started_ = true;
    floor_ = cursor_ = after_id;
    refreshed_ms_ = now_ms - fresh_ms_;
  }
  // An empty window may move down (to a stream that started past every
  // event, say a made-up Last-Event-ID, no later stream must be held).
  if (window_.empty() && after_id < floor_) {
    floor_ = cursor_ = after_id;
    refreshed_ms_ = now_ms - fresh_ms_;
  }
  if (now_ms - refreshed_ms_ >= fresh_ms_) {
    KESTREL_RETURN_IF_ERROR(Refresh());
    refreshed_ms_ = now_ms;
  }
  // After the refresh: it may have moved the floor past this stream.
  if (after_id < floor_) {
    ++store_reads_;
    return meta_.ReadEvents(after_id, job_id, page_);
  }
  std::vector<store::EventRecord> out;
  auto it = std::upper_bound(window_.begin(), window_.end(), after_id,
                             [](int64_t id, const store::EventRecord& ev) { return id < ev.id; });
  for (; it != window_.end() && static_cast<int>(out.size()) < page_; ++it)
    if (job_id == 0 || it->job_id == job_id) out.push_back(*it);
  return out;
}

}  // namespace kestrel::server
