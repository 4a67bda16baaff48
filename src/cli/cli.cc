#include "cli/cli.h"

#include <atomic>
#include <filesystem>
#include <iostream>

#include "app/datasets.h"
#include "core/json.h"
#include "core/parse.h"
#include "core/terminate.h"
#include "core/utf8.h"

namespace kestrel::cli {

Result<ProgramPaths> ThisProgramAndTorch() {
  std::error_code ec;
  const std::filesystem::path self = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (ec) return Status::IoError("/proc/self/exe: " + ec.message());
  return ProgramPaths{self.string(), (self.parent_path() / "kestrel-torch").string()};
}

CLI::Validator IntArg(int64_t min, int64_t max) {
  return CLI::Validator(
      [min, max](std::string& text) {
        auto v = ParseInt64(text, {}, min, max);
        return v.IsOk() ? std::string() : EscapeInvalidUtf8(v.GetStatus().Message());
      },
      "INT");
}

CLI::Validator NumberArg(double min, double max) {
  return CLI::Validator(
      [min, max](std::string& text) {
        auto v = ParseFiniteDouble(text, {}, min, max);
        return v.IsOk() ? std::string() : EscapeInvalidUtf8(v.GetStatus().Message());
      },
      "NUMBER");
}

void AddOptionFlags(CLI::App* cmd, const OptionSet& set, FlagValues* values) {
  for (const auto& key : set.Keys()) {
    std::string flag = "--" + key;
    for (auto& c : flag) {
      if (c == '_') c = '-';
    }
    if (set.IsBool(key)) {
      cmd->add_flag_callback(
          flag, [values, key] { (*values)[key] = "true"; }, set.Help(key));
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
    // The reference framework's bare flags: `plots` is plots=true, and a
    // bare `resume` is resume=true (train: the newest last.ckpt under the
    // project, train::ResolveResumeTrue).
    if (token.find('=') == std::string::npos && (set.IsBool(token) || token == "resume") && set.Has(token)) {
      KESTREL_RETURN_IF_ERROR(set.Set(token, "true", {"command line", 0, ""}));
      continue;
    }
    if (!SplitKeyValue(token, &k, &v)) {
      return Status::InvalidArgument(
          "unexpected argument '" + token + "' (options are --flag VALUE or key=value)",
          {"command line", 0, ""});
    }
    KESTREL_RETURN_IF_ERROR(set.Set(k, v, {"command line", 0, ""}));
  }
  return {};
}

Result<Stores> OpenStores(const Context& ctx) {
  Stores s;
  KESTREL_ASSIGN_OR_RETURN(s.meta, store::MetadataStore::Open(store::MetadataUrl(ctx.home)));
  KESTREL_ASSIGN_OR_RETURN(s.blobs, store::OpenArtifactStore(ctx.home));
  return s;
}

namespace {

std::atomic<bool> g_json_printed{false};
std::atomic<bool> g_terminate_json{false};

nlohmann::json ErrorJson(const Status& status, const std::string& code) {
  const auto& w = status.Where();
  return {{"ok", false},
          {"error",
           {{"code", code},
            {"message", status.Message()},
            {"file", w.file},
            {"line", w.line},
            {"field", w.field}}}};
}

// The terminate handler's report: like FailInternal, in the --json mode
// main() found on the command line.
void ReportTerminate(const std::string& what) {
  Context ctx;
  ctx.json = g_terminate_json.load();
  // The exit code is the handler's: InstallTerminateHandler's _exit(1).
  (void)FailInternal(ctx, what);
}

}  // namespace

void PrintJsonDocument(const nlohmann::json& doc) {
  std::cout << DumpJson(doc, 2) << std::endl;
  g_json_printed.store(true);
}

bool JsonDocumentPrinted() { return g_json_printed.load(); }

int Emit(const Context& ctx, const std::string& text, const nlohmann::json& json) {
  if (ctx.json) {
    PrintJsonDocument(json);
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
  if (ctx.json)
    PrintJsonDocument(ErrorJson(status, exit_code == kExitUsage ? "usage" : StatusCodeName(status.Code())));
  return exit_code;
}

CommandResult::CommandResult(Status status)
    : kind_(status.IsOk() ? Kind::kDone : Kind::kError), status_(std::move(status)), exit_code_(-1) {
  if (kind_ == Kind::kDone) exit_code_ = kExitOk;
}

CommandResult::CommandResult(Output out) : kind_(Kind::kOutput), out_(std::move(out)) {}

CommandResult::CommandResult(Result<Output> out)
    : CommandResult(out.IsOk() ? CommandResult(std::move(out).Value()) : CommandResult(out.GetStatus())) {}

CommandResult CommandResult::Failed(Status status, int exit_code) {
  CommandResult r(std::move(status));
  if (r.kind_ == Kind::kError) r.exit_code_ = exit_code;
  return r;
}

CommandResult CommandResult::Reported(int exit_code) {
  CommandResult r;
  r.exit_code_ = exit_code;
  return r;
}

int CommandResult::Finish(const Context& ctx) const {
  switch (kind_) {
    case Kind::kDone:
      return exit_code_;
    case Kind::kError:
      return Fail(ctx, status_, exit_code_);
    case Kind::kOutput:
      Emit(ctx, out_.text, out_.json);
      return out_.exit_code;
  }
  return kExitFailure;
}

std::function<void()> Callback(const Context& ctx, int* exit_code, std::function<CommandResult()> body) {
  return [&ctx, exit_code, body = std::move(body)] { *exit_code = body().Finish(ctx); };
}

int FailWithReport(const Context& ctx, const Status& status, const nlohmann::json* report) {
  if (report == nullptr || !ctx.json) return Fail(ctx, status);
  std::cerr << "error: " << status.ToString() << std::endl;
  nlohmann::json j = ErrorJson(status, StatusCodeName(status.Code()));
  j["error"]["message"] = status.Message().substr(0, status.Message().find('\n'));
  j["report"] = *report;
  PrintJsonDocument(j);
  return kExitFailure;
}

void BindDataModeKey(OptionSet& set, std::string* data_mode) {
  set.Choice("data_mode", data_mode, {"copy", "reference"},
             "data=PATH only: copy the images into the home (copy) or record their paths, sizes, mtimes and "
             "hashes and read the files (reference; they must stay unchanged)");
}

bool ResolveDataOption(const Context& ctx, Stores& stores, std::string* data, nlohmann::json* info,
                       int* exit_code, const std::string& data_mode) {
  data::ValidationReport report;
  auto r = app::Datasets(*stores.meta, *stores.blobs).Resolve(*data, &report, data_mode);
  if (!r.IsOk()) {
    const nlohmann::json rj = report.source.empty() ? nlohmann::json() : report.ToJson();
    *exit_code = FailWithReport(ctx, r.GetStatus(), report.source.empty() ? nullptr : &rj);
    return false;
  }
  if (!r->hint.empty()) std::cerr << "note: " << r->hint << std::endl;
  if (r->from_path) {
    (ctx.json ? std::cerr : std::cout) << r->message << std::endl;
    if (info != nullptr) {
      *info = {{"source", EscapeInvalidUtf8(*data)},
               {"dataset", r->record.dataset},
               {"version", "v" + std::to_string(r->record.seq)},
               {"version_id", r->record.version_id},
               {"created", r->created},
               {"data_mode", r->record.data_mode}};
    }
  }
  *data = r->spec;
  return true;
}

int FailInternal(const Context& ctx, const std::string& what) {
  const Status s = Status::Internal("internal error: " + what);
  std::cerr << "error: " << s.Message() << std::endl;
  if (ctx.json && !JsonDocumentPrinted()) PrintJsonDocument(ErrorJson(s, StatusCodeName(s.Code())));
  return kExitFailure;
}

void InstallTerminateHandler(bool json) {
  g_terminate_json.store(json);
  kestrel::InstallTerminateHandler(&ReportTerminate);
}

}  // namespace kestrel::cli
