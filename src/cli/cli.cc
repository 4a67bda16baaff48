#include "cli/cli.h"

#include <iostream>

namespace kestrel::cli {

void AddOptionFlags(CLI::App* cmd, const OptionSet& set, FlagValues* values) {
  for (const auto& key : set.Keys()) {
    std::string flag = "--" + key;
    for (auto& c : flag) {
      if (c == '_') c = '-';
    }
    if (set.IsBool(key)) {
      cmd->add_flag_callback(flag, [values, key] { (*values)[key] = "true"; }, set.Help(key));
    } else {
      cmd->add_option_function<std::string>(
             flag, [values, key](const std::string& v) { (*values)[key] = v; }, set.Help(key))
          ->type_name("VALUE");
    }
  }
}

Status ApplyOptions(OptionSet& set, const FlagValues& values, const std::vector<std::string>& extras) {
  for (const auto& [k, v] : values) {
    KESTREL_RETURN_IF_ERROR(set.Set(k, v, {"command line", 0, ""}));
  }
  for (const auto& token : extras) {
    std::string k, v;
    if (!SplitKeyValue(token, &k, &v)) {
      return Status::InvalidArgument("unexpected argument '" + token + "' (options are --flag VALUE or key=value)",
                                     {"command line", 0, ""});
    }
    KESTREL_RETURN_IF_ERROR(set.Set(k, v, {"command line", 0, ""}));
  }
  return {};
}

Result<Stores> OpenStores(const Context& ctx) {
  Stores s;
  KESTREL_ASSIGN_OR_RETURN(s.meta, store::MetadataStore::Open(store::MetadataUrl(ctx.home)));
  s.blobs = std::make_unique<store::ArtifactStore>(ctx.home);
  return s;
}

int Emit(const Context& ctx, const std::string& text, const nlohmann::json& json) {
  if (ctx.json) {
    std::cout << json.dump(2) << std::endl;
  } else {
    std::cout << text;
    if (!text.empty() && text.back() != '\n') std::cout << '\n';
    std::cout.flush();
  }
  return kExitOk;
}

int Fail(const Context& ctx, const Status& status, int exit_code) {
  if (exit_code < 0) {
    exit_code = (status.Code() == StatusCode::kInvalidArgument && status.Where().file == "command line")
                    ? kExitUsage
                    : kExitFailure;
  }
  std::cerr << "error: " << status.ToString() << std::endl;
  if (ctx.json) {
    const auto& w = status.Where();
    nlohmann::json j = {{"ok", false},
                        {"error",
                         {{"code", StatusCodeName(status.Code())},
                          {"message", status.Message()},
                          {"file", w.file},
                          {"line", w.line},
                          {"field", w.field}}}};
    std::cout << j.dump(2) << std::endl;
  }
  return exit_code;
}

}  // namespace kestrel::cli
