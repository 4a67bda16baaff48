#include "core/parallel.h"

#include <algorithm>
#include <atomic>
#include <thread>
#include <vector>

#include "core/cpu_budget.h"
#include "core/thread_annotations.h"

namespace kestrel {
namespace {

// The first failure any worker reports; later ones are dropped.
class FirstFailure {
 public:
  void Record(const Status& s) EXCLUDES(mu_) {
    MutexLock l(mu_);
    if (first_.IsOk()) first_ = s;
  }
  Status Get() EXCLUDES(mu_) {
    MutexLock l(mu_);
    return first_;
  }

 private:
  Mutex mu_;
  Status first_ GUARDED_BY(mu_);
};

}  // namespace

Status ParallelFor(size_t n, int threads, const std::function<Status(size_t)>& fn) {
  size_t workers =
      threads > 0 ? static_cast<size_t>(threads) : static_cast<size_t>(ProcessCpuBudget().usable);
  workers = std::min(workers, std::max<size_t>(n, 1));
  std::atomic<size_t> next{0};
  std::atomic<bool> failed{false};
  FirstFailure first;
  auto loop = [&] {
    for (size_t i = next.fetch_add(1); i < n && !failed.load(); i = next.fetch_add(1)) {
      Status s = fn(i);
      if (!s.IsOk()) {
        first.Record(s);
        failed = true;
      }
    }
  };
  std::vector<std::thread> pool;
  for (size_t t = 1; t < workers; ++t) pool.emplace_back(loop);
  loop();
  for (auto& t : pool) t.join();
  return first.Get();
}

}  // namespace kestrel
