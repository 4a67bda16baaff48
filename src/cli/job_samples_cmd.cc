// `kestrel jobs samples ID [--epoch E]`: a training job's per-epoch
// prediction samples (app/job_media.h; docs/server.md "Epoch samples"),
// the views GET /api/jobs/{id}/samples[/{epoch}] return.
#include <iomanip>
#include <limits>
#include <memory>
#include <sstream>
#include <string>

#include "app/job_media.h"
#include "app/jobs.h"
#include "cli/cli.h"
#include "core/env.h"
#include "core/parse.h"

namespace kestrel::cli {

void AddJobSamplesCommand(CLI::App& jobs, Context& ctx, int* exit_code) {
  auto id_text = std::make_shared<std::string>();
  auto epoch = std::make_shared<int64_t>(0);
  CLI::App* cmd = jobs.add_subcommand(
      "samples",
      "A training job's per-epoch prediction samples: the epochs, or one epoch's images (--epoch)");
  cmd->add_option("id", *id_text, "job id")->required();
  cmd->add_option("--epoch", *epoch, "one epoch's sample images, labels and predictions")
      ->check(IntArg(1, 1'000'000));
  cmd->callback(Callback(ctx, exit_code, [&ctx, id_text, epoch]() -> CommandResult {
    KESTREL_ASSIGN_OR_RETURN(const int64_t id,
                             ParseInt64(*id_text, {"command line", 0, "id"}, 1,
                                        std::numeric_limits<int64_t>::max(), "a job id (a positive number)"));
    KESTREL_ASSIGN_OR_RETURN(Stores stores, OpenStores(ctx));
    app::JobMedia media(*stores.meta, Env::Default(), ctx.home);
    if (*epoch == 0) {
      auto list = media.Epochs(id);
      if (!list.IsOk()) return app::RelocateRequestError(list.GetStatus(), "command line");
      std::ostringstream t;
      if (list->epochs.empty()) t << "job " << id << " has no prediction samples\n";
      for (const auto& e : list->epochs) t << "epoch " << e.epoch << " (attempt " << e.attempt << ")\n";
      return Output{t.str(), app::JobSampleEpochsJson(*list)};
    }
    auto panel = media.Panel(id, *epoch);
    if (!panel.IsOk()) return app::RelocateRequestError(panel.GetStatus(), "command line");
    const nlohmann::json doc = app::JobSamplePanelJson(*panel);
    std::ostringstream t;
    t << "job " << id << " epoch " << panel->epoch << " (attempt " << panel->attempt << "), dataset "
      << doc["dataset"].dump() << " v" << doc["version"].dump() << ", score >= " << doc["conf"].dump()
      << "\n";
    const nlohmann::json& names = doc["names"];
    auto name = [&names](const nlohmann::json& cls) {
      return names.is_array() && cls.is_number_integer() && cls.get<int64_t>() >= 0 &&
                     cls.get<size_t>() < names.size() && names[cls.get<size_t>()].is_string()
                 ? names[cls.get<size_t>()].get<std::string>()
                 : cls.dump();
    };
    for (const auto& img : doc["images"]) {
      if (!img.is_object()) continue;
      t << img.value("path", std::string()) << " " << img.value("width", 0) << "x" << img.value("height", 0)
        << ": " << img.value("labels", nlohmann::json::array()).size() << " labels, "
        << img.value("detections", nlohmann::json::array()).size() << " detections\n";
      for (const auto& d : img.value("detections", nlohmann::json::array())) {
        if (!d.is_object()) continue;
        t << "  " << name(d.value("class_id", nlohmann::json())) << " " << std::fixed << std::setprecision(2)
          << d.value("score", 0.0) << " " << d.value("box", nlohmann::json::array()).dump() << "\n";
      }
    }
    return Output{t.str(), doc};
  }));
}

}  // namespace kestrel::cli
