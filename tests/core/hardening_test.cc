// The core helpers that keep hostile input from aborting the process:
// UTF-8 checks and escaping, DumpJson, range-checked number parsing, the
// header-only safetensors check and StagedDir.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <thread>

#include "core/env.h"
#include "core/json.h"
#include "core/parse.h"
#include "core/safetensors.h"
#include "core/staged_dir.h"
#include "core/terminate.h"
#include "core/utf8.h"

namespace kestrel {
namespace {

namespace fs = std::filesystem;

TEST(Utf8Test, AcceptsValidAndFindsTheFirstBadByte) {
  EXPECT_TRUE(IsValidUtf8(""));
  EXPECT_TRUE(IsValidUtf8("plain ascii"));
  EXPECT_TRUE(IsValidUtf8("caf\xC3\xA9 \xE2\x82\xAC \xF0\x9F\x98\x80"));  // é € 😀
  EXPECT_TRUE(IsValidUtf8("\xF4\x8F\xBF\xBF"));                           // U+10FFFF
  EXPECT_EQ(FirstInvalidUtf8("ab\xFF"), 2u);
  EXPECT_EQ(FirstInvalidUtf8("\x80"), 0u);                                           // lone continuation
  EXPECT_EQ(FirstInvalidUtf8("\xC0\xAF"), 0u);                                       // overlong '/'
  EXPECT_EQ(FirstInvalidUtf8("\xE0\x80\xAF"), 0u);                                   // overlong 3-byte
  EXPECT_EQ(FirstInvalidUtf8("x\xED\xA0\x80"), 1u);                                  // surrogate U+D800
  EXPECT_EQ(FirstInvalidUtf8("\xF4\x90\x80\x80"), 0u);                               // above U+10FFFF
  EXPECT_EQ(FirstInvalidUtf8("\xE2\x82"), 0u);                                       // truncated
  EXPECT_EQ(FirstInvalidUtf8(std::string_view("a\0b", 3)), std::string_view::npos);  // NUL is valid UTF-8
}

TEST(Utf8Test, EscapesEveryBadByteAndKeepsTheRest) {
  EXPECT_EQ(EscapeInvalidUtf8("ok \xC3\xA9"), "ok \xC3\xA9");
  EXPECT_EQ(EscapeInvalidUtf8("a\xFF"
                              "b"),
            "a\\xFFb");
  EXPECT_EQ(EscapeInvalidUtf8("\xE2\x82"
                              "x\xC3\xA9"),
            "\\xE2\\x82x\xC3\xA9");
  EXPECT_TRUE(IsValidUtf8(EscapeInvalidUtf8("\xFF\xFE\xED\xA0\x80\xC0")));
}

TEST(Utf8Test, EscapeForDisplayAlsoShowsControlCharacters) {
  EXPECT_EQ(EscapeForDisplay("plain caf\xC3\xA9"), "plain caf\xC3\xA9");
  EXPECT_EQ(EscapeForDisplay(std::string("a\0b\tc", 5)), "a\\x00b\\x09c");
  EXPECT_EQ(EscapeForDisplay("a\x7F\xFF"
                             "b"),
            "a\\x7F\\xFFb");
  EXPECT_EQ(EscapeInvalidUtf8("a\tb"), "a\tb")
      << "the JSON escaper keeps control characters (JSON escapes them)";
}

TEST(DumpJsonTest, MatchesDumpForValidDocuments) {
  nlohmann::json j = {{"name", "caf\xC3\xA9"}, {"n", 3}, {"list", {1, 2.5, nullptr, true}}};
  EXPECT_EQ(DumpJson(j), j.dump());
  EXPECT_EQ(DumpJson(j, 2), j.dump(2));
}

TEST(DumpJsonTest, NeverThrowsOnInvalidUtf8AndEscapesIt) {
  nlohmann::json j = {
      {"path", "/data/\xFF\xFE.jpg"}, {"nested", {{"k\xC0", {"ok", "bad\x80"}}}}, {"fine", "\xE2\x82\xAC"}};
  EXPECT_THROW((void)j.dump(), nlohmann::json::type_error);  // what DumpJson protects against
  std::string out;
  ASSERT_NO_THROW(out = DumpJson(j, 1));
  auto back = nlohmann::json::parse(out);  // valid UTF-8 JSON again
  EXPECT_EQ(back["path"], "/data/\\xFF\\xFE.jpg");
  EXPECT_EQ(back["nested"]["k\\xC0"][1], "bad\\x80");
  EXPECT_EQ(back["fine"], "\xE2\x82\xAC");
}

TEST(ParseTest, IntegersAreWholeAndRangeChecked) {
  const ErrorLocation where{"command line", 0, "id"};
  EXPECT_EQ(*ParseInt64("42", where), 42);
  EXPECT_EQ(*ParseInt64("-7", where), -7);
  EXPECT_EQ(*ParseInt64("9223372036854775807", where), INT64_MAX);
  for (const char* bad : {"", " 1", "1 ", "+1", "1.0", "0x10", "12abc", "\xFF"}) {
    auto r = ParseInt64(bad, where);
    ASSERT_FALSE(r.IsOk()) << bad;
    EXPECT_EQ(r.GetStatus().Code(), StatusCode::kInvalidArgument);
    EXPECT_EQ(r.GetStatus().Where().field, "id");
    EXPECT_EQ(r.GetStatus().Where().file, "command line");
  }
  auto big = ParseInt64("99999999999999999999", where, 1);
  ASSERT_FALSE(big.IsOk());
  EXPECT_NE(big.GetStatus().Message().find("out of range [1, 9223372036854775807]"), std::string::npos)
      << big.GetStatus().ToString();
  auto low = ParseInt64("0", where, 1, 10);
  ASSERT_FALSE(low.IsOk());
  EXPECT_NE(low.GetStatus().Message().find("'0' is out of range [1, 10]"), std::string::npos);
  EXPECT_NE(ParseInt64("x", where, 0, 5, "a job id")
                .GetStatus()
                .Message()
                .find("expected a job id in [0, 5], got 'x'"),
            std::string::npos);
  // Invalid bytes in the text are escaped in the message (it goes to JSON).
  EXPECT_TRUE(IsValidUtf8(ParseInt64("\xFF", where).GetStatus().Message()));
}

TEST(ParseTest, DoublesAreFiniteAndRangeChecked) {
  const ErrorLocation where{"", 0, "conf"};
  EXPECT_DOUBLE_EQ(*ParseFiniteDouble("0.25", where, 0, 1), 0.25);
  EXPECT_DOUBLE_EQ(*ParseFiniteDouble("1e3", where), 1000.0);
  for (const char* bad : {"", "nan", "inf", "-inf", "1e999", "0.5x", " 0.5", "2"}) {
    EXPECT_FALSE(ParseFiniteDouble(bad, where, 0, 1).IsOk()) << bad;
  }
}

class CoreFilesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("kestrel_core_" + std::string(::testing::UnitTest::GetInstance()->current_test_info()->name()) +
            "_" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string P(const std::string& rel) const { return (dir_ / rel).string(); }
  void Write(const std::string& rel, const std::string& bytes) {
    fs::create_directories((dir_ / rel).parent_path());
    std::ofstream(dir_ / rel, std::ios::binary) << bytes;
  }
  // Entries of the test folder whose name contains `part`.
  int Count(const std::string& part) const {
    int n = 0;
    for (const auto& e : fs::directory_iterator(dir_))
      n += e.path().filename().string().find(part) != std::string::npos;
    return n;
  }
  fs::path dir_;
};

TEST_F(CoreFilesTest, SafeTensorsHeaderIsCheckedWithoutTheTensorBytes) {
  SafeTensorFile f;
  f.tensors["w"] = SafeTensor{"F32", {2, 3}, std::string(24, '\1')};
  f.metadata["format"] = "kestrel-checkpoint";
  Write("ok.safetensors", SerializeSafeTensors(f));
  auto h = ReadSafeTensorsHeader(P("ok.safetensors"));
  ASSERT_TRUE(h.IsOk()) << h.GetStatus().ToString();
  EXPECT_EQ(h->tensors.at("w").shape, (std::vector<int64_t>{2, 3}));
  EXPECT_TRUE(h->tensors.at("w").data.empty());
  EXPECT_EQ(h->metadata.at("format"), "kestrel-checkpoint");

  std::string cut = SerializeSafeTensors(f);
  cut.resize(cut.size() - 1);  // the tensor no longer fits in the file
  Write("cut.safetensors", cut);
  EXPECT_EQ(ReadSafeTensorsHeader(P("cut.safetensors")).GetStatus().Code(), StatusCode::kCorruption);
  Write("text.safetensors", "root:x:0:0:root:/root:/bin/bash\n");  // like /etc/passwd
  EXPECT_EQ(ReadSafeTensorsHeader(P("text.safetensors")).GetStatus().Code(), StatusCode::kCorruption);
  Write("tiny.safetensors", "abc");
  EXPECT_EQ(ReadSafeTensorsHeader(P("tiny.safetensors")).GetStatus().Code(), StatusCode::kCorruption);
  EXPECT_EQ(ReadSafeTensorsHeader(P("missing.safetensors")).GetStatus().Code(), StatusCode::kNotFound);
  auto folder = ReadSafeTensorsHeader(dir_.string());
  EXPECT_EQ(folder.GetStatus().Code(), StatusCode::kInvalidArgument);
  EXPECT_NE(folder.GetStatus().Message().find("folder"), std::string::npos);
}

TEST(SafeTensorsUtf8Test, MetadataWithStrayBytesSerializesEscaped) {
  SafeTensorFile f;
  f.tensors["w"] = SafeTensor{"U8", {1}, std::string(1, '\0')};
  f.metadata["names"] = "[\"caf\xE9\"]";  // a Latin-1 class name
  std::string bytes;
  ASSERT_NO_THROW(bytes = SerializeSafeTensors(f));
  auto back = ParseSafeTensors(bytes, "mem");
  ASSERT_TRUE(back.IsOk()) << back.GetStatus().ToString();
  EXPECT_EQ(back->metadata.at("names"), "[\"caf\\xE9\"]");
}

TEST_F(CoreFilesTest, StagedDirAppearsOnlyWhenCommitted) {
  Env& env = Env::Default();
  {
    auto out = StagedDir::Create(env, P("runs/val"));
    ASSERT_TRUE(out.IsOk()) << out.GetStatus().ToString();
    ASSERT_TRUE(env.WriteFileAtomic(JoinPath(out->Path(), "plot.png"), "png").IsOk());
    EXPECT_FALSE(fs::exists(P("runs/val"))) << "visible before Commit";
    // Destroyed without Commit (an error path): nothing is left at all.
  }
  EXPECT_FALSE(fs::exists(P("runs/val")));
  EXPECT_TRUE(fs::is_empty(P("runs"))) << "the staging folder was left behind";

  auto out = StagedDir::Create(env, P("runs/val"));
  ASSERT_TRUE(out.IsOk());
  EXPECT_NE(out->Path().find("runs/val.kestrel-tmp-"), std::string::npos) << out->Path();
  ASSERT_TRUE(env.CreateDirs(JoinPath(out->Path(), "labels")).IsOk());
  ASSERT_TRUE(env.WriteFileAtomic(JoinPath(out->Path(), "labels/a.txt"), "1").IsOk());
  ASSERT_TRUE(env.WriteFileAtomic(JoinPath(out->Path(), "result.json"), "{}").IsOk());
  ASSERT_TRUE(out->Commit({"result.json"}).IsOk());
  EXPECT_TRUE(fs::exists(P("runs/val/labels/a.txt")));
  EXPECT_TRUE(fs::exists(P("runs/val/result.json")));
  EXPECT_FALSE(out->Commit().IsOk()) << "a second Commit";
}

TEST_F(CoreFilesTest, StagedDirCommitFreshNeverMixesWithExistingContent) {
  Env& env = Env::Default();
  // Onto an absent folder, and onto an empty one (rename replaces it).
  for (const std::string name : {"absent", "empty"}) {
    if (name == "empty") fs::create_directories(dir_ / name);
    auto out = StagedDir::Create(env, P(name));
    ASSERT_TRUE(out.IsOk());
    ASSERT_TRUE(env.WriteFileAtomic(JoinPath(out->Path(), "data.yaml"), "names: [a]").IsOk());
    ASSERT_TRUE(out->CommitFresh().IsOk()) << name;
    EXPECT_EQ(*env.ReadFile(P(name + "/data.yaml")), "names: [a]");
  }
  // A folder that filled up meanwhile (or a file) is refused and untouched;
  // the staging folder goes away with the StagedDir.
  Write("full/notes.txt", "precious");
  Write("afile", "precious");
  for (const std::string name : {"full", "afile"}) {
    {
      auto out = StagedDir::Create(env, P(name));
      ASSERT_TRUE(out.IsOk());
      ASSERT_TRUE(env.WriteFileAtomic(JoinPath(out->Path(), "data.yaml"), "x").IsOk());
      Status s = out->CommitFresh();
      EXPECT_EQ(s.Code(), StatusCode::kAlreadyExists) << name << ": " << s.ToString();
    }
    EXPECT_EQ(Count("kestrel-tmp"), 0) << name;
  }
  EXPECT_EQ(*env.ReadFile(P("full/notes.txt")), "precious");
  EXPECT_FALSE(fs::exists(P("full/data.yaml")));
  EXPECT_EQ(*env.ReadFile(P("afile")), "precious");
  EXPECT_TRUE(RequireEmptyOrAbsent(env, P("nothing")).IsOk());
  EXPECT_EQ(RequireEmptyOrAbsent(env, P("full/"), StatusCode::kFailedPrecondition).Code(),
            StatusCode::kFailedPrecondition);
}

TEST_F(CoreFilesTest, StagedDirMergesIntoAnExistingFolder) {
  Env& env = Env::Default();
  Write("run/old.txt", "old");
  Write("run/labels/keep.txt", "keep");
  Write("run/result.json", "old");
  auto out = StagedDir::Create(env, P("run/"));
  ASSERT_TRUE(out.IsOk());
  ASSERT_TRUE(env.CreateDirs(JoinPath(out->Path(), "labels")).IsOk());
  ASSERT_TRUE(env.WriteFileAtomic(JoinPath(out->Path(), "labels/new.txt"), "new").IsOk());
  ASSERT_TRUE(env.WriteFileAtomic(JoinPath(out->Path(), "result.json"), "new").IsOk());
  ASSERT_TRUE(out->Commit({"result.json"}).IsOk());
  EXPECT_EQ(*env.ReadFile(P("run/result.json")), "new");
  EXPECT_EQ(*env.ReadFile(P("run/labels/new.txt")), "new");
  EXPECT_EQ(*env.ReadFile(P("run/labels/keep.txt")), "keep");
  EXPECT_EQ(*env.ReadFile(P("run/old.txt")), "old");
  EXPECT_EQ(Count("kestrel-tmp"), 0);
}

TEST(TerminateTest, AnExceptionEscapingAThreadExitsWith1AndSaysWhat) {
  EXPECT_EXIT(
      {
        InstallTerminateHandler();
        std::thread t([] { throw std::out_of_range("stoll"); });
        t.join();
      },
      ::testing::ExitedWithCode(1), "internal error: uncaught exception: stoll");
}

// The wording is the one the server's 500s and log lines use as well
// (http_server.cc: HttpLimitsTest's ThrowingHandlerTest asserts it there).
TEST(TerminateTest, DescribeExceptionSaysWhatAnyThrownValueSays) {
  EXPECT_EQ(DescribeException(std::make_exception_ptr(std::runtime_error("disk full"))), "disk full");
  EXPECT_EQ(DescribeException(std::make_exception_ptr(42)), "an exception that is not a std::exception");
  EXPECT_EQ(DescribeException(nullptr), "no exception");
}

TEST(TerminateTest, ANonStandardExceptionEscapingAThreadIsDescribedToo) {
  EXPECT_EXIT(
      {
        InstallTerminateHandler();
        std::thread t([] { throw 42; });
        t.join();
      },
      ::testing::ExitedWithCode(1),
      "internal error: uncaught exception: an exception that is not a std::exception");
}

void ReportToStderrWithPrefix(const std::string& what) {
  std::cerr << "custom report: " << what << std::endl;
}

TEST(TerminateTest, UsesTheReporterAndCoversTerminateWithoutException) {
  EXPECT_EXIT(
      {
        InstallTerminateHandler(&ReportToStderrWithPrefix);
        std::terminate();
      },
      ::testing::ExitedWithCode(1), "custom report: std::terminate called without an active exception");
}

}  // namespace
}  // namespace kestrel
