#include "store/job_types.h"

#include <array>

namespace kestrel::store {
namespace {

template <typename E, size_t N>
bool ParseName(const std::string& s, const std::array<const char*, N>& names, E* out) {
  for (size_t i = 0; i < N; ++i) {
    if (s == names[i]) {
      *out = static_cast<E>(i);
      return true;
    }
  }
  return false;
}

constexpr std::array<const char*, 6> kStates = {"queued",           "running",          "succeeded",
                                                "failed_retryable", "failed_permanent", "cancelled"};
constexpr std::array<const char*, 3> kPriorities = {"high", "normal", "low"};
constexpr std::array<const char*, 7> kStages = {"", "data", "build", "train", "eval", "export", "commit"};
constexpr std::array<const char*, 3> kClasses = {"", "retryable", "permanent"};

}  // namespace

const char* JobStateName(JobState s) { return kStates[static_cast<size_t>(s)]; }
const char* JobPriorityName(JobPriority p) { return kPriorities[static_cast<size_t>(p)]; }
const char* FailureStageName(FailureStage s) { return kStages[static_cast<size_t>(s)]; }
const char* FailureClassName(FailureClass c) { return kClasses[static_cast<size_t>(c)]; }
bool ParseJobState(const std::string& s, JobState* out) { return ParseName(s, kStates, out); }
bool ParseJobPriority(const std::string& s, JobPriority* out) { return ParseName(s, kPriorities, out); }
bool ParseFailureStage(const std::string& s, FailureStage* out) { return ParseName(s, kStages, out); }
bool ParseFailureClass(const std::string& s, FailureClass* out) { return ParseName(s, kClasses, out); }

bool IsLive(JobState s) {
  return s == JobState::kQueued || s == JobState::kRunning || s == JobState::kFailedRetryable;
}

}  // namespace kestrel::store
