// `kestrel dataset ...`: import, validate, list, show, diff, export,
// preview, synth. A thin adapter: the use cases and their JSON views are the
// application layer's (app/datasets.h); this file parses, calls, and prints
// (the text renderings are here, the --json documents are the app's views
// plus "ok"). synth touches no store and stays here.
#include <cstdio>
#include <ctime>
#include <iostream>
#include <limits>

#include "app/dataset_merge.h"
#include "app/datasets.h"
#include "cli/cli.h"
#include "data/loader.h"
#include "data/synth.h"

namespace kestrel::cli {
namespace {

std::string FormatTime(int64_t unix_seconds) {
  std::time_t t = static_cast<std::time_t>(unix_seconds);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof(buf), "%Y-%m-%d %H:%M:%SZ", &tm);
  return buf;
}

std::string ShowText(const data::VersionView& v) {
  const auto& r = v.record;
  auto summary = nlohmann::json::parse(r.summary_json, nullptr, false);
  std::string out;
  char buf[512];
  std::snprintf(buf, sizeof(buf),
                "%s@v%lld  %s\n  created %s from %s\n  %lld images, %lld boxes, %d classes\n",
                r.dataset.c_str(), static_cast<long long>(r.seq), r.version_id.c_str(),
                FormatTime(r.created_at).c_str(), r.source.c_str(), static_cast<long long>(r.num_images),
                static_cast<long long>(r.num_boxes), r.num_classes);
  out += buf;
  if (r.data_mode == "reference") {
    out += "  data_mode=reference: images are read from their files (checked: size + mtime, else hash)\n";
  }
  if (summary.is_discarded()) return out;
  out += "\n  split    images   boxes  backgrounds\n";
  for (auto it = summary["splits"].begin(); it != summary["splits"].end(); ++it) {
    std::snprintf(buf, sizeof(buf), "  %-7s %7lld %7lld %12lld\n", it.key().c_str(),
                  static_cast<long long>(it.value()["images"].get<int64_t>()),
                  static_cast<long long>(it.value()["boxes"].get<int64_t>()),
                  static_cast<long long>(it.value()["backgrounds"].get<int64_t>()));
    out += buf;
  }
  out += "\n  id  class                      train      val     test\n";
  for (const auto& c : summary["classes"]) {
    std::snprintf(buf, sizeof(buf), "  %-3d %-24s %7lld  %7lld  %7lld\n", c["id"].get<int>(),
                  c["name"].get<std::string>().c_str(), static_cast<long long>(c["train"].get<int64_t>()),
                  static_cast<long long>(c["val"].get<int64_t>()),
                  static_cast<long long>(c["test"].get<int64_t>()));
    out += buf;
  }
  out += "\n  image size (max side):";
  for (const auto& b : summary["image_size_histogram"]) {
    if (b["images"].get<int64_t>() > 0) {
      out += " " + b["max_side"].get<std::string>() + ": " + std::to_string(b["images"].get<int64_t>());
    }
  }
  out += "\n  objects per image:    ";
  for (const auto& b : summary["objects_per_image"]) {
    if (b["images"].get<int64_t>() > 0) {
      out += " " + b["objects"].get<std::string>() + ": " + std::to_string(b["images"].get<int64_t>());
    }
  }
  const auto& f = summary["findings"];
  std::snprintf(
      buf, sizeof(buf), "\n\n  findings: %lld errors, %lld warnings, %lld info; %lld images excluded\n",
      static_cast<long long>(f["errors"].get<int64_t>()),
      static_cast<long long>(f["warnings"].get<int64_t>()), static_cast<long long>(f["infos"].get<int64_t>()),
      static_cast<long long>(summary["images_excluded"].get<int64_t>()));
  out += buf;
  for (auto it = f["by_check"].begin(); it != f["by_check"].end(); ++it) {
    out += "    " + it.key() + ": " + std::to_string(it.value().get<int64_t>()) + "\n";
  }
  return out;
}

std::string DiffText(const std::string& a, const std::string& b, const data::ManifestDiff& d,
                     const nlohmann::json& classes, const data::BoxDiff& boxes) {
  std::string out = "diff " + a + " -> " + b + "\n";
  auto section = [&](const char* title, const std::vector<std::string>& items, char mark) {
    out += "  " + std::string(title) + ": " + std::to_string(items.size()) + "\n";
    for (size_t i = 0; i < items.size() && i < 50; ++i)
      out += std::string("    ") + mark + " " + items[i] + "\n";
    if (items.size() > 50) out += "    ... " + std::to_string(items.size() - 50) + " more (see --json)\n";
  };
  section("images added", d.added, '+');
  section("images removed", d.removed, '-');
  section("images changed", d.image_changed, '~');
  section("labels changed", d.labels_changed, '~');
  section("moved between splits", d.split_moved, '>');
  if (d.names_changed) out += "  class names changed\n";
  for (const auto& c : classes) {
    const int64_t delta = c["delta"].get<int64_t>();
    if (delta == 0) continue;
    out += "  instances of " + c["name"].get<std::string>() + ": " + std::to_string(c["a"].get<int64_t>()) +
           " -> " + std::to_string(c["b"].get<int64_t>()) + " (" + (delta > 0 ? "+" : "") +
           std::to_string(delta) + ")\n";
  }
  auto counts = [](const data::BoxDiffCounts& c) {
    return "+" + std::to_string(c.added) + " added, -" + std::to_string(c.removed) + " removed, " +
           std::to_string(c.moved) + " moved, " + std::to_string(c.relabelled) + " relabelled, " +
           std::to_string(c.unchanged) + " unchanged";
  };
  out += "  boxes: " + counts(boxes.total) + "\n";
  for (const auto& [name, c] : boxes.by_class)
    if (c.Changed()) out += "    " + name + ": " + counts(c) + "\n";
  for (size_t i = 0; i < boxes.images.size() && i < 50; ++i)
    out += "    ~ " + boxes.images[i].key + ": " + counts(boxes.images[i].counts) + "\n";
  if (boxes.images.size() > 50)
    out += "    ... " + std::to_string(boxes.images.size() - 50) + " more images (see --json)\n";
  return out;
}

// The user's stores and the dataset use cases over them.
struct OpenedDatasets {
  Stores stores;
  std::unique_ptr<app::Datasets> ds;
};

Result<std::unique_ptr<OpenedDatasets>> OpenDatasets(const Context& ctx) {
  auto out = std::make_unique<OpenedDatasets>();
  KESTREL_ASSIGN_OR_RETURN(out->stores, OpenStores(ctx));
  out->ds = std::make_unique<app::Datasets>(*out->stores.meta, *out->stores.blobs);
  return out;
}

// The --json document of a successful command: the app's view plus "ok".
nlohmann::json Ok(nlohmann::json view) {
  view["ok"] = true;
  return view;
}

}  // namespace

void AddDatasetCommands(CLI::App& app, Context& ctx, int* exit_code) {
  CLI::App* ds = app.add_subcommand("dataset", "Import, validate, version and export datasets");
  ds->require_subcommand(1);

  // Shared by import and validate.
  struct ImportState {
    std::string path, name;
    data::ImportOptions opts;
    OptionSet set;
    FlagValues flags;
    std::vector<std::string> extras;  // key=value tokens
  };
  auto st = std::make_shared<ImportState>();
  st->opts.Bind(st->set);

  CLI::App* imp = ds->add_subcommand(
      "import",
      "Validate a YOLO/COCO/VOC dataset (or a Label Studio / CVAT export) and store it as a new version");
  imp->add_option("path", st->path,
                  "dataset folder, data.yaml / instances JSON, or a Label Studio / CVAT export")
      ->required();
  imp->add_option("--name", st->name, "registry name")->required();
  imp->add_option("key=value", st->extras, "options Ultralytics-style, e.g. val_ratio=0.1");
  AddOptionFlags(imp, st->set, &st->flags);
  imp->callback(Callback(ctx, exit_code, [&ctx, st]() -> CommandResult {
    KESTREL_RETURN_IF_ERROR(ApplyOptions(st->set, st->flags, st->extras));
    KESTREL_ASSIGN_OR_RETURN(auto opened, OpenDatasets(ctx));
    data::ValidationReport report;
    auto r = opened->ds->Import(st->path, st->name, st->opts, &report);
    if (!r.IsOk()) {
      const nlohmann::json rj = report.source.empty() ? nlohmann::json() : report.ToJson();
      return CommandResult::Reported(
          FailWithReport(ctx, r.GetStatus(), report.source.empty() ? nullptr : &rj));
    }
    const auto& rec = r->record;
    std::string text = r->analysis.report.ToText() + "\n" +
                       (r->created ? "imported " : "unchanged: identical content is already ") + rec.dataset +
                       "@v" + std::to_string(rec.seq) + " (version " + rec.version_id + ")\n";
    return Output{text, Ok(app::DatasetImportJson(*r))};
  }));

  auto vst = std::make_shared<ImportState>();
  vst->opts.Bind(vst->set);
  CLI::App* val =
      ds->add_subcommand("validate", "Dry run: print the validation report; exit 1 when errors exist");
  val->add_option("path", vst->path, "dataset folder or data.yaml / instances JSON")->required();
  val->add_option("key=value", vst->extras, "options Ultralytics-style, e.g. imgsz=320");
  AddOptionFlags(val, vst->set, &vst->flags);
  val->callback(Callback(ctx, exit_code, [vst]() -> CommandResult {
    KESTREL_RETURN_IF_ERROR(ApplyOptions(vst->set, vst->flags, vst->extras));
    // A dry run: no store is opened.
    KESTREL_ASSIGN_OR_RETURN(auto a, app::ValidateDataset(vst->path, vst->opts));
    return Output{a.report.ToText() + "\nversion id would be " + a.version_id + "\n",
                  app::DatasetValidationJson(a), a.Ok() ? kExitOk : kExitFailure};
  }));

  CLI::App* list = ds->add_subcommand("list", "List datasets and their latest versions");
  list->callback(Callback(ctx, exit_code, [&ctx]() -> CommandResult {
    KESTREL_ASSIGN_OR_RETURN(auto opened, OpenDatasets(ctx));
    KESTREL_ASSIGN_OR_RETURN(auto all, opened->ds->List());
    std::string text;
    char buf[512];
    std::snprintf(buf, sizeof(buf), "%-20s %-8s %-14s %8s %8s %-20s\n", "name", "latest", "version id",
                  "images", "versions", "created");
    text += buf;
    for (const auto& d : all) {
      std::snprintf(buf, sizeof(buf), "%-20s v%-7lld %-14s %8lld %8lld %-20s\n", d.name.c_str(),
                    static_cast<long long>(d.latest.seq), d.latest.version_id.substr(0, 12).c_str(),
                    static_cast<long long>(d.latest.num_images), static_cast<long long>(d.num_versions),
                    FormatTime(d.latest.created_at).c_str());
      text += buf;
    }
    if (all.empty()) text = "no datasets yet: kestrel dataset import PATH --name NAME\n";
    return Output{text, app::DatasetListJson(all)};
  }));

  auto show_spec = std::make_shared<std::string>();
  CLI::App* show =
      ds->add_subcommand("show", "Counts per split and class, size histograms, findings of a version");
  show->add_option("dataset", *show_spec, "NAME or NAME@VERSION (vN or id prefix)")->required();
  show->callback(Callback(ctx, exit_code, [&ctx, show_spec]() -> CommandResult {
    KESTREL_ASSIGN_OR_RETURN(auto opened, OpenDatasets(ctx));
    KESTREL_ASSIGN_OR_RETURN(auto v, opened->ds->Show(*show_spec));
    return Output{ShowText(v), Ok(app::DatasetShowJson(v))};
  }));

  // verify: every image read and hashed (a data_mode=reference version's
  // files, or the blobs); exit 1 when one is missing or changed.
  auto verify_spec = std::make_shared<std::string>();
  CLI::App* verify = ds->add_subcommand(
      "verify", "Read and hash every image of a version (referenced files or blobs); exit 1 on a mismatch");
  verify->add_option("dataset", *verify_spec, "NAME or NAME@VERSION (vN or id prefix)")->required();
  verify->callback(Callback(ctx, exit_code, [&ctx, verify_spec]() -> CommandResult {
    KESTREL_ASSIGN_OR_RETURN(auto opened, OpenDatasets(ctx));
    KESTREL_ASSIGN_OR_RETURN(app::DatasetVerify v, opened->ds->Verify(*verify_spec));
    return Output{app::DatasetVerifyText(v), app::DatasetVerifyJson(v),
                  v.files.Ok() ? kExitOk : kExitFailure};
  }));

  auto diff_a = std::make_shared<std::string>(), diff_b = std::make_shared<std::string>();
  CLI::App* diff =
      ds->add_subcommand("diff", "Images and labels added, removed or changed between two versions");
  diff->add_option("a", *diff_a, "NAME@VERSION")->required();
  diff->add_option("b", *diff_b, "NAME@VERSION")->required();
  diff->callback(Callback(ctx, exit_code, [&ctx, diff_a, diff_b]() -> CommandResult {
    KESTREL_ASSIGN_OR_RETURN(auto opened, OpenDatasets(ctx));
    KESTREL_ASSIGN_OR_RETURN(auto d, opened->ds->Diff(*diff_a, *diff_b));
    return Output{DiffText(*diff_a, *diff_b, d.diff, app::DatasetDiffClasses(d), d.boxes),
                  Ok(app::DatasetDiffJson(d))};
  }));

  // merge: corrected labels from Label Studio or CVAT as a new version (app/dataset_merge.h).
  struct MergeState {
    std::string spec;
    app::MergeOptions opts;
    OptionSet set;
    FlagValues flags;
    std::vector<std::string> extras;
  };
  auto mg = std::make_shared<MergeState>();
  mg->opts.Bind(mg->set);
  CLI::App* merge = ds->add_subcommand(
      "merge", "Apply corrected labels (Label Studio JSON, CVAT 1.1 XML) to a version as a new version");
  merge->add_option("dataset", mg->spec, "NAME@VERSION")->required();
  merge->add_option("key=value", mg->extras, "corrections=FILE [images=DIR] [seed=N]");
  AddOptionFlags(merge, mg->set, &mg->flags);
  merge->callback(Callback(ctx, exit_code, [&ctx, mg]() -> CommandResult {
    KESTREL_RETURN_IF_ERROR(ApplyOptions(mg->set, mg->flags, mg->extras));
    if (mg->opts.corrections.empty())
      return Status::InvalidArgument("corrections=FILE is required", {"command line", 0, "corrections"});
    KESTREL_ASSIGN_OR_RETURN(auto opened, OpenDatasets(ctx));
    data::ValidationReport report;
    auto r = app::MergeCorrections(*opened->stores.meta, *opened->stores.blobs, mg->spec, mg->opts,
                                   Env::Default(), &report);
    if (!r.IsOk()) {
      const nlohmann::json rj = report.source.empty() ? nlohmann::json() : report.ToJson();
      return CommandResult::Reported(
          FailWithReport(ctx, r.GetStatus(), report.source.empty() ? nullptr : &rj));
    }
    const auto& rec = r->record;
    std::string text = r->report.ToText() + "\n" + std::to_string(r->images_corrected) +
                       " images corrected (" + std::to_string(r->images_changed) + " changed), " +
                       std::to_string(r->images_added) + " added, boxes " + std::to_string(r->boxes_before) +
                       " -> " + std::to_string(r->boxes_after) + "\n" +
                       (r->created ? "merged as " : "unchanged: identical content is already ") +
                       rec.dataset + "@v" + std::to_string(rec.seq) + " (version " + rec.version_id + ")\n";
    return Output{text, Ok(app::DatasetMergeJson(*r))};
  }));

  struct ExportState {
    std::string spec, out, format = "yolo";
  };
  auto ex = std::make_shared<ExportState>();
  CLI::App* exp = ds->add_subcommand("export", "Write a version as a YOLO or COCO dataset folder");
  exp->add_option("dataset", ex->spec, "NAME@VERSION")->required();
  exp->add_option("out", ex->out, "output folder (must be empty or absent)")->required();
  exp->add_option("--format", ex->format, "yolo or coco")->check(CLI::IsMember({"yolo", "coco"}));
  exp->callback(Callback(ctx, exit_code, [&ctx, ex]() -> CommandResult {
    KESTREL_ASSIGN_OR_RETURN(auto opened, OpenDatasets(ctx));
    KESTREL_ASSIGN_OR_RETURN(auto e, opened->ds->Export(ex->spec, ex->format, ex->out));
    return Output{"exported " + e.spec + " as " + e.format + " to " + e.out + "\n",
                  Ok(app::DatasetExportJson(e))};
  }));

  // preview: what the trainer will see, boxes drawn, so a user can check the
  // labels survive augmentation before spending hours on a run.
  struct PreviewState {
    app::PreviewRequest req;
    OptionSet set;
    std::vector<std::string> extras;
  };
  auto pv = std::make_shared<PreviewState>();
  pv->req.loader.imgsz = 320;
  pv->set.Bool("aug", &pv->req.aug, "apply training augmentation (false: letterboxed val view)")
      .String("out", &pv->req.out, "output image (PNG or JPEG)")
      .Int("images", &pv->req.images, "images in the grid", 1, 64);
  pv->req.augment.Bind(pv->set);
  pv->req.loader.Bind(pv->set);
  CLI::App* prev =
      ds->add_subcommand("preview", "Write a grid of (augmented) training images with boxes drawn");
  prev->add_option("dataset", pv->req.spec, "NAME or NAME@VERSION")->required();
  prev->add_option("key=value", pv->extras, "aug=true out=preview.jpg imgsz=320 mosaic=1.0 ...");
  prev->callback(Callback(ctx, exit_code, [&ctx, pv]() -> CommandResult {
    Status s = ApplyOptions(pv->set, {}, pv->extras);
    if (s.IsOk()) s = pv->req.augment.Validate();
    if (!s.IsOk()) return CommandResult::Failed(s, kExitUsage);
    KESTREL_ASSIGN_OR_RETURN(auto opened, OpenDatasets(ctx));
    KESTREL_ASSIGN_OR_RETURN(auto p, opened->ds->Preview(pv->req));
    return Output{"wrote " + p.out + " (" + std::to_string(p.images) + " images of " + p.spec +
                      (p.augmented ? ", augmented" : "") + ")\n",
                  Ok(app::DatasetPreviewJson(p))};
  }));

  struct SynthState {
    std::string out;
    data::SynthOptions opts;
    int64_t seed = 0;
    OptionSet set;
    FlagValues flags;
    std::vector<std::string> extras;  // key=value tokens
  };
  auto sy = std::make_shared<SynthState>();
  sy->opts.Bind(sy->set);
  sy->set.Int("seed", &sy->seed, "random seed");
  CLI::App* syn =
      ds->add_subcommand("synth", "Write a deterministic synthetic detection dataset (YOLO layout)");
  syn->add_option("out", sy->out, "output folder")->required();
  syn->add_option("key=value", sy->extras, "options Ultralytics-style, e.g. min_side=180 max_side=1400");
  AddOptionFlags(syn, sy->set, &sy->flags);
  syn->footer("Keys (--flag VALUE or key=value; key=default  (type range)):\n" + sy->set.HelpText());
  syn->callback(Callback(ctx, exit_code, [sy]() -> CommandResult {
    Status v = ApplyOptions(sy->set, sy->flags, sy->extras);
    sy->opts.seed = static_cast<uint64_t>(sy->seed);
    if (v.IsOk()) v = sy->opts.Validate();
    if (!v.IsOk()) return CommandResult::Failed(v, kExitUsage);
    KESTREL_RETURN_IF_ERROR(data::WriteSynthDataset(sy->opts, sy->out));
    return Output{
        "wrote " + std::to_string(sy->opts.images) + " synthetic images (" +
            std::to_string(sy->opts.classes) + " classes, " +
            (sy->opts.min_side > 0
                 ? std::to_string(sy->opts.min_side) + ".." + std::to_string(sy->opts.max_side) + " px sides"
                 : std::to_string(sy->opts.imgsz) + " px") +
            ") to " + sy->out + "\n",
        {{"ok", true}, {"out", sy->out}, {"images", sy->opts.images}, {"classes", sy->opts.classes}}};
  }));
}

}  // namespace kestrel::cli
