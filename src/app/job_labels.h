// A run's labels (issue 33, docs/jobs.md "Names, tags and notes"): the name
// a job gets at submit, and the name, tags and note people change after
// (`kestrel jobs rename|tag|note`, POST /api/jobs/{id}/labels). The rules
// live here so the CLI and the server refuse the same values with the same
// messages, each naming its field.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "core/status.h"
#include "store/job_types.h"
#include "store/metadata_store.h"

namespace kestrel::app {

inline constexpr size_t kMaxJobNameBytes = 120;
inline constexpr size_t kMaxJobNoteBytes = 8000;
inline constexpr size_t kMaxJobTags = 20;
inline constexpr size_t kMaxJobTagBytes = 40;

// The name a job gets when none is given: the dataset as the registry names
// it ("shapes v1"), the model file's stem ("yolov8n" of "yolov8n.pt", "n"
// for model=n) and "N epochs", joined by " · ", each left out when the
// config has none; a kind other than train leads ("val · shapes v1 · best").
// "" when nothing is known.
std::string DefaultJobName(const std::string& kind, const std::string& dataset, int64_t dataset_seq,
                           const nlohmann::json& config);

// What a person asks to change; unset fields stay. `tags` replaces the list,
// then `add_tags` are appended (a tag already there is kept once) and
// `remove_tags` removed.
struct JobLabelRequest {
  std::optional<std::string> name;
  std::optional<std::string> note;
  std::optional<std::vector<std::string>> tags;
  std::vector<std::string> add_tags;
  std::vector<std::string> remove_tags;
};

// Validates and applies `req` to job `job_id`. kInvalidArgument at
// {kRequestFile, 0, field} (name, note, tags) for: a name that is empty,
// over kMaxJobNameBytes or holds a control character or invalid UTF-8; a
// note over kMaxJobNoteBytes or with invalid UTF-8 or a control character
// other than newline and tab ("" clears it); a tag that is not 1 to
// kMaxJobTagBytes of ASCII letters, digits and - _ . : + /, or more than
// kMaxJobTags tags. kNotFound for an unknown job.
Result<store::JobRecord> LabelJob(store::MetadataStore& meta, int64_t job_id, const JobLabelRequest& req);

}  // namespace kestrel::app
