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

std::string DescribeException(const std::exception_ptr& error) {
  if (!error) return "no exception";
  try {
    std::rethrow_exception(error);
  } catch (const std::exception& e) {
    return e.what();
  } catch (...) {
    return "an exception that is not a std::exception";
  }
}

std::string DescribeCurrentException() {
  std::exception_ptr e = std::current_exception();
  if (!e) return "std::terminate called without an active exception";
  return "uncaught exception: " + DescribeException(e);
}

void InstallTerminateHandler(TerminateReporter report) {
  g_reporter.store(report);
  std::set_terminate(OnTerminate);
}

}  // namespace kestrel
