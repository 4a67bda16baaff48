#include "core/terminate.h"

#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <exception>
#include <iostream>

namespace kestrel {
namespace {

std::atomic<TerminateReporter> g_reporter{nullptr};

void DefaultReport(const std::string& what) { std::cerr << "error: internal error: " << what << std::endl; }

[[noreturn]] void OnTerminate() {
  static std::atomic<bool> once{false};
  if (!once.exchange(true)) {  // a second thread terminating at once only exits
    const std::string what = DescribeCurrentException();
    try {
      TerminateReporter r = g_reporter.load();
      (r != nullptr ? r : DefaultReport)(what);
    } catch (...) {
    }
    std::cout.flush();
    std::cerr.flush();
    std::fflush(nullptr);
  }
  ::_exit(1);
}

}  // namespace

std::string DescribeCurrentException() {
  std::exception_ptr e = std::current_exception();
  if (!e) return "std::terminate called without an active exception";
  try {
    std::rethrow_exception(e);
  } catch (const std::exception& x) {
    return std::string("uncaught exception: ") + x.what();
  } catch (...) {
    return "uncaught exception of unknown type";
  }
}

void InstallTerminateHandler(TerminateReporter report) {
  g_reporter.store(report);
  std::set_terminate(OnTerminate);
}

}  // namespace kestrel
