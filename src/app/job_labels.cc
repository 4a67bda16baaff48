#include "app/job_labels.h"

#include <algorithm>

#include "app/jobs.h"
#include "core/utf8.h"

namespace kestrel::app {
namespace {

Status Bad(const std::string& field, const std::string& msg) {
  return Status::InvalidArgument(msg, {kRequestFile, 0, field});
}

// "yolov8n" of "runs/x/yolov8n.pt", "n" of "n": what a person calls the model.
std::string ModelStem(const std::string& model) {
  const size_t slash = model.find_last_of('/');
  std::string base = slash == std::string::npos ? model : model.substr(slash + 1);
  const size_t dot = base.find_last_of('.');
  if (dot != std::string::npos && dot > 0) base = base.substr(0, dot);
  return base;
}

bool HasControl(const std::string& text, bool allow_newlines) {
  return std::any_of(text.begin(), text.end(), [&](char ch) {
    const auto c = static_cast<unsigned char>(ch);
    if (allow_newlines && (c == '\n' || c == '\t' || c == '\r')) return false;
    return c < 0x20 || c == 0x7f;
  });
}

Status CheckTag(const std::string& tag) {
  const bool ok =
      !tag.empty() && tag.size() <= kMaxJobTagBytes && std::all_of(tag.begin(), tag.end(), [](char c) {
        return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
               c == '_' || c == '.' || c == ':' || c == '+' || c == '/';
      });
  if (ok) return {};
  return Bad("tags", "tag '" + EscapeForDisplayCut(tag) + "' must be 1 to " +
                         std::to_string(kMaxJobTagBytes) +
                         " characters of letters, digits and - _ . : + / (no spaces)");
}

}  // namespace

std::string DefaultJobName(const std::string& kind, const std::string& dataset, int64_t dataset_seq,
                           const nlohmann::json& config) {
  std::vector<std::string> parts;
  if (!kind.empty() && kind != "train") parts.push_back(kind);
  if (!dataset.empty())
    parts.push_back(dataset + (dataset_seq > 0 ? " v" + std::to_string(dataset_seq) : ""));
  if (config.is_object()) {
    if (auto m = config.find("model"); m != config.end() && m->is_string() && !m->get<std::string>().empty())
      parts.push_back(ModelStem(m->get<std::string>()));
    if (auto e = config.find("epochs");
        e != config.end() && e->is_number_integer() && kind != "export" && kind != "val")
      parts.push_back(std::to_string(e->get<int64_t>()) + (e->get<int64_t>() == 1 ? " epoch" : " epochs"));
  }
  std::string out;
  for (const auto& p : parts) out += (out.empty() ? "" : " · ") + p;
  if (out.size() > kMaxJobNameBytes) {
    size_t cut = kMaxJobNameBytes;  // at a character boundary
    while (cut > 0 && (static_cast<unsigned char>(out[cut]) & 0xC0) == 0x80) --cut;
    out.resize(cut);
  }
  return out;
}

Result<store::JobRecord> LabelJob(store::MetadataStore& meta, int64_t job_id, const JobLabelRequest& req) {
  store::JobLabelChange change;
  if (req.name) {
    const std::string& n = *req.name;
    if (n.empty()) return Bad("name", "name must not be empty");
    if (n.size() > kMaxJobNameBytes)
      return Bad("name", "name is " + std::to_string(n.size()) + " bytes; at most " +
                             std::to_string(kMaxJobNameBytes));
    if (!IsValidUtf8(n) || HasControl(n, false))
      return Bad("name", "name must be UTF-8 text without control characters");
    change.name = n;
  }
  if (req.note) {
    const std::string& n = *req.note;
    if (n.size() > kMaxJobNoteBytes)
      return Bad("note", "note is " + std::to_string(n.size()) + " bytes; at most " +
                             std::to_string(kMaxJobNoteBytes));
    if (!IsValidUtf8(n) || HasControl(n, true))
      return Bad("note", "note must be UTF-8 text without control characters other than newlines and tabs");
    change.note = n;
  }
  for (const auto* list : {req.tags ? &*req.tags : nullptr, &req.add_tags, &req.remove_tags}) {
    if (list == nullptr) continue;
    for (const auto& t : *list) KESTREL_RETURN_IF_ERROR(CheckTag(t));
  }
  const bool tags_change = req.tags || !req.add_tags.empty() || !req.remove_tags.empty();
  if (tags_change) {
    std::vector<std::string> tags;
    if (req.tags) {
      tags = *req.tags;
    } else {
      KESTREL_ASSIGN_OR_RETURN(const store::JobRecord job, meta.GetJob(job_id));
      tags = job.tags;
    }
    tags.insert(tags.end(), req.add_tags.begin(), req.add_tags.end());
    std::vector<std::string> kept;
    for (const auto& t : tags) {
      if (std::find(kept.begin(), kept.end(), t) != kept.end()) continue;
      if (std::find(req.remove_tags.begin(), req.remove_tags.end(), t) != req.remove_tags.end()) continue;
      kept.push_back(t);
    }
    if (kept.size() > kMaxJobTags)
      return Bad("tags", "a job has at most " + std::to_string(kMaxJobTags) + " tags, this would make " +
                             std::to_string(kept.size()));
    change.tags = std::move(kept);
  }
  return meta.LabelJob(job_id, change);
}

}  // namespace kestrel::app
