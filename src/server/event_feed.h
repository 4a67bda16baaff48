// The event streams' one reader of the store: every open stream
// (/api/events, /api/jobs/{id}/events) polls on its own timer, and without
// this each poll was a store query (200 streams at 4 polls a second: 800
// queries a second for the same few new events). EventFeed reads the
// events of every job after its cursor at most once per `fresh_ms` and
// keeps the newest `keep` of them; a stream's poll is answered from that
// window, filtered by job. A stream further behind than the window (a
// client replaying from an old Last-Event-ID) reads the store itself, as
// before, until it reaches the window. Event ids grow in commit order (the
// store's contract, as the streams already rely on), so the window holds
// every event with an id in (Floor(), Cursor()].
// Thread-safety: none; the server's I/O thread only (api.h).
#pragma once

#include <cstdint>
#include <deque>
#include <vector>

#include "core/status.h"
#include "store/job_types.h"
#include "store/metadata_store.h"

namespace kestrel::server {

class EventFeed {
 public:
  // `page`: the most events one answer and one store read hold.
  EventFeed(store::MetadataStore& meta, int page, int64_t fresh_ms = 50, size_t keep = 20000);

  // The events with id > `after_id` of job `job_id` (0: every job), at most
  // `page` of them, in id order, as of `now_ms` (a steady clock).
  Result<std::vector<store::EventRecord>> Since(int64_t after_id, int64_t job_id, int64_t now_ms);

  int64_t StoreReads() const { return store_reads_; }  // queries made so far
  int64_t Floor() const { return floor_; }             // the window holds ids > Floor()
  int64_t Cursor() const { return cursor_; }           // ... and <= Cursor()

 private:
  Status Refresh();

  store::MetadataStore& meta_;
  int page_;
  int64_t fresh_ms_;
  size_t keep_;
  std::deque<store::EventRecord> window_;  // ids in (floor_, cursor_], ascending
  bool started_ = false;
  int64_t floor_ = 0;
  int64_t cursor_ = 0;
  int64_t refreshed_ms_ = 0;
  int64_t store_reads_ = 0;
};

}  // namespace kestrel::server
