#include "server/api_job_run.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <limits>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "app/job_labels.h"
#include "app/jobs.h"
#include "core/parse.h"
#include "server/json_body.h"
#include "server/query_params.h"

namespace kestrel::server {
namespace {

using nlohmann::json;

// The file's size, -1 when it cannot be stat'ed (not written yet).
int64_t FileSize(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return -1;
  return static_cast<int64_t>(st.st_size);
}

// Up to `n` bytes of `path` from `offset` ("" on any error).
std::string ReadRange(const std::string& path, int64_t offset, int64_t n) {
  std::string out;
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return out;
  out.resize(static_cast<size_t>(n));
  size_t got = 0;
  while (got < out.size()) {
    const ssize_t r = ::pread(fd, out.data() + got, out.size() - got, static_cast<off_t>(offset) + got);
    if (r <= 0) break;
    got += static_cast<size_t>(r);
  }
  ::close(fd);
  out.resize(got);
  return out;
}

// The length of `text` without a UTF-8 sequence cut at its end (the rest
// comes with the next read).
size_t WholeCharacters(const std::string& text) {
  size_t end = text.size();
  for (size_t back = 1; back <= 3 && back <= text.size(); ++back) {
    const auto c = static_cast<unsigned char>(text[text.size() - back]);
    if ((c & 0xC0) == 0x80) continue;  // a continuation byte: look further back
    const size_t need = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC0 ? 2 : 1;
    if (need > back) end = text.size() - back;
    break;
  }
  return end;
}

std::string AttemptLogPath(const std::string& home, int64_t job, int64_t attempt) {
  return home + "/jobs/" + std::to_string(job) + "/attempt-" + std::to_string(attempt) + ".log";
}

Response LabelsResponse(ApiContext& ctx, const Request& req, const PathParams& p) {
  auto id = JobIdText(p.at("id"));
  if (!id.IsOk()) return ErrorResponse(id.GetStatus());
  auto body = ReadJsonObjectBody(req.body, {"name", "note", "tags", "add_tags", "remove_tags"}, true);
  if (!body.IsOk()) return ErrorResponse(body.GetStatus());
  app::JobLabelRequest change;
  auto bad = [](const std::string& field, const std::string& what) {
    return ErrorResponse(
        Status::InvalidArgument("\"" + field + "\" must be " + what, {app::kRequestFile, 0, field}));
  };
  for (const char* field : {"name", "note"}) {
    if (!body->contains(field)) continue;
    if (!(*body)[field].is_string()) return bad(field, "a string");
    (std::string(field) == "name" ? change.name : change.note) = (*body)[field].get<std::string>();
  }
  for (const char* field : {"tags", "add_tags", "remove_tags"}) {
    if (!body->contains(field)) continue;
    const json& list = (*body)[field];
    if (!list.is_array()) return bad(field, "an array of strings");
    std::vector<std::string> tags;
    for (const auto& t : list) {
      if (!t.is_string()) return bad(field, "an array of strings");
      tags.push_back(t.get<std::string>());
    }
    const std::string f = field;
    if (f == "tags")
      change.tags = std::move(tags);
    else if (f == "add_tags")
      change.add_tags = std::move(tags);
    else
      change.remove_tags = std::move(tags);
  }
  if (body->empty()) {
    return ErrorResponse(
        Status::InvalidArgument("the body changes nothing: give name, note, tags, add_tags or remove_tags",
                                {app::kRequestFile, 0, "body"}));
  }
  auto job = app::LabelJob(ctx.meta, *id, change);
  if (!job.IsOk()) return ErrorResponse(job.GetStatus());
  return JsonResponse({{"ok", true}, {"job", app::JobJson(*job, false)}});
}

Response LogResponse(ApiContext& ctx, const Request& req, const PathParams& p) {
  auto id = JobIdText(p.at("id"));
  if (!id.IsOk()) return ErrorResponse(id.GetStatus());
  auto job = ctx.meta.GetJob(*id);
  if (!job.IsOk()) return ErrorResponse(job.GetStatus());
  const int64_t latest = std::max<int64_t>(job->attempt, 1);
  auto attempt =
      QueryInt(req, "attempt", latest, 1, std::numeric_limits<int32_t>::max(), "an attempt number");
  if (!attempt.IsOk()) return ErrorResponse(attempt.GetStatus());
  if (*attempt > latest) {
    return ErrorResponse(
        Status::NotFound("job " + std::to_string(*id) + " has no attempt " + std::to_string(*attempt),
                         {app::kRequestFile, 0, "attempt"}));
  }
  auto tail = QueryInt(req, "tail", kLogTailBytes, 0, std::numeric_limits<int64_t>::max(), "a byte count");
  if (!tail.IsOk()) return ErrorResponse(tail.GetStatus());
  const std::string path = AttemptLogPath(ctx.home, *id, *attempt);
  int64_t start = 0;
  const std::string header = req.Header("last-event-id");
  if (!header.empty()) {
    auto after = ParseInt64(header, {app::kRequestFile, 0, "Last-Event-ID"}, 0,
                            std::numeric_limits<int64_t>::max(), "a byte offset in the log");
    if (!after.IsOk()) return ErrorResponse(after.GetStatus());
    start = *after;
  } else {
    start = LogTailStart(path, *tail);
  }
  Response r;
  r.content_type = "text/event-stream";
  EventStream s;
  s.last_id = start;
  const int64_t n = *attempt;
  s.poll = [path, n](int64_t after) { return ReadLogEvents(path, n, after); };
  r.stream = std::move(s);
  return r;
}

}  // namespace

int64_t LogTailStart(const std::string& path, int64_t tail) {
  const int64_t size = FileSize(path);
  if (size <= tail) return 0;
  const int64_t from = size - tail;
  // The first line that begins at or after `from`: after the first '\n'
  // at or after from - 1 (a line starting exactly at `from` counts).
  const std::string window = ReadRange(path, from - 1, tail + 1);
  const size_t nl = window.find('\n');
  if (nl == std::string::npos) return size;  // one line longer than the tail: start at the end
  return from - 1 + static_cast<int64_t>(nl) + 1;
}

Result<std::vector<StreamEvent>> ReadLogEvents(const std::string& path, int64_t attempt, int64_t after) {
  std::vector<StreamEvent> out;
  const int64_t size = FileSize(path);
  if (size <= after) return out;
  std::string text = ReadRange(path, after, std::min(size - after, kLogChunkBytes));
  text.resize(WholeCharacters(text));
  if (text.empty()) return out;
  const json doc = {{"attempt", attempt}, {"offset", after}, {"text", text}};
  out.push_back({after + static_cast<int64_t>(text.size()), "log",
                 doc.dump(-1, ' ', false, json::error_handler_t::replace)});
  return out;
}

Status AddJobRunRoutes(Router& router, ApiContext& ctx) {
  KESTREL_RETURN_IF_ERROR(router.Add(
      "POST", "/api/jobs/{id}/labels",
      {"Set a job's name, tags and note (`kestrel jobs rename|tag|note`); any state",
       {},
       "application/json",
       Access::kWrite,
       "{\"name\": \"baseline\", \"note\": \"text\", \"tags\": [\"a\"] (replaces), \"add_tags\": [...], "
       "\"remove_tags\": [...]}, each optional"},
      [&ctx](const Request& req, const PathParams& p) { return LabelsResponse(ctx, req, p); }));
  return router.Add("GET", "/api/jobs/{id}/log",
                    {"An attempt's log as Server-Sent Events (type log, data {attempt, offset, text}, id the "
                     "end offset): the last 256 KiB's lines, then what the file gains (`kestrel jobs logs`)",
                     {{"attempt", "the attempt (default: the latest)"},
                      {"tail", "start with at most this many bytes of the file's end (default 262144)"}},
                     "text/event-stream"},
                    [&ctx](const Request& req, const PathParams& p) { return LogResponse(ctx, req, p); });
}

}  // namespace kestrel::server
