// Last-resort handling for exceptions nobody caught. A program's entry point
// catches what escapes its own thread; this handler covers the rest (an
// exception escaping another thread, a noexcept function that throws, a
// joinable std::thread destroyed): it reports what happened and ends the
// process with _exit(1) instead of abort(), so the exit status says "the
// operation failed" (1), never a crash (134), and the report is never lost.
#pragma once

#include <exception>
#include <string>

namespace kestrel {

// Receives the description; must not throw. Runs on the terminating thread.
using TerminateReporter = void (*)(const std::string& what);

// Installs the std::terminate handler. Without a reporter it prints
// "error: internal error: <what>" on stderr.
void InstallTerminateHandler(TerminateReporter report = nullptr);

// What an exception says, for a log line or an error message: its what()
// for a std::exception, "an exception that is not a std::exception" for
// anything else thrown (an int, a string literal), "no exception" for a null
// `error`. The one rethrow-and-catch ladder for every catch (...) that
// reports (the server's 500s and log lines, the terminate handler).
std::string DescribeException(const std::exception_ptr& error);

// The exception in flight (inside a catch block or a terminate handler):
// "uncaught exception: " + DescribeException(it), or "std::terminate called
// without an active exception".
std::string DescribeCurrentException();

}  // namespace kestrel
