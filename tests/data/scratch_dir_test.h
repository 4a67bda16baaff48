// Shared fixture pieces for the data tests: a fresh scratch folder per test
// and the finding filter most reader tests use.
#pragma once

#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "data/dataset.h"

namespace kestrel::data {

// A test with its own folder under the temp directory, removed afterwards.
class ScratchDirTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = (std::filesystem::temp_directory_path() / "kestrel_data_XXXXXX").string();
    ASSERT_NE(::mkdtemp(tmpl.data()), nullptr);
    root_ = tmpl;
  }
  void TearDown() override {
    std::error_code ec;
    std::filesystem::remove_all(root_, ec);
  }
  // The path of `rel` inside the scratch folder.
  std::string P(const std::string& rel) const { return root_ + "/" + rel; }
  // Writes `data` to `rel` (bytes as given), creating folders on the way.
  void Write(const std::string& rel, const std::string& data) {
    std::filesystem::create_directories(std::filesystem::path(P(rel)).parent_path());
    std::ofstream(P(rel), std::ios::binary) << data;
  }
  std::string root_;
};

// The findings (examples) of one check.
inline std::vector<const Finding*> With(const FindingList& fs, const std::string& check) {
  std::vector<const Finding*> out;
  for (const Finding& f : fs) {
    if (f.check == check) out.push_back(&f);
  }
  return out;
}

}  // namespace kestrel::data
