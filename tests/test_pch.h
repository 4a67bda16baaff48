// The headers nearly every test translation unit parses, precompiled once for
// the kestrel_test executables (tests/CMakeLists.txt, KESTREL_TEST_PCH): each
// test TU then skips parsing GoogleTest, nlohmann/json and the common
// standard headers (docs/setup.md "CI's time"). Only third-party and standard
// headers belong here: a Kestrel header would make every test rebuild when it
// changes, and a test must still include what it uses itself.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>
