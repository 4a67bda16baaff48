#include "app/job_media.h"

#include <algorithm>
#include <map>
#include <utility>

#include "app/jobs.h"
#include "train/samples.h"

namespace kestrel::app {

namespace {

// "epoch-<E>.json" -> E (1..10^6); 0 for any other name (temp files too).
int EpochOfFileName(const std::string& name) {
  const std::string prefix = "epoch-", suffix = ".json";
  if (name.size() <= prefix.size() + suffix.size() || name.rfind(prefix, 0) != 0 ||
      name.compare(name.size() - suffix.size(), suffix.size(), suffix) != 0)
    return 0;
  const std::string digits = name.substr(prefix.size(), name.size() - prefix.size() - suffix.size());
  if (digits.size() > 7 || digits[0] == '0' ||
      !std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '9'; }))
    return 0;
  return std::stoi(digits);
}

std::string RangesText(const std::vector<JobSampleEpochs::Epoch>& epochs) {
  if (epochs.empty()) return "none";
  std::string out;
  for (size_t i = 0; i < epochs.size();) {
    size_t j = i;
    while (j + 1 < epochs.size() && epochs[j + 1].epoch == epochs[j].epoch + 1) ++j;
    if (!out.empty()) out += ", ";
    out += std::to_string(epochs[i].epoch);
    if (j > i) out += "-" + std::to_string(epochs[j].epoch);
    i = j + 1;
  }
  return out;
}

}  // namespace

JobMedia::JobMedia(store::MetadataStore& meta, Env& env, std::string home)
    : meta_(meta), env_(env), home_(std::move(home)) {}

Result<JobSampleEpochs> JobMedia::Epochs(int64_t job_id) {
  // An unknown job: the store's error, as `kestrel jobs show` reports it.
  KESTREL_ASSIGN_OR_RETURN(store::JobRecord job, meta_.GetJob(job_id));
  const std::string job_dir = JoinPath(JoinPath(home_, "jobs"), std::to_string(job_id));
  std::map<int, int64_t> latest;  // epoch -> attempt
  for (int64_t a = 1; a <= job.attempt; ++a) {
    const std::string dir = JoinPath(JoinPath(job_dir, "attempt-" + std::to_string(a)), "samples");
    if (!env_.Stat(dir).is_dir) continue;
    KESTREL_ASSIGN_OR_RETURN(std::vector<std::string> names, env_.ListDir(dir));
    for (const std::string& n : names) {
      const int e = EpochOfFileName(n);
      if (e > 0 && env_.Stat(JoinPath(dir, n)).is_regular) latest[e] = a;
    }
  }
  JobSampleEpochs out;
  out.job_id = job_id;
  for (const auto& [e, a] : latest) out.epochs.push_back({e, a});
  return out;
}

Result<JobSamplePanel> JobMedia::Panel(int64_t job_id, int64_t epoch) {
  KESTREL_ASSIGN_OR_RETURN(JobSampleEpochs all, Epochs(job_id));
  auto it = std::find_if(all.epochs.begin(), all.epochs.end(),
                         [&](const JobSampleEpochs::Epoch& e) { return e.epoch == epoch; });
  if (it == all.epochs.end()) {
    return Status::NotFound("job " + std::to_string(job_id) + " has no samples for epoch " +
                                std::to_string(epoch) + " (epochs with samples: " + RangesText(all.epochs) +
                                ")",
                            {kRequestFile, 0, "epoch"});
  }
  const std::string path = JoinPath(JoinPath(JoinPath(JoinPath(home_, "jobs"), std::to_string(job_id)),
                                             "attempt-" + std::to_string(it->attempt)),
                                    "samples/epoch-" + std::to_string(epoch) + ".json");
  KESTREL_ASSIGN_OR_RETURN(std::string text, env_.ReadFile(path, kMaxFileBytes));
  auto doc = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (!doc.is_object() || doc.value("format", "") != train::kSamplesFormat ||
      !doc.contains("format_version") || !doc["format_version"].is_number_integer() ||
      doc["format_version"].get<int64_t>() != train::kSamplesFormatVersion || !doc.contains("epoch") ||
      !doc["epoch"].is_number_integer() || doc["epoch"].get<int64_t>() != epoch || !doc.contains("images") ||
      !doc["images"].is_array()) {
    return Status::Corruption(path + ": not a samples file (format " + std::string(train::kSamplesFormat) +
                              " v" + std::to_string(train::kSamplesFormatVersion) + ") of epoch " +
                              std::to_string(epoch));
  }
  JobSamplePanel p;
  p.job_id = job_id;
  p.epoch = static_cast<int>(epoch);
  p.attempt = it->attempt;
  p.samples = std::move(doc);
  return p;
}

nlohmann::json JobSampleEpochsJson(const JobSampleEpochs& e) {
  nlohmann::json list = nlohmann::json::array();
  for (const auto& x : e.epochs) list.push_back({{"epoch", x.epoch}, {"attempt", x.attempt}});
  return {{"job", e.job_id}, {"epochs", std::move(list)}};
}

nlohmann::json JobSamplePanelJson(const JobSamplePanel& p) {
  nlohmann::json out = {{"job", p.job_id}, {"epoch", p.epoch}, {"attempt", p.attempt}};
  for (const char* key : {"dataset", "version", "version_id", "conf", "names", "images"})
    out[key] = p.samples.contains(key) ? p.samples[key] : nlohmann::json(nullptr);
  return out;
}

}  // namespace kestrel::app
