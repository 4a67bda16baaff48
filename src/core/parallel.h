// Data parallelism over an index range with plain std::threads.
#pragma once

#include <cstddef>
#include <functional>

#include "core/status.h"

namespace kestrel {

// Runs fn(i) for every i in [0, n) on `threads` threads (0 = the cores this
// process may use, core/cpu_budget.h; never more threads than items; the
// calling thread is one of them). Items are handed out dynamically, so
// results must be written by index, not order.
// Returns the first non-OK Status; after a failure no new items start.
Status ParallelFor(size_t n, int threads, const std::function<Status(size_t)>& fn);

}  // namespace kestrel
