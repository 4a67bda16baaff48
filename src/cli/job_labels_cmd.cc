// `kestrel jobs rename|tag|note`: a run's name, tags and note (issue 33,
// app/job_labels.h; docs/jobs.md "Names, tags and notes"), the same change
// POST /api/jobs/{id}/labels makes.
#include <limits>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "app/job_labels.h"
#include "app/jobs.h"
#include "cli/cli.h"
#include "core/env.h"
#include "core/parse.h"

namespace kestrel::cli {
namespace {

std::string LabelsText(const store::JobRecord& j) {
  std::ostringstream t;
  t << "job " << j.id << ": " << (j.spec.name.empty() ? "(no name)" : j.spec.name) << "\n";
  t << "tags:";
  if (j.tags.empty()) t << " (none)";
  for (const auto& tag : j.tags) t << " " << tag;
  t << "\n";
  if (!j.note.empty()) t << "note: " << j.note << "\n";
  return t.str();
}

}  // namespace

void AddJobLabelCommands(CLI::App& jobs, Context& ctx, int* exit_code) {
  // One request per command, filled by its options; the shared step below.
  auto run = [&ctx](const std::string& id_text, const app::JobLabelRequest& req) -> CommandResult {
    KESTREL_ASSIGN_OR_RETURN(const int64_t id,
                             ParseInt64(id_text, {"command line", 0, "id"}, 1,
                                        std::numeric_limits<int64_t>::max(), "a job id (a positive number)"));
    KESTREL_ASSIGN_OR_RETURN(Stores stores, OpenStores(ctx));
    auto job = app::LabelJob(*stores.meta, id, req);
    if (!job.IsOk()) return app::RelocateRequestError(job.GetStatus(), "command line");
    return Output{LabelsText(*job), {{"ok", true}, {"job", app::JobJson(*job, false)}}};
  };

  auto rename_id = std::make_shared<std::string>();
  auto rename_name = std::make_shared<std::string>();
  CLI::App* rename = jobs.add_subcommand("rename", "Give a job (a run) a name people call it by");
  rename->add_option("id", *rename_id, "job id")->required();
  rename->add_option("name", *rename_name, "the new name (1-120 bytes)")->required();
  rename->callback(Callback(ctx, exit_code, [run, rename_id, rename_name]() -> CommandResult {
    app::JobLabelRequest req;
    req.name = *rename_name;
    return run(*rename_id, req);
  }));

  auto tag_id = std::make_shared<std::string>();
  auto tag_list = std::make_shared<std::vector<std::string>>();
  auto tag_remove = std::make_shared<bool>(false);
  CLI::App* tag = jobs.add_subcommand(
      "tag", "Add tags to a job (or remove them with --remove); with no tags, print the job's tags");
  tag->add_option("id", *tag_id, "job id")->required();
  tag->add_option("tags", *tag_list, "tags: letters, digits and - _ . : + /, at most 40 characters each");
  tag->add_flag("--remove", *tag_remove, "remove these tags instead");
  tag->callback(Callback(ctx, exit_code, [run, tag_id, tag_list, tag_remove]() -> CommandResult {
    app::JobLabelRequest req;
    (*tag_remove ? req.remove_tags : req.add_tags) = *tag_list;
    return run(*tag_id, req);
  }));

  auto note_id = std::make_shared<std::string>();
  auto note_text = std::make_shared<std::string>();
  CLI::App* note = jobs.add_subcommand("note", "Set a job's free-text note (\"\" clears it)");
  note->add_option("id", *note_id, "job id")->required();
  note->add_option("text", *note_text, "the note (at most 8000 bytes; newlines allowed)")->required();
  note->callback(Callback(ctx, exit_code, [run, note_id, note_text]() -> CommandResult {
    app::JobLabelRequest req;
    req.note = *note_text;
    return run(*note_id, req);
  }));
}

}  // namespace kestrel::cli
