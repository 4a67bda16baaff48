// travel_trainer: Kestrel's trainer end to end in a program that travels to
// the GPU machine (docs/gpu.md "The travelling trainer"). The `kestrel`
// programs link the whole platform (server, jobs, export, S3 client,
// libarchive, OpenCV's imgcodecs with GDAL): their runtime libraries alone
// are the device tool's 64 MiB. This program links only the trainer's own
// modules (train, model, data, eval, store, core) and the same calls the
// CLI makes, so the torch-only build (cmake/torch_only.cmake with
// KESTREL_TRAVEL_TRAINER=ON) builds it against the CUDA LibTorch there:
//
//   travel_trainer synth DIR [images=N classes=N imgsz=N ... seed=N]
//       data::WriteSynthDataset, the generator of `kestrel dataset synth`
//   travel_trainer import DIR NAME [format= val_ratio= seed= ...]
//       data::AnalyzeDataset + data::CommitVersion into $KESTREL_HOME,
//       refused when the analysis found errors (as `kestrel dataset import`)
//   travel_trainer train KEY=VALUE...
//       train::Train with every key of `kestrel train` (train/train_config.h),
//       the same command-line checks, SIGTERM/SIGINT = stop after the step
//       with weights/last.ckpt written (exit 8), resume=PATH|true
//
// Exit codes are `kestrel train`'s (core/failure.h): 0, 4 diverged, 8
// stopped; 1 on an error, 2 on a usage error. Built in the full build too,
// where tests/cli's TravelTrainerCliTest runs it, so it cannot rot.
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <iostream>
#include <string>
#include <vector>

#include "core/options.h"
#include "core/status.h"
#include "data/analyze.h"
#include "data/image.h"
#include "data/synth.h"
#include "data/version.h"
#include "data/version_files.h"
#include "store/artifact_store.h"
#include "store/metadata_store.h"
#include "train/trainer.h"

namespace {

using kestrel::Result;
using kestrel::Status;
namespace data = kestrel::data;
namespace store = kestrel::store;
namespace train = kestrel::train;

constexpr int kExitUsage = 2;

std::atomic<bool> g_stop{false};
extern "C" void OnStop(int /*sig*/) { g_stop.store(true); }

int Fail(const char* what, const Status& s, int code = 1) {
  std::fprintf(stderr, "travel_trainer %s: %s\n", what, s.ToString().c_str());
  return code;
}

int Synth(const std::string& dir, const std::vector<std::string>& args) {
  data::SynthOptions o;
  kestrel::OptionSet set;
  o.Bind(set);
  int64_t seed = 0;
  set.Int("seed", &seed, "generator seed", 0);
  if (Status s = set.ApplyArgs(args); !s.IsOk()) return Fail("synth", s, kExitUsage);
  o.seed = static_cast<uint64_t>(seed);
  if (Status s = o.Validate(); !s.IsOk()) return Fail("synth", s, kExitUsage);
  if (Status s = data::WriteSynthDataset(o, dir); !s.IsOk()) return Fail("synth", s);
  std::printf("synth: %d images, %d classes at %d px in %s\n", o.images, o.classes, o.imgsz, dir.c_str());
  return 0;
}

int Import(const std::string& dir, const std::string& name, const std::vector<std::string>& args) {
  data::ImportOptions o;
  kestrel::OptionSet set;
  o.Bind(set);
  if (Status s = set.ApplyArgs(args); !s.IsOk()) return Fail("import", s, kExitUsage);
  const std::string home = store::KestrelHome();
  Result<std::unique_ptr<store::MetadataStore>> meta = store::MetadataStore::Open(store::MetadataUrl(home));
  if (!meta.IsOk()) return Fail("import", meta.GetStatus());
  Result<std::unique_ptr<store::ArtifactStore>> blobs = store::OpenArtifactStore(home);
  if (!blobs.IsOk()) return Fail("import", blobs.GetStatus());
  Result<data::Analysis> a = data::AnalyzeDataset(dir, o);
  if (!a.IsOk()) return Fail("import", a.GetStatus());
  if (a->report.Count(data::Severity::kError) > 0 && !o.allow_errors) {
    std::fprintf(stderr, "%s", a->report.ToText().c_str());
    return Fail("import",
                Status::InvalidArgument(dir + ": the analysis found " +
                                        std::to_string(a->report.Count(data::Severity::kError)) +
                                        " errors; nothing stored (allow_errors=true imports the rest)"));
  }
  Result<data::CommittedVersion> v = data::CommitVersion(**meta, **blobs, name, dir, *a, o);
  if (!v.IsOk()) return Fail("import", v.GetStatus());
  std::printf("import: %s, %zu images, into %s\n", data::VersionName(v->record).c_str(),
              a->manifest.entries.size(), home.c_str());
  return 0;
}

int Train(const std::vector<std::string>& args) {
  train::TrainOptions o;
  kestrel::OptionSet set;
  o.Bind(set);
  if (Status s = set.ApplyArgs(args); !s.IsOk()) return Fail("train", s, kExitUsage);
  Result<std::string> resume = train::ResolveResume(o.resume, o.project);
  if (!resume.IsOk()) return Fail("train", resume.GetStatus(), kExitUsage);
  o.resume = *resume;
  // The checks `kestrel train` makes before it starts.
  if (Status s = train::CheckBeforeStart(o); !s.IsOk()) return Fail("train", s, kExitUsage);
  o.home = store::KestrelHome();
  struct sigaction sa {};
  sa.sa_handler = OnStop;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGTERM, &sa, nullptr);
  sigaction(SIGINT, &sa, nullptr);
  train::TrainHooks hooks;
  hooks.stop = &g_stop;
  hooks.out = &std::cout;
  hooks.tty = isatty(STDOUT_FILENO) != 0;
  Result<train::TrainSummary> r = train::Train(o, hooks);
  if (!r.IsOk()) return Fail("train", r.GetStatus());
  const train::TrainSummary& sum = *r;
  std::cout << "\nrun " << train::ExitReasonName(sum.reason)
            << (sum.message.empty() ? "" : ": " + sum.message) << "\n  run_dir " << sum.run_dir
            << "\n  device " << sum.device << (sum.amp ? " (amp)" : "") << ", batch " << sum.batch << ", "
            << sum.iterations << " iterations, " << sum.images_per_second << " images/s\n  epochs "
            << sum.epochs_completed;
  if (sum.validated && sum.best_epoch > 0) {
    std::cout << ", best epoch " << sum.best_epoch << " mAP50 " << sum.best_map50 << " mAP50-95 "
              << sum.best_map5095;
  } else if (!sum.validated) {
    std::cout << ", not validated (" << sum.not_validated << ")";
  }
  std::cout << std::endl;
  return sum.ExitCode();
}

int Usage() {
  std::fprintf(stderr,
               "usage: travel_trainer synth DIR [images=N classes=N imgsz=N ... seed=N]\n"
               "       travel_trainer import DIR NAME [format= val_ratio= seed= ...]   (into $KESTREL_HOME)\n"
               "       travel_trainer train KEY=VALUE...   (the keys of `kestrel train`)\n");
  return kExitUsage;
}

}  // namespace

int main(int argc, char** argv) {
  kestrel::data::QuietImageCodecLogs();
  std::vector<std::string> args(argv + 1, argv + argc);
  if (args.empty()) return Usage();
  const std::string cmd = args[0];
  if (cmd == "synth" && args.size() >= 2) return Synth(args[1], {args.begin() + 2, args.end()});
  if (cmd == "import" && args.size() >= 3) return Import(args[1], args[2], {args.begin() + 3, args.end()});
  if (cmd == "train") return Train({args.begin() + 1, args.end()});
  return Usage();
}
