// Crash leftovers and the home's permissions through the `kestrel` program
// (docs/disk.md "Leftovers of crashed writers", "Permissions"; issue 26
// items 9 and 11): `kestrel gc` removes a dead writer's upload body and
// blob temp file and keeps a live writer's, in its text and --json;
// `kestrel serve` removes the old leftovers of a dead writer before it
// listens and warns, naming path and mode, when the home is 0755.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <utime.h>

#include <chrono>
#include <thread>

#include "cli_fixture.h"

namespace kestrel::testing {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

const std::string kSha = std::string(62, 'e') + "0f";

std::string DeadPid() {
  const pid_t pid = ::fork();
  if (pid == 0) ::_exit(0);
  ::waitpid(pid, nullptr, 0);
  return std::to_string(pid);
}

class LeftoversCliTest : public KestrelCliTest {
 protected:
  fs::path Home() { return dir_ / "home"; }
  fs::path Plant(const std::string& rel, size_t bytes, int64_t seconds_old) {
    const fs::path p = Home() / rel;
    fs::create_directories(p.parent_path());
    std::ofstream(p, std::ios::binary) << std::string(bytes, 'u');
    struct utimbuf t;
    t.actime = t.modtime = ::time(nullptr) - seconds_old;
    EXPECT_EQ(::utime(p.c_str(), &t), 0);
    return p;
  }
  static std::string ReadAll(const fs::path& p) {
    std::ifstream in(p, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), {});
  }
};

TEST_F(LeftoversCliTest, GcRemovesADeadWritersLeftoversAndKeepsALiveOnes) {
  ASSERT_EQ(Kestrel("gc").code, 0);  // the home and its store
  const std::string dead = DeadPid(), live = std::to_string(::getpid());
  const fs::path part = Plant("uploads/upload-" + dead + "-0.part", 4096, 0);
  const fs::path tmp = Plant("objects/ee/" + kSha + ".tmp-" + dead + "-3", 100, 0);
  const fs::path mine = Plant("uploads/upload-" + live + "-0.part", 10, 0);
  const json dry = Json(Kestrel("--json gc --dry-run --grace-s 0"));
  EXPECT_EQ(dry["leftovers"]["removed"], 2) << dry;
  EXPECT_TRUE(fs::exists(part));
  const json gc = Json(Kestrel("--json gc --grace-s 0"));
  EXPECT_EQ(gc["leftovers"]["removed"], 2) << gc;
  EXPECT_EQ(gc["leftovers"]["removed_bytes"], 4196) << gc;
  EXPECT_EQ(gc["leftovers"]["kept_running"], 1) << gc;
  EXPECT_EQ(gc["leftovers"]["removed_paths"], json::array({"objects/ee/" + kSha + ".tmp-" + dead + "-3",
                                                           "uploads/upload-" + dead + "-0.part"}));
  EXPECT_FALSE(fs::exists(part));
  EXPECT_FALSE(fs::exists(tmp));
  EXPECT_TRUE(fs::exists(mine)) << "its writer (this test) runs";
  const CliRun text = Kestrel("gc --grace-s 0");
  EXPECT_NE(
      text.out.find("leftovers of crashed writers (temp files and folders): removed 0 (0 B), 1 kept: their "
                    "writer runs"),
      std::string::npos)
      << text.out;
}

TEST_F(LeftoversCliTest, ServeRemovesOldLeftoversOfDeadWritersAndWarnsAboutAnOpenHome) {
  fs::create_directories(Home());
  ASSERT_EQ(::chmod(Home().c_str(), 0755), 0);
  const std::string dead = DeadPid();
  const fs::path part = Plant("uploads/upload-" + dead + "-0.part", 2048, 7200);
  const fs::path unpacked = Plant("uploads/import-" + dead + "-1/birds/a.jpg", 10, 7200);
  struct utimbuf old;
  old.actime = old.modtime = ::time(nullptr) - 7200;
  ASSERT_EQ(::utime(unpacked.parent_path().c_str(), &old), 0);
  ASSERT_EQ(::utime(unpacked.parent_path().parent_path().c_str(), &old), 0);
  const fs::path young = Plant("uploads/upload-" + dead + "-2.part", 10, 0);
  const fs::path job = Plant("jobs/1/last.ckpt.tmp-" + dead + "-0", 10, 7200);

  const fs::path err = dir_ / "serve.err";
  int fds[2];
  ASSERT_EQ(::pipe(fds), 0);
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::dup2(fds[1], 1);
    ::close(fds[0]);
    ::close(fds[1]);
    FILE* e = std::fopen(err.c_str(), "w");
    if (e != nullptr) ::dup2(::fileno(e), 2);
    ::execl(KESTREL_CLI, KESTREL_CLI, "--home", Home().c_str(), "serve", "--port", "0",
            static_cast<char*>(nullptr));
    ::_exit(127);
  }
  ::close(fds[1]);
  std::string line;
  char c = 0;
  while (::read(fds[0], &c, 1) == 1 && c != '\n') line += c;
  EXPECT_NE(line.find("listening on"), std::string::npos) << line;
  // Reclaimed before it listened.
  EXPECT_FALSE(fs::exists(part));
  EXPECT_FALSE(fs::exists(unpacked.parent_path().parent_path()));
  EXPECT_TRUE(fs::exists(young)) << "younger than 10 minutes";
  EXPECT_TRUE(fs::exists(job)) << "jobs/ is gc's";
  ::kill(pid, SIGTERM);
  int status = 0;
  ::waitpid(pid, &status, 0);
  ::close(fds[0]);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  const std::string log = ReadAll(err);
  EXPECT_NE(log.find("kestrel serve: removed 2 leftovers of crashed writers (2058 bytes): uploads/import-" +
                     dead + "-1 uploads/upload-" + dead + "-0.part"),
            std::string::npos)
      << log;
  EXPECT_NE(log.find("kestrel serve: warning: " + Home().string() +
                     " has mode 0755 (group/other may read it): chmod "
                     "700 " +
                     Home().string()),
            std::string::npos)
      << log;
  struct stat st {};
  ASSERT_EQ(::stat((Home() / "kestrel.db").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777u, 0600u) << "a new database is owner-only";
}

TEST_F(LeftoversCliTest, AFreshHomeIsOwnerOnly) {
  ::umask(022);
  ASSERT_EQ(Kestrel("gc").code, 0);
  struct stat st {};
  ASSERT_EQ(::stat(Home().c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777u, 0700u);
  ASSERT_EQ(::stat((Home() / "kestrel.db").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777u, 0600u);
}

}  // namespace
}  // namespace kestrel::testing
