// `kestrel doctor` (app/doctor.h; docs/jobs.md "Doctor") and what a starting
// `kestrel worker` shares with it: the LibTorch half's answer and this
// host's probes. Torch-free.
#pragma once

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>
#include <string>

#include "app/doctor.h"
#include "cli/cli.h"

namespace kestrel::cli {

// `kestrel doctor [--devices D] [--min-free-gb G] [--max-skew-s S]`: exit 0
// when every check passed, 1 when one failed; --json prints DoctorJson.
void AddDoctorCommand(CLI::App& app, Context& ctx, int* exit_code);

// `PROGRAM --json fingerprint [--selftest DEVICES]` (kestrel-torch,
// train_cmd.cc): its whole document ({"fingerprint", "selftest"}), or null
// with *error saying why it failed: the loader's own message when a library
// does not load, the signal (SIGILL: an instruction this CPU lacks) or the
// exit code. `selftest` "" asks for the fingerprint only.
nlohmann::json RunTorchFingerprint(const std::string& program, const std::string& selftest,
                                   std::string* error);

// The probes of this host for app::RunDoctor: the stores `home` uses (its
// metadata URL, KESTREL_ARTIFACTS), statvfs, PostgreSQL's clock (none for
// SQLite). The torch fields are left for the caller.
app::DoctorProbes HostDoctorProbes(const std::string& home);

}  // namespace kestrel::cli
