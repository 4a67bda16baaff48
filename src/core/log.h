// Logging setup. Modules log through spdlog directly (spdlog::info(...));
// main() calls InitLogging once. Logs go to stderr so stdout stays clean for
// --json output.
#pragma once

#include <string>

#include "core/status.h"

namespace kestrel {

// level: trace, debug, info, warn, error, off.
Status InitLogging(const std::string& level);

}  // namespace kestrel
