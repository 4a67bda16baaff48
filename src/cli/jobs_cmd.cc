// The job system's commands (torch-free): `kestrel submit`, `kestrel worker`,
// `kestrel jobs list|show|logs|cancel|retry`, `kestrel stats`, `kestrel
// workers` and `kestrel breaker show|reset`. Semantics in docs/jobs.md; the JSON shapes are
// what tools/soak reads, so keep them.
#include <signal.h>
#include <spdlog/spdlog.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <limits>
#include <optional>
#include <sstream>

#include "app/doctor.h"
#include "app/fingerprint.h"
#include "app/jobs.h"
#include "app/stats.h"
#include "app/system.h"
#include "app/templates.h"
#include "cli/cli.h"
#include "cli/doctor_cmd.h"
#include "core/cpu_budget.h"
#include "core/env.h"
#include "core/json.h"
#include "core/parse.h"
#include "core/thread_policy.h"
#include "jobs/job_keys.h"
#include "jobs/retry.h"
#include "jobs/webhook.h"
#include "jobs/worker.h"
#include "store/private_files.h"

namespace kestrel::cli {
namespace {

Status Usage(const std::string& field, const std::string& msg) {
  return Status::InvalidArgument(msg, {"command line", 0, field});
}

// Durations and counts in seconds / MB: finite, in [0, 1e9] (so the
// conversion to milliseconds cannot overflow).
constexpr double kMaxSeconds = 1e9;

int64_t SecondsToMs(double s) { return static_cast<int64_t>(std::llround(s * 1000.0)); }

// ---- submit

// The app layer locates errors in a request's keys at app::kRequestFile;
// here the request is the command line (exit 2).
Status OnCommandLine(const Status& s) { return app::RelocateRequestError(s, "command line"); }

std::string FormatMs(int64_t ms) {
  if (ms <= 0) return "-";
  std::time_t t = static_cast<std::time_t>(ms / 1000);
  std::tm tm{};
  localtime_r(&t, &tm);
  std::ostringstream o;
  o << std::put_time(&tm, "%Y-%m-%d %H:%M:%S");
  return o.str();
}

Result<int64_t> ParseJobId(const std::string& s) {
  return ParseInt64(s, {"command line", 0, "id"}, 1, std::numeric_limits<int64_t>::max(),
                    "a job id (a positive number)");
}

// The job-kind table's names, "train, val, export" (app/job_kinds.h).
std::string KindList() {
  std::string out;
  for (const auto& n : app::JobKinds().Names()) out += (out.empty() ? "" : ", ") + n;
  return out;
}

void AddSubmit(CLI::App& app, Context& ctx, int* exit_code) {
  auto args = std::make_shared<std::vector<std::string>>();
  CLI::App* cmd = app.add_subcommand(
      "submit", "Queue a job of a kind of the job-kind table: " + KindList() + " (docs/jobs.md)");
  cmd->add_option(
      "key=value", *args,
      "the kind's keys (train, the default: data=NAME[@ref] model= epochs= ...; `kestrel train --help`; "
      "kind=val: model=WEIGHTS data= split= ...; kind=export: model= format= ...), and the job keys below");
  {
    jobs::JobKeys defaults;
    OptionSet keys;
    defaults.Bind(keys);
    cmd->footer("Job keys (key=default  (type range)):\n" + keys.HelpText());
  }
  cmd->callback(Callback(ctx, exit_code, [&ctx, args]() -> CommandResult {
    // app::SubmitTokens: template=NAME[@vN] expanded (the command line
    // winning), the draft, data=, the job. The store is opened only when
    // needed, so a refused key needs no home.
    std::optional<Stores> opened;
    app::SubmitSteps steps;
    // data_mode= (copy|reference) says how a data=PATH is imported here, as
    // for train and val; it is not a key of the job (the job stores the
    // version, whose record carries the mode).
    std::string data_mode = "copy";
    for (auto it = args->begin(); it != args->end();) {
      if (it->rfind("data_mode=", 0) != 0) {
        ++it;
        continue;
      }
      data_mode = it->substr(std::string("data_mode=").size());
      if (data_mode != "copy" && data_mode != "reference") {
        return OnCommandLine(
            Status::InvalidArgument("data_mode='" + data_mode.substr(0, 40) +
                                        "': must be copy or reference (how data=PATH is imported)",
                                    {"command line", 0, "data_mode"}));
      }
      it = args->erase(it);
    }
    steps.open_store = [&]() -> Result<store::MetadataStore*> {
      if (!opened) {
        KESTREL_ASSIGN_OR_RETURN(Stores stores, OpenStores(ctx));
        opened = std::move(stores);
      }
      return opened->meta.get();
    };
    // pretrained= / model= may name a registered model: the job stores its blob's path.
    steps.resolve_weights = [&ctx](const std::string&, std::string* w) {
      return ResolveWeightsOption(ctx, w);
    };
    // An export job's model= also keeps which registered model it named (pinned as NAME@vN).
    steps.resolve_model = [&ctx](const std::string& text) -> Result<app::ResolvedWeights> {
      KESTREL_ASSIGN_OR_RETURN(Stores stores, OpenStores(ctx));
      app::ModelRegistry reg(*stores.meta, *stores.blobs, Env::Default());
      KESTREL_ASSIGN_OR_RETURN(app::ResolvedWeights w, reg.ResolveWeights(text));
      if (w.model) {
        (ctx.json ? std::cerr : std::cout) << "model " << w.model->name << "@v" << w.model->seq << " ("
                                           << w.model->id.substr(0, 12) << "): " << w.path << std::endl;
      }
      return w;
    };
    // data= may be a dataset path: imported (or its version reused) here, so
    // the job stores the version, never the path. ResolveDataOption reports
    // its own failure (data_code).
    int data_code = 0;
    steps.resolve_data = [&](std::string* data) -> Status {
      if (ResolveDataOption(ctx, *opened, data, nullptr, &data_code, data_mode)) return {};
      return Status::Aborted("data= was refused (reported)");
    };
    auto r = app::SubmitTokens(*args, steps, Env::Default().UnixMillis());
    if (!r.IsOk()) {
      if (data_code != 0) return CommandResult::Reported(data_code);
      return OnCommandLine(r.GetStatus());
    }
    std::string text =
        std::string(r->created ? "submitted" : "already queued:") + " job " + std::to_string(r->job.id) +
        " (" + store::JobStateName(r->job.state) +
        (r->dataset.empty() ? std::string() : ", data " + r->dataset + "@" + r->version_id.substr(0, 12)) +
        ")";
    if (const std::string kind = app::JobKindText(r->job); kind != app::JobKindTable::kDefaultKind)
      text += ", kind " + kind;
    return Output{text, app::SubmitResultJson(*r)};
  }));
}

// ---- worker

std::atomic<bool> g_worker_stop{false};
extern "C" void OnWorkerStop(int /*sig*/) { g_worker_stop.store(true); }

// The program a worker starts its attempts with (`train --job`, a LibTorch
// command): kestrel-torch beside this program when there is one (the
// `kestrel` front would only execv it, one start more per attempt, and a
// test or an operator that finds the attempt by its pid would see it change
// program under them), else this program itself.
std::string AttemptProgram() {
  auto programs = ThisProgramAndTorch();
  if (!programs.IsOk()) return std::string();
  if (programs->self != programs->torch && ::access(programs->torch.c_str(), X_OK) == 0)
    return programs->torch;
  return programs->self;
}

std::string HostName() {
  char buf[256] = {0};
  if (gethostname(buf, sizeof buf - 1) != 0) return "localhost";
  return buf;
}

void AddWorker(CLI::App& app, Context& ctx, int* exit_code) {
  struct Args {
    int slots = 1;
    std::string devices;
    std::string id;
    int64_t max_jobs = 0;
    bool exit_when_idle = false;
    bool no_webhooks = false;
    std::string min_free_gb;  // "" = KESTREL_MIN_FREE_GB or the default
    std::string usage_s;      // "" = KESTREL_USAGE_S or the default
    std::string cpus;         // "" = this process's affinity
    bool no_pin = false;
    std::string host;  // "" = gethostname()
    int quarantine_after = 3;
    bool skip_doctor = false;
    double heartbeat_s = 30, hang_timeout_s = 90, lease_s = 90, grace_s = 10, poll_s = 1;
  };
  auto a = std::make_shared<Args>();
  CLI::App* cmd = app.add_subcommand("worker", "Run queued jobs on this machine's devices (docs/jobs.md)");
  cmd->add_option("--slots", a->slots, "concurrent attempts")->capture_default_str()->check(IntArg(1, 256));
  cmd->add_option("--devices", a->devices,
                  "devices: cpu, cpu:N, gpu:IDX:MB, comma-separated (default: one cpu per slot)");
  cmd->add_option("--cpus", a->cpus,
                  "CPUs the CPU slots share out, e.g. 0-3 (default: this process's affinity; docs/speed.md)");
  cmd->add_flag(
      "--no-pin", a->no_pin,
      "do not pin each CPU slot's attempts to its own share of the CPUs (they then all use every core)");
  cmd->add_option("--id", a->id, "worker id (default host:pid)");
  cmd->add_option(
      "--host", a->host,
      "the host name recorded with attempts, drained and quarantined by (default: this machine's)");
  cmd->add_option(
         "--quarantine-after", a->quarantine_after,
         "environment failures on this host that quarantine it (docs/jobs.md \"Quarantine and drain\")")
      ->capture_default_str()
      ->check(IntArg(1, 1000));
  cmd->add_flag(
      "--skip-doctor", a->skip_doctor,
      "do not run kestrel doctor's checks at start (the fingerprint is still recorded; docs/jobs.md "
      "\"Doctor\")");
  cmd->add_option("--max-jobs", a->max_jobs, "exit after this many attempts (0 = no limit)")
      ->check(IntArg(0));
  cmd->add_flag("--exit-when-idle", a->exit_when_idle, "exit when no waiting job fits this worker");
  cmd->add_flag("--no-webhooks", a->no_webhooks,
                "do not deliver webhooks from this worker (by default one worker at a time delivers them, "
                "docs/webhooks.md)");
  cmd->add_option("--min-free-gb", a->min_free_gb,
                  "claim no new jobs while the Kestrel home's filesystem has less free space, GB (0 = off; "
                  "default: KESTREL_MIN_FREE_GB, else 1; docs/disk.md)");
  cmd->add_option("--usage-s", a->usage_s,
                  "sample each running trainer's CPU %, RSS and GPU every this many seconds as metric events "
                  "(0 = off; default: KESTREL_USAGE_S, else 5; docs/jobs.md \"System usage\")");
  const CLI::Validator seconds = NumberArg(0, kMaxSeconds);
  cmd->add_option("--heartbeat-s", a->heartbeat_s, "lease renewal interval, seconds")
      ->capture_default_str()
      ->check(seconds);
  cmd->add_option("--hang-timeout-s", a->hang_timeout_s, "no progress for this long -> hung")
      ->capture_default_str()
      ->check(seconds);
  cmd->add_option("--lease-s", a->lease_s, "lease length, seconds")->capture_default_str()->check(seconds);
  cmd->add_option("--grace-s", a->grace_s, "SIGTERM -> SIGKILL, seconds")
      ->capture_default_str()
      ->check(seconds);
  cmd->add_option("--poll-s", a->poll_s, "idle claim polling interval, seconds")
      ->capture_default_str()
      ->check(seconds);
  cmd->callback(Callback(ctx, exit_code, [&ctx, a]() -> CommandResult {
#ifndef KESTREL_WITH_TORCH
    return Status::FailedPrecondition(
        "this kestrel was built without LibTorch and cannot train; run `kestrel worker` from a build with "
        "it");
#endif
    jobs::WorkerOptions o;
    o.host = a->host.empty() ? HostName() : a->host;
    o.quarantine_after = a->quarantine_after;
    o.id = a->id.empty() ? o.host + ":" + std::to_string(::getpid()) : a->id;
    o.home = std::filesystem::absolute(ctx.home).string();
    o.child_command = {AttemptProgram(), "--home", o.home, "--log-level", ctx.log_level};
    // The attempts (kestrel-torch, started directly) inherit this process's
    // environment: OpenMP's wait policy for them (core/thread_policy.h).
    ApplyOpenMpEnvDefaults();
    o.kinds = app::WorkerKinds(app::JobKinds(), Env::Default());  // the child's command word and the gate
    o.slots = a->slots;
    for (double v : {a->heartbeat_s, a->hang_timeout_s, a->lease_s, a->poll_s}) {
      if (!(v > 0) || !(v <= kMaxSeconds))
        return Usage("", "--heartbeat-s, --hang-timeout-s, --lease-s and --poll-s must be in (0, 1e9]");
    }
    if (!(a->grace_s >= 0) || !(a->grace_s <= kMaxSeconds))
      return Usage("grace-s", "--grace-s must be in [0, 1e9]");
    o.supervisor.heartbeat_ms = SecondsToMs(a->heartbeat_s);
    o.supervisor.hang_timeout_ms = SecondsToMs(a->hang_timeout_s);
    o.supervisor.grace_ms = SecondsToMs(a->grace_s);
    o.supervisor.poll_ms = std::min<int64_t>(100, std::max<int64_t>(1, SecondsToMs(a->poll_s)));
    o.lease_ms = SecondsToMs(a->lease_s);
    o.poll_ms = std::max<int64_t>(1, SecondsToMs(a->poll_s));
    o.max_jobs = a->max_jobs;
    o.exit_when_idle = a->exit_when_idle;
    o.on_job_succeeded = JobModelRegistrar(o.home);  // what its kind registers (train: its model)
    o.on_job_succeeded = WithCheckpointRetention(std::move(o.on_job_succeeded), o.home);  // then keep_ckpts
    KESTREL_ASSIGN_OR_RETURN(o.min_free_bytes, a->min_free_gb.empty()
                                                   ? jobs::MinFreeBytesFromEnv()
                                                   : jobs::ParseMinFreeGb(a->min_free_gb, "command line"));
    KESTREL_ASSIGN_OR_RETURN(o.usage_sample_ms, a->usage_s.empty()
                                                    ? jobs::UsageSampleMsFromEnv()
                                                    : jobs::ParseUsageSeconds(a->usage_s, "command line"));
    // A home others may read (made by an older kestrel, or by hand): said, not changed.
    for (const auto& line : store::HomeModeWarnings(o.home))
      std::cerr << "kestrel worker: " << line << std::endl;
    o.webhooks = !a->no_webhooks;  // the worker runs the dispatcher and drains it on exit
    o.wall_anchor_ms = Env::Default().UnixMillis();
    if (!a->devices.empty()) {
      KESTREL_ASSIGN_OR_RETURN(o.devices, jobs::ParseDevices(a->devices));
    }
    if (!a->cpus.empty()) {
      auto cpus = ParseCpuList(a->cpus);
      if (!cpus.IsOk()) return Usage("cpus", "--cpus: " + cpus.GetStatus().Message());
      const std::vector<int> allowed = ProcessCpuBudget().affinity;
      for (int c : *cpus) {
        if (std::find(allowed.begin(), allowed.end(), c) == allowed.end())
          return Usage("cpus", "--cpus: CPU " + std::to_string(c) + " is not one this process may use (" +
                                   FormatCpuList(allowed) + ")");
      }
      o.cpus = std::move(*cpus);
    }
    o.pin_cpus = !a->no_pin;
    // The environment fingerprint (app/fingerprint.h) and the doctor's
    // checks (app/doctor.h): the LibTorch half answers for its libraries and
    // runs the forward and backward pass on this worker's devices; when it
    // cannot even start, or a check fails, that is the preflight's finding
    // (an environment failure of the host) and the worker claims nothing.
    // Low disk is left to the worker's watermark (it pauses claims instead).
    std::string torch_error;
    const std::string selftest = a->skip_doctor ? "" : (a->devices.empty() ? "cpu" : a->devices);
    const nlohmann::json torch = RunTorchFingerprint(o.child_command[0], selftest, &torch_error);
    const nlohmann::json fingerprint = app::MergeFingerprint(
        app::HostFingerprint(), torch.is_object() ? torch["fingerprint"] : nlohmann::json(), torch_error);
    o.fingerprint_json = fingerprint.dump();
    o.fingerprint_hash = app::FingerprintHash(fingerprint);
    if (a->skip_doctor) {
      o.preflight = [torch_error]() -> Status {
        if (torch_error.empty()) return {};
        return Status::FailedPrecondition(torch_error);
      };
    } else {
      app::DoctorOptions doctor;
      doctor.host = o.host;
      doctor.home = o.home;
      doctor.min_free_bytes = o.min_free_bytes;
      app::DoctorProbes probes = HostDoctorProbes(o.home);
      probes.torch_program = o.child_command[0];
      probes.torch = torch;
      probes.torch_error = torch_error;
      o.preflight = [doctor, probes]() -> Status {
        // A database or S3 outage is not this host's: the worker rides it out.
        return app::DoctorStatus(app::RunDoctor(doctor, probes, Env::Default()), {"disk"}, false);
      };
    }
    KESTREL_RETURN_IF_ERROR(jobs::ValidateWorkerOptions(o));
    const std::string url = store::MetadataUrl(ctx.home);
    // Fail fast on a store that cannot be opened at all (wrong URL, bad
    // permissions); once running, the worker rides out outages.
    KESTREL_RETURN_IF_ERROR(store::MetadataStore::Open(url).GetStatus());
    struct sigaction sa {};
    sa.sa_handler = OnWorkerStop;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGTERM, &sa, nullptr);
    sigaction(SIGINT, &sa, nullptr);
    signal(SIGPIPE, SIG_IGN);
    jobs::PosixProcessRunner runner;
    jobs::Worker worker([url] { return store::MetadataStore::Open(url); }, runner, Env::Default(), o);
    KESTREL_RETURN_IF_ERROR(worker.Run(g_worker_stop));
    auto c = worker.Counters();
    std::ostringstream text;
    text << "worker " << o.id << ": " << c.claimed << " attempts, " << c.succeeded << " succeeded, "
         << c.failed << " failed, " << c.fenced << " fenced, " << c.stopped << " handed back, "
         << c.store_errors << " store errors";
    return Output{text.str(),
                  {{"ok", true},
                   {"worker", o.id},
                   {"claimed", c.claimed},
                   {"succeeded", c.succeeded},
                   {"failed", c.failed},
                   {"fenced", c.fenced},
                   {"stopped", c.stopped},
                   {"store_errors", c.store_errors}}};
  }));
}

// ---- jobs list|show|logs|cancel|retry

void AddJobs(CLI::App& app, Context& ctx, int* exit_code) {
  CLI::App* jobs = app.add_subcommand("jobs", "List, inspect, cancel and retry jobs");
  jobs->require_subcommand(1);

  auto lr = std::make_shared<app::JobListRequest>();
  CLI::App* list = jobs->add_subcommand(
      "list", "Jobs, newest first: filter, sort and page them (docs/server.md \"Job list\")");
  list->add_option("--state", lr->state,
                   "only these states, comma-separated (queued, running, succeeded, failed_retryable, "
                   "failed_permanent, cancelled)");
  list->add_option("--kind", lr->kind, "only this kind: " + KindList());
  list->add_option("--priority", lr->priority, "only these priorities, comma-separated (high, normal, low)");
  list->add_option("--dataset", lr->dataset, "only jobs on this dataset: NAME (any version) or NAME@VERSION");
  list->add_option("--search", lr->search, "only jobs whose name, a tag or the note contains this text");
  list->add_option("--sort", lr->sort, "created (default), priority or state");
  list->add_option("--order", lr->order,
                   "asc or desc (default: desc for created and priority, asc for state)");
  list->add_option("--before", lr->before,
                   "a job id: list the jobs after it in this order (a page's next_cursor)")
      ->check(IntArg(1));
  list->add_option("--offset", lr->offset, "skip this many")->check(IntArg(0));
  list->add_option("--limit", lr->limit, "at most this many")
      ->capture_default_str()
      ->check(IntArg(1, 1000000000));
  list->callback(Callback(ctx, exit_code, [&ctx, lr]() -> CommandResult {
    const app::JobListRequest& req = *lr;
    if (auto f = app::JobListFilter(req); !f.IsOk()) return OnCommandLine(f.GetStatus());
    KESTREL_ASSIGN_OR_RETURN(Stores stores, OpenStores(ctx));
    auto page = app::ListJobPage(*stores.meta, req);
    if (!page.IsOk()) return OnCommandLine(page.GetStatus());
    const std::vector<store::JobRecord>* list = &page->jobs;
    // DATASET: "birds v3" as the registry names it (the version id's first
    // 12 characters when the registry has no such version, "-" for none).
    std::vector<std::string> datasets;
    size_t dataset_w = 9;
    for (size_t i = 0; i < list->size(); ++i) {
      const std::string& id = (*list)[i].spec.dataset_version;
      const app::JobDatasetName& d = page->datasets[i];
      datasets.push_back(!d.name.empty() ? d.name + " v" + std::to_string(d.seq)
                         : id.empty()    ? std::string("-")
                                         : id.substr(0, 12));
      dataset_w = std::max(dataset_w, datasets.back().size() + 2);
    }
    std::ostringstream t;
    t << std::left << std::setw(6) << "ID" << std::setw(18) << "STATE" << std::setw(8) << "ATTEMPT"
      << std::setw(8) << "PRIO" << std::setw(static_cast<int>(dataset_w)) << "DATASET" << std::setw(9)
      << "RETRIES" << std::setw(21) << "CREATED" << std::setw(24) << "LAST REASON"
      << "NAME\n";
    for (size_t i = 0; i < list->size(); ++i) {
      const store::JobRecord& j = (*list)[i];
      t << std::left << std::setw(6) << j.id << std::setw(18) << store::JobStateName(j.state) << std::setw(8)
        << j.attempt << std::setw(8) << store::JobPriorityName(j.spec.priority)
        << std::setw(static_cast<int>(dataset_w)) << datasets[i] << std::setw(9)
        << (std::to_string(j.retries_used) + "+" + std::to_string(j.infra_retries_used)) << std::setw(21)
        << FormatMs(j.created_ms) << std::setw(24) << j.last_reason << j.spec.name;
      for (size_t k = 0; k < j.tags.size(); ++k) t << (k ? " " : " [") << j.tags[k];
      t << (j.tags.empty() ? "\n" : "]\n");
    }
    if (list->empty()) t.str("no jobs\n");
    if (page->next_cursor > 0)
      t << list->size() << " of " << page->total << " jobs; next page: --before " << page->next_cursor
        << "\n";
    return Output{t.str(), app::JobPageJson(*page)};
  }));

  auto show_id = std::make_shared<std::string>();
  CLI::App* show = jobs->add_subcommand("show", "A job and its attempts");
  show->add_option("id", *show_id, "job id")->required();
  show->callback(Callback(ctx, exit_code, [&ctx, show_id]() -> CommandResult {
    KESTREL_ASSIGN_OR_RETURN(const int64_t id, ParseJobId(*show_id));
    KESTREL_ASSIGN_OR_RETURN(Stores stores, OpenStores(ctx));
    KESTREL_ASSIGN_OR_RETURN(const app::JobDetail detail, app::ShowJob(*stores.meta, id));
    const store::JobRecord* job = &detail.job;
    std::ostringstream t;
    t << "job " << job->id << ": " << store::JobStateName(job->state) << ", attempt " << job->attempt
      << ", priority " << store::JobPriorityName(job->spec.priority) << ", retries " << job->retries_used
      << "/" << job->spec.retry.max_retries << " (+" << job->infra_retries_used << " infra)\n";
    t << "created " << FormatMs(job->created_ms) << ", finished " << FormatMs(job->finished_ms) << "\n";
    if (!job->last_reason.empty()) t << "last reason: " << job->last_reason << "\n";
    if (!job->result_json.empty()) t << "result: " << job->result_json << "\n";
    for (const auto& a : detail.attempts) {
      t << "  attempt " << a.attempt << " on " << a.worker << " pid " << a.pid
        << (a.fingerprint.empty() ? "" : " env " + a.fingerprint) << ": ";
      if (a.ended_ms == 0) {
        t << "running since " << FormatMs(a.started_ms) << "\n";
      } else if (a.succeeded) {
        t << "succeeded\n";
      } else {
        t << a.reason << " (" << store::FailureClassName(a.failure_class)
          << (a.infrastructure ? ", infra" : "") << ", stage " << store::FailureStageName(a.stage)
          << ", exit " << a.exit_code << ", signal " << a.signal << ")"
          << (a.message.empty() ? "" : ": " + a.message) << "\n";
        if (a.detected_ms > a.ended_ms) {
          // A lost attempt: it ended (last lease renewal) before anyone could know.
          t << "    ended " << FormatMs(a.ended_ms) << ", detected " << FormatMs(a.detected_ms)
            << " (lease expiry)\n";
        }
      }
    }
    return Output{t.str(), app::JobDetailJson(detail)};
  }));

  auto env_a = std::make_shared<std::string>(), env_b = std::make_shared<std::string>();
  CLI::App* diff_env = jobs->add_subcommand(
      "diff-env",
      "What differs between the environments two attempts ran in (docs/jobs.md \"Environment fingerprint\")");
  diff_env->add_option("a", *env_a, "JOB (its last attempt) or JOB:ATTEMPT")->required();
  diff_env->add_option("b", *env_b, "JOB or JOB:ATTEMPT")->required();
  diff_env->callback(Callback(ctx, exit_code, [&ctx, env_a, env_b]() -> CommandResult {
    KESTREL_ASSIGN_OR_RETURN(Stores stores, OpenStores(ctx));
    auto d = app::DiffAttemptEnvironments(*stores.meta, *env_a, *env_b);
    if (!d.IsOk()) return d.GetStatus();
    std::ostringstream t;
    auto side = [](const nlohmann::json& s) {
      return "job " + std::to_string(s["job"].get<int64_t>()) + " attempt " +
             std::to_string(s["attempt"].get<int64_t>()) + " on " + s["host"].get<std::string>() + " (env " +
             s["fingerprint"].get<std::string>() + ")";
    };
    t << "A: " << side((*d)["a"]) << "\nB: " << side((*d)["b"]);
    if ((*d)["differences"].empty()) t << "\nsame environment";
    for (const auto& x : (*d)["differences"])
      t << "\n  " << x["field"].get<std::string>() << ": " << x["a"].dump() << " -> " << x["b"].dump();
    return Output{t.str(), *d};
  }));

  auto logs_id = std::make_shared<std::string>();
  auto logs_attempt = std::make_shared<int64_t>(0);
  CLI::App* logs = jobs->add_subcommand("logs", "Print an attempt's log (default: the latest)");
  logs->add_option("id", *logs_id, "job id")->required();
  logs->add_option("--attempt", *logs_attempt, "attempt number")->check(IntArg(1));
  logs->callback(Callback(ctx, exit_code, [&ctx, logs_id, logs_attempt]() -> CommandResult {
    KESTREL_ASSIGN_OR_RETURN(const int64_t id, ParseJobId(*logs_id));
    KESTREL_ASSIGN_OR_RETURN(Stores stores, OpenStores(ctx));
    KESTREL_ASSIGN_OR_RETURN(const store::JobRecord job, stores.meta->GetJob(id));
    int64_t n = *logs_attempt > 0 ? *logs_attempt : job.attempt;
    if (n <= 0 || n > job.attempt)
      return Status::NotFound("job " + std::to_string(id) + " has no attempt " + std::to_string(n));
    const std::string path = JoinPath(JoinPath(JoinPath(ctx.home, "jobs"), std::to_string(id)),
                                      "attempt-" + std::to_string(n) + ".log");
    KESTREL_ASSIGN_OR_RETURN(std::string text, Env::Default().ReadFile(path));
    nlohmann::json doc = {{"job_id", id}, {"attempt", n}, {"path", path}, {"log", text}};
    return Output{std::move(text), std::move(doc)};
  }));

  auto cancel_id = std::make_shared<std::string>();
  CLI::App* cancel =
      jobs->add_subcommand("cancel", "Cancel a job (a running attempt is stopped by its worker)");
  cancel->add_option("id", *cancel_id, "job id")->required();
  auto retry_id = std::make_shared<std::string>();
  CLI::App* retry =
      jobs->add_subcommand("retry", "Requeue a failed or cancelled job with a fresh retry budget");
  retry->add_option("id", *retry_id, "job id")->required();
  auto change = [&ctx](const std::string& raw, bool is_cancel) -> CommandResult {
    KESTREL_ASSIGN_OR_RETURN(const int64_t id, ParseJobId(raw));
    KESTREL_ASSIGN_OR_RETURN(Stores stores, OpenStores(ctx));
    KESTREL_ASSIGN_OR_RETURN(const store::JobRecord job,
                             is_cancel ? app::CancelJob(*stores.meta, id, Env::Default().UnixMillis())
                                       : app::RetryJob(*stores.meta, id, Env::Default().UnixMillis()));
    return Output{"job " + std::to_string(job.id) + ": " + store::JobStateName(job.state),
                  {{"ok", true}, {"job", app::JobJson(job, false)}}};
  };
  cancel->callback(Callback(ctx, exit_code, [change, cancel_id] { return change(*cancel_id, true); }));
  retry->callback(Callback(ctx, exit_code, [change, retry_id] { return change(*retry_id, false); }));
  AddJobSamplesCommand(*jobs, ctx, exit_code);
  AddJobLabelCommands(*jobs, ctx, exit_code);
}

// ---- stats, breaker

void AddStats(CLI::App& app, Context& ctx, int* exit_code) {
  CLI::App* stats =
      app.add_subcommand("stats", "Job availability, failures, retries, MTTR and the circuit breaker");
  stats->callback(Callback(ctx, exit_code, [&ctx]() -> CommandResult {
    KESTREL_ASSIGN_OR_RETURN(Stores stores, OpenStores(ctx));
    KESTREL_ASSIGN_OR_RETURN(const app::StatsReport report, app::JobStatsReport(*stores.meta, ctx.home));
    const store::JobStats& s = report.jobs;
    const int64_t min_free = report.min_free_bytes;
    std::ostringstream t;
    t << "jobs " << s.jobs << ": " << s.succeeded << " succeeded, " << s.failed_permanent << " failed, "
      << s.cancelled << " cancelled, " << s.live << " live\n";
    t << "availability " << std::fixed << std::setprecision(1) << s.availability * 100
      << "% (succeeded / finished)\n";
    t << "attempts " << s.attempts << ", failed " << s.failed_attempts << "; retries " << s.retries << " + "
      << s.infra_retries << " infra\n";
    auto line = [&t](const char* what, const std::map<std::string, int64_t>& m) {
      if (m.empty()) return;
      t << "failures by " << what << ":";
      for (const auto& [k, v] : m) t << " " << k << "=" << v;
      t << "\n";
    };
    line("stage", s.failures_by_stage);
    line("class", s.failures_by_class);
    line("reason", s.failures_by_reason);
    t << "mean time to recovery " << std::setprecision(1) << s.mean_time_to_recovery_ms / 1000.0 << " s over "
      << s.recovered_jobs << " recovered jobs (failure -> success)\n";
    t << "mean time to restart " << s.mean_time_to_restart_ms / 1000.0 << " s over " << s.restarted_attempts
      << " restarts (failure detected -> next attempt started)\n";
    t << "circuit breaker: "
      << (report.breaker_open ? "OPEN, " + report.breaker_reason : std::string("closed"));
    const nlohmann::json& d = report.disk;
    t << "\ndisk: "
      << (d["free_bytes"].is_number() ? std::to_string(d["free_bytes"].get<int64_t>() / 1'000'000) : "?")
      << " MB free on the filesystem of " << ctx.home << " (watermark " << min_free / 1'000'000 << " MB"
      << (min_free > 0 ? "" : ", off") << ")"
      << (d["low"].get<bool>() ? ": LOW, workers claim no new jobs" : "");
    for (const auto& w : d["paused_workers"]) {
      t << "\nworker " << w["worker"].get<std::string>()
        << " is not claiming (low disk: " << w["free_bytes"].get<int64_t>() / 1'000'000 << " MB free)";
    }
    for (const auto& h : report.quarantined_hosts) {
      t << "\nhost " << h.host << " is QUARANTINED (kestrel workers unquarantine " << h.host
        << "): " << h.quarantine_reason;
    }
    return Output{t.str(), app::StatsJson(report)};
  }));

  CLI::App* breaker = app.add_subcommand("breaker", "The circuit breaker that pauses automatic retries");
  breaker->require_subcommand(1);
  CLI::App* show =
      breaker->add_subcommand("show", "The breaker's state, reason, counts and since when (docs/jobs.md)");
  show->callback(Callback(ctx, exit_code, [&ctx]() -> CommandResult {
    KESTREL_ASSIGN_OR_RETURN(Stores stores, OpenStores(ctx));
    auto b = app::ReadBreaker(*stores.meta);
    if (!b.IsOk()) return b.GetStatus();
    std::ostringstream t;
    t << "circuit breaker: " << (b->open ? "OPEN, " + b->reason : std::string("closed")) << "\n";
    t << "window: " << b->failed << " retryable failures in the last " << b->counted
      << " finished attempts (opens above " << std::fixed << std::setprecision(0)
      << b->options.threshold * 100 << "% of at least " << b->options.min_attempts << " of the last "
      << b->options.window << ")";
    for (const auto& [reason, n] : b->failed_by_reason) t << "\n  " << reason << ": " << n;
    t << "\nsince: " << (b->since_ms > 0 ? FormatMs(b->since_ms) : std::string("(no change on record)"));
    t << "\nlast reset: " << (b->reset_ms > 0 ? FormatMs(b->reset_ms) : std::string("never"));
    return Output{t.str(), app::BreakerJson(*b)};
  }));
  CLI::App* reset =
      breaker->add_subcommand("reset", "Close the breaker for every worker (ignores earlier failures)");
  reset->callback(Callback(ctx, exit_code, [&ctx]() -> CommandResult {
    KESTREL_ASSIGN_OR_RETURN(Stores stores, OpenStores(ctx));
    auto b = app::ResetBreaker(*stores.meta, Env::Default().UnixMillis());
    if (!b.IsOk()) return b.GetStatus();
    return Output{app::kBreakerResetMessage, app::BreakerResetJson(*b)};
  }));
}

// ---- workers

std::string DevicesText(const nlohmann::json& devices) {
  std::string out;
  for (const auto& d : devices) {
    if (!out.empty()) out += ",";
    out += d.value("kind", std::string("?")) + "#" + std::to_string(d.value("index", 0));
    if (d.contains("memory_mb")) out += "(" + std::to_string(d.value("memory_mb", int64_t{0})) + " MB)";
  }
  return out.empty() ? "-" : out;
}

void AddWorkers(CLI::App& app, Context& ctx, int* exit_code) {
  CLI::App* cmd = app.add_subcommand(
      "workers",
      "Registered workers: devices, running jobs, heartbeat age, busy/idle/stale/stopped (docs/jobs.md)");
  // drain|undrain|unquarantine (docs/jobs.md "Quarantine and drain").
  auto target = std::make_shared<std::string>();
  auto add_control = [&](const char* name, const char* help, const char* what) {
    CLI::App* sub = cmd->add_subcommand(name, help);
    sub->add_option("target", *target, what)->required();
    return sub;
  };
  CLI::App* drain = add_control("drain",
                                "A worker (ID) or every worker of a HOST finishes its running jobs, claims "
                                "nothing more and exits 0",
                                "worker id or host");
  CLI::App* undrain =
      add_control("undrain", "Lift a drain: the worker or host claims again", "worker id or host");
  CLI::App* unquarantine =
      add_control("unquarantine",
                  "Let a quarantined HOST claim again (its environment failure count restarts at 0)", "host");
  for (CLI::App* sub : {drain, undrain}) {
    const bool on = sub == drain;
    sub->callback(Callback(ctx, exit_code, [&ctx, target, on]() -> CommandResult {
      KESTREL_ASSIGN_OR_RETURN(Stores stores, OpenStores(ctx));
      auto r = app::DrainWorkers(*stores.meta, *target, on, Env::Default().UnixMillis());
      if (!r.IsOk()) return r.GetStatus();
      std::string ids;
      for (const auto& id : (*r)["workers"]) ids += (ids.empty() ? "" : ", ") + id.get<std::string>();
      return Output{std::string(on ? "draining " : "undrained ") + *target +
                        (ids.empty() ? " (no worker registered now)" : " (workers: " + ids + ")"),
                    *r};
    }));
  }
  unquarantine->callback(Callback(ctx, exit_code, [&ctx, target]() -> CommandResult {
    KESTREL_ASSIGN_OR_RETURN(Stores stores, OpenStores(ctx));
    auto r = app::UnquarantineHost(*stores.meta, *target, Env::Default().UnixMillis());
    if (!r.IsOk()) return r.GetStatus();
    return Output{"host " + *target + " is no longer quarantined; its workers claim again", *r};
  }));
  // CLI11 runs this after a subcommand's callback: only the bare `workers`
  // lists (a subcommand's exit code and document stand).
  auto list = Callback(ctx, exit_code, [&ctx]() -> CommandResult {
    KESTREL_ASSIGN_OR_RETURN(Stores stores, OpenStores(ctx));
    auto r = app::ListWorkerStatus(*stores.meta, Env::Default().UnixMillis());
    if (!r.IsOk()) return r.GetStatus();
    const nlohmann::json doc = app::WorkersJson(*r);
    std::ostringstream t;
    if (r->workers.empty()) t << "no workers registered (kestrel worker, kestrel serve --workers N)";
    for (const auto& w : doc["workers"]) {
      if (t.tellp() > 0) t << "\n";
      t << w["id"].get<std::string>() << "  " << w["state"].get<std::string>() << "  heartbeat " << std::fixed
        << std::setprecision(1) << w["heartbeat_age_ms"].get<int64_t>() / 1000.0 << " s ago  "
        << DevicesText(w["devices"]);
      if (w["draining"].get<bool>()) t << "  DRAINING";
      if (w["quarantined"].get<bool>()) t << "  QUARANTINED: " << w["quarantine_reason"].get<std::string>();
      for (const auto& j : w["jobs"]) {
        t << "\n  job " << j["id"].get<int64_t>() << " (" << j["kind"].get<std::string>() << ", attempt "
          << j["attempt"].get<int64_t>();
        if (j["attempt_pid"].is_number()) t << ", pid " << j["attempt_pid"].get<int64_t>();
        t << ")";
        // Its latest usage sample (docs/jobs.md "System usage").
        if (!w["usage"].is_object()) continue;
        for (const auto& u : w["usage"].value("jobs", nlohmann::json::array())) {
          if (u.value("job", int64_t{0}) != j["id"].get<int64_t>() ||
              u.value("attempt", int64_t{0}) != j["attempt"].get<int64_t>())
            continue;
          t << "  cpu " << u.value("cpu_percent", 0.0) << " %, rss " << u.value("rss_mb", 0.0) << " MB";
          if (u.contains("gpu_util")) t << ", gpu " << u.value("gpu_util", 0.0) << " %";
          if (u.contains("gpu_mem_mb")) t << ", gpu mem " << u.value("gpu_mem_mb", 0.0) << " MB";
        }
      }
    }
    for (const auto& h : doc["hosts"]) {
      if (!h["quarantined"].get<bool>() && !h["draining"].get<bool>()) continue;
      t << "\nhost " << h["host"].get<std::string>();
      if (h["quarantined"].get<bool>())
        t << " QUARANTINED (kestrel workers unquarantine " << h["host"].get<std::string>()
          << "): " << h["quarantine_reason"].get<std::string>();
      if (h["draining"].get<bool>()) t << " DRAINING";
    }
    return Output{t.str(), doc};
  });
  cmd->callback([list, cmd]() {
    if (cmd->get_subcommands().empty()) list();
  });
}

}  // namespace

void AddJobCommands(CLI::App& app, Context& ctx, int* exit_code) {
  AddSubmit(app, ctx, exit_code);
  AddWorker(app, ctx, exit_code);
  AddJobs(app, ctx, exit_code);
  AddStats(app, ctx, exit_code);
  AddWorkers(app, ctx, exit_code);
}

}  // namespace kestrel::cli
