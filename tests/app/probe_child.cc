// The child program of the probe kind's end-to-end test: a program that can
// run probe attempts adds the row with its runner to its table and hands its
// command line (`--home H probe --job ID --attempt N`) to the one attempt
// command every kind shares (cli/job_child.h), as kestrel-torch does for
// train, val and export.
#include <iostream>

#include "cli/job_child.h"
#include "probe_kind.h"
#include "store/artifact_store.h"

int main(int argc, char** argv) {
  using namespace kestrel;
  Status added = app::JobKinds().Add(app::probe::ProbeKind(/*with_runner=*/true));
  if (!added.IsOk()) {
    std::cerr << added.ToString() << std::endl;
    return 1;
  }
  cli::Context ctx;
  ctx.home = store::KestrelHome();
  for (int i = 1; i < argc; ++i) {
    if (std::string(argv[i]) == "--json") ctx.json = true;
  }
  return cli::RunJobAttemptCommand(ctx, argc, argv);
}
