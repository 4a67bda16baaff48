#include "core/log.h"

#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

namespace kestrel {

Status InitLogging(const std::string& level) {
  auto lvl = spdlog::level::from_str(level);
  if (lvl == spdlog::level::off && level != "off") {
    return Status::InvalidArgument("unknown log level '" + level + "' (trace, debug, info, warn, error, off)",
                                   {"", 0, "log-level"});
  }
  auto logger = spdlog::stderr_color_mt("kestrel");
  logger->set_pattern("%^%L%$ %H:%M:%S.%e %v");
  spdlog::set_default_logger(logger);
  spdlog::set_level(lvl);
  return {};
}

}  // namespace kestrel
