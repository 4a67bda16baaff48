// Shared fixture for black-box tests of the `kestrel` program: a temp folder
// per test, KESTREL_HOME inside it, and a runner that captures stdout and the
// exit code.
#pragma once

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

namespace kestrel::testing {

struct CliRun {
  int code = -1;
  std::string out;  // stdout only
};

class KestrelCliTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    dir_ = std::filesystem::temp_directory_path() /
           ("kestrel_cli_" + std::to_string(::getpid()) + "_" + info->test_suite_name() + "_" + info->name());
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  // Runs kestrel in the test folder with KESTREL_HOME inside it; stderr is dropped.
  CliRun Kestrel(const std::string& args) { return Run(KESTREL_CLI, args); }

  // Runs `program` (e.g. kestrel-deploy) as Kestrel runs kestrel.
  CliRun Run(const std::string& program, const std::string& args) {
    std::string cmd = "cd '" + dir_.string() + "' && KESTREL_HOME='" + (dir_ / "home").string() + "' " +
                      program + " " + args + " 2>/dev/null";
    CliRun r;
    FILE* p = popen(cmd.c_str(), "r");
    if (p == nullptr) return r;
    std::array<char, 4096> buf;
    size_t n;
    while ((n = fread(buf.data(), 1, buf.size(), p)) > 0) r.out.append(buf.data(), n);
    int st = pclose(p);
    r.code = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
    return r;
  }

  nlohmann::json Json(const CliRun& r) {
    auto j = nlohmann::json::parse(r.out, nullptr, false);
    EXPECT_FALSE(j.is_discarded()) << "stdout is not exactly one JSON document:\n" << r.out;
    return j;
  }

  void Write(const std::string& rel, const std::string& text) {
    std::filesystem::create_directories((dir_ / rel).parent_path());
    std::ofstream(dir_ / rel) << text;
  }

  std::filesystem::path dir_;
};

}  // namespace kestrel::testing
