// `probe`: a job kind defined only in the tests (tests/app/job_kinds_*),
// to prove that a kind is one row of the job-kind table (app/job_kinds.h):
// its key schema and submit checks, its runner, its typed result, its gate
// and its registration step live here and nowhere in src/.
//
// A probe job's attempt writes `answer` into <attempt>/answer.txt and
// reports it as the result's path with map50 = answer / 100. Its gate
// re-reads the file (it must exist and hold the answer) and applies the
// job's min_map50; a succeeded probe job "registers" by putting the store
// setting probe.registered.<job id> = the file's path.
#pragma once

#include <fstream>
#include <memory>
#include <sstream>
#include <string>

#include "app/job_kinds.h"
#include "app/jobs.h"
#include "core/env.h"

namespace kestrel::app::probe {

inline constexpr const char* kName = "probe";

class ProbeKeys final : public JobKeySchema {
 public:
  int64_t answer = 0;
  std::string note;  // "refuse": refused at submit; "bad": the runner fails (bad_config)

  void Bind(OptionSet& s) override {
    s.Int("answer", &answer, "what the probe writes, 0..100 (map50 = answer / 100)", 0, 100);
    s.String("note", &note, "refuse | bad | anything");
  }
  std::string Refused(const std::string& key) const override {
    return key == "output" ? "'output' is decided by the job system (a probe writes <attempt>/answer.txt)"
                           : "";
  }
  Result<KindSubmission> Check(const jobs::JobKeys& jk, OptionSet& set, const KeyWeightsResolver&,
                               const ModelResolver&) override {
    if (jk.device != "cpu")
      return Status::InvalidArgument("a probe job runs on the CPU (device=cpu)", {kRequestFile, 0, "device"});
    if (note == "refuse")
      return Status::InvalidArgument("note=refuse is refused at submit", {kRequestFile, 0, "note"});
    KindSubmission s;
    s.config = set.ToJson();
    return s;
  }
};

inline Result<AttemptResult> RunProbe(AttemptContext& ctx) {
  ProbeKeys k;
  OptionSet set;
  k.Bind(set);
  KESTREL_RETURN_IF_ERROR(ctx.ApplyConfig(set));
  ctx.Progress("stage=eval probe answer=" + std::to_string(k.answer));
  if (k.note == "bad")
    return Status::InvalidArgument("note=bad: the probe fails", {"", 0, "note"})
        .WithReason(FailureReason::kBadConfig);
  KESTREL_RETURN_IF_ERROR(Env::Default().CreateDirs(ctx.AttemptDir()));
  const std::string file = JoinPath(ctx.AttemptDir(), "answer.txt");
  KESTREL_RETURN_IF_ERROR(Env::Default().WriteFileAtomic(file, std::to_string(k.answer)));
  AttemptResult r;
  r.path = file;
  r.run_dir = ctx.AttemptDir();
  r.map50 = static_cast<double>(k.answer) / 100.0;
  r.details = {{"note", k.note}};
  return r;
}

inline Status ProbeGate(const AttemptResult& r, const store::JobRecord& job, Env& env) {
  if (r.path.empty()) return Status::FailedPrecondition("the result names no answer file");
  auto bytes = env.ReadFile(r.path);
  if (!bytes.IsOk()) return Status::FailedPrecondition("answer file " + r.path + " cannot be read");
  if (!r.map50 || *bytes != std::to_string(static_cast<int64_t>(*r.map50 * 100.0 + 0.5)))
    return Status::FailedPrecondition("answer file " + r.path + " does not hold the reported answer");
  if (*r.map50 < job.spec.min_map50)
    return Status::FailedPrecondition("answer " + std::to_string(*r.map50) + " is below the job's min_map50");
  return {};
}

inline Result<std::string> RegisterProbe(const SucceededJob& s) {
  KESTREL_RETURN_IF_ERROR(
      s.meta.PutSetting("probe.registered." + std::to_string(s.job.id), s.result.path, s.now_ms));
  return "probe " + std::to_string(s.job.id) + " registered";
}

// The row; `with_runner` false in a program that only submits and supervises.
inline JobKindSpec ProbeKind(bool with_runner) {
  JobKindSpec k;
  k.name = kName;
  k.summary = "a test kind: writes answer= to a file";
  k.keys = [] { return std::make_unique<ProbeKeys>(); };
  k.gate = ProbeGate;
  k.on_succeeded = RegisterProbe;
  if (with_runner) k.run = RunProbe;
  return k;
}

}  // namespace kestrel::app::probe
