// The hostile-argument invariants beyond the per-command sweep
// (hostile_args_test.cc): usage errors as JSON naming the word, bytes that
// are not UTF-8 in the output, `submit` validating every key as `train`
// does, and a missing CUDA device refused before anything runs.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "hostile_args_fixture.h"

namespace kestrel::testing {
namespace {

TEST_F(HostileArgsTest, UsageErrorsAreJsonAndNameTheWord) {
  for (const std::vector<std::string>& args :
       std::vector<std::vector<std::string>>{{"--json", "frobnicate"}, {"--json", "dataset", "frobnicate"}}) {
    Ran r = Run(args);
    EXPECT_EQ(r.code, 2);
    auto doc = CheckInvariants(args, r, true);
    EXPECT_EQ(doc["error"]["code"], "usage") << doc.dump();
    EXPECT_NE(doc["error"]["message"].get<std::string>().find("unknown command 'frobnicate'"),
              std::string::npos)
        << doc.dump();
  }
  // Without --json the message goes to stderr and stdout stays empty.
  Ran text = Run({"frobnicate"});
  EXPECT_EQ(text.code, 2);
  EXPECT_TRUE(text.out.empty()) << text.out;
  EXPECT_NE(text.err.find("unknown command 'frobnicate'"), std::string::npos) << text.err;
  // A typo gets a hint; a missing command lists the choices.
  Ran typo = Run({"--json", "dataset", "lsit"});
  EXPECT_NE(typo.out.find("did you mean 'list'"), std::string::npos) << typo.out;
  Ran missing = Run({"--json", "jobs"});
  EXPECT_EQ(missing.code, 2);
  EXPECT_NE(CheckInvariants({"--json", "jobs"}, missing, true)["error"]["message"].get<std::string>().find(
                "cancel"),
            std::string::npos);
  // CLI11's own errors (missing option, bad choice, extra arguments) too.
  for (const std::vector<std::string>& args :
       std::vector<std::vector<std::string>>{{"--json", "dataset", "import", "ds"},
                                             {"--json", "dataset", "export", "d", "--format", "xml", "o"},
                                             {"--json", "dataset", "list", "extra"},
                                             {"dataset", "list", "--json", "extra"}}) {
    Ran r = Run(args);
    EXPECT_EQ(r.code, 2) << Shown(args);
    EXPECT_EQ(CheckInvariants(args, r, true)["error"]["code"], "usage") << Shown(args);
  }
  // Help and version are one document too.
  Ran help = Run({"--json", "--help"});
  EXPECT_EQ(help.code, 0);
  EXPECT_NE(CheckInvariants({"--json", "--help"}, help, true)["help"].get<std::string>().find("dataset"),
            std::string::npos);
  Ran version = Run({"--json", "--version"});
  EXPECT_EQ(version.code, 0);
  EXPECT_TRUE(CheckInvariants({"--json", "--version"}, version, true)["version"].is_string());
}

TEST_F(HostileArgsTest, InvalidUtf8InOutputIsEscapedNotFatal) {
  // A dataset name that is not UTF-8 reaches the JSON error message.
  Ran r = Run({"--json", "dataset", "show", "d\xFF"});
  EXPECT_EQ(r.code, 1);
  auto doc = CheckInvariants({"--json", "dataset", "show", "d\xFF"}, r, true);
  EXPECT_NE(doc["error"]["message"].get<std::string>().find("d\\xFF"), std::string::npos) << doc.dump();
}

TEST_F(HostileArgsTest, SubmitValidatesEveryKeyLikeTrainAndStoresNothing) {
  Write("w.safetensors", "not a safetensors file at all");
  const std::vector<std::pair<std::string, std::string>> bad = {
      {"model=zzz", "model"},
      {"model=../../../etc/passwd", "model"},
      {"imgsz=1048576", "imgsz"},
      {"pretrained=/etc/passwd", "pretrained"},
      {"pretrained=" + (dir_ / "missing.safetensors").string(), "pretrained"},
      {"pretrained=" + (dir_ / "w.safetensors").string(), "pretrained"},
      {"device=" + kHugeInt, "device"},
  };
  for (const auto& [arg, key] : bad) {
    // submit's device key is the job's (cpu or a GPU index): give it gpu_mem.
    std::vector<std::string> submit = {"--json", "submit", "data=d", "epochs=1", arg};
    if (key == "device") submit.push_back("gpu_mem=100");
    Ran s = Run(submit);
    EXPECT_EQ(s.code, 2) << arg << ": " << s.out;
    auto doc = CheckInvariants(submit, s, true);
    EXPECT_EQ(doc["error"]["code"], "usage") << arg;
    EXPECT_EQ(doc["error"]["field"], key) << arg << ": " << doc.dump();
    const std::string msg =
        doc["error"]["message"].is_string() ? doc["error"]["message"].get<std::string>() : "";
    if (key == "pretrained") {
      EXPECT_NE(msg.find("pretrained="), std::string::npos) << msg;
    }
    // Text mode names the key on stderr.
    Ran t = Run({"submit", "data=d", "epochs=1", arg});
    EXPECT_EQ(t.code, 2) << arg;
    EXPECT_NE(t.err.find(key), std::string::npos) << arg << ": " << t.err;
#ifdef KESTREL_CLI_WITH_TORCH
    // `train` refuses the same keys with the same text (device is a train key there).
    if (key != "device") {
      std::vector<std::string> train = {"--json",   "train", "data=d",
                                        "epochs=1", arg,     "project=" + (dir_ / "runs").string()};
      Ran tr = Run(train);
      EXPECT_EQ(tr.code, 2) << arg << ": " << tr.out;
      auto tdoc = CheckInvariants(train, tr, true);
      EXPECT_EQ(tdoc["error"]["field"], key) << arg;
      EXPECT_EQ(tdoc["error"]["message"], doc["error"]["message"]) << arg << ": train and submit disagree";
    }
#endif
  }
  EXPECT_EQ(Json(Kestrel("--json jobs list"))["jobs"].size(), 0u) << "a refused job was stored";
  EXPECT_FALSE(fs::exists(dir_ / "runs")) << "train wrote a run folder for a refused config";
  // A valid job is still accepted.
  Ran ok = Run({"--json", "submit", "data=d", "epochs=1", "model=n", "imgsz=64"});
  EXPECT_EQ(ok.code, 0) << ok.out << ok.err;
  EXPECT_EQ(Json(Kestrel("--json jobs list"))["jobs"].size(), 1u);
}

#ifdef KESTREL_CLI_WITH_TORCH
// device= names a CUDA device this machine does not have: train, val model=
// and predict refuse it before reading or writing anything, exit 2, naming
// the key. Index 1023 is missing everywhere (no CUDA: "not available"; a GPU
// machine: "no such CUDA device"); on a build without CUDA, device=0 too,
// with the exact text.
TEST_F(HostileArgsTest, MissingCudaDeviceIsAUsageErrorBeforeAnythingRuns) {
  const std::string runs = (dir_ / "runs").string();
  bool no_cuda = false;
  for (const std::vector<std::string>& args : std::vector<std::vector<std::string>>{
           {"--json", "train", "data=d", "epochs=1", "imgsz=64", "device=1023", "project=" + runs},
           {"--json", "val", "data=d", "model=" + (dir_ / "m.safetensors").string(), "device=cuda:1023"},
           {"--json", "predict", "model=m", "source=" + (dir_ / "ds").string(), "device=1023"}}) {
    Ran r = Run(args);
    EXPECT_EQ(r.code, 2) << Shown(args) << ": " << r.out << r.err;
    auto doc = CheckInvariants(args, r, true);
    if (!doc.is_object()) continue;
    EXPECT_EQ(doc["error"]["code"], "usage") << doc.dump();
    EXPECT_EQ(doc["error"]["field"], "device") << doc.dump();
    const std::string msg = doc["error"].value("message", "");
    EXPECT_NE(msg.find("1023: "), std::string::npos) << msg;
    const bool not_available = msg.find("CUDA is not available") != std::string::npos;
    EXPECT_TRUE(not_available || msg.find("no such CUDA device") != std::string::npos) << msg;
    no_cuda = no_cuda || not_available;
  }
  if (no_cuda) {
    const std::vector<std::string> zero = {"--json",   "train",    "data=d",
                                           "epochs=1", "device=0", "project=" + runs};
    Ran r = Run(zero);
    EXPECT_EQ(r.code, 2) << r.out << r.err;
    auto doc = CheckInvariants(zero, r, true);
    EXPECT_EQ(doc["error"]["message"],
              "device=0: CUDA is not available (LibTorch built without CUDA or no GPU)")
        << doc.dump();
    Ran text = Run({"train", "data=d", "epochs=1", "device=cuda:0", "project=" + runs});
    EXPECT_EQ(text.code, 2);
    EXPECT_NE(text.err.find("device=cuda:0: CUDA is not available"), std::string::npos) << text.err;
  }
  EXPECT_FALSE(fs::exists(dir_ / "runs")) << "a refused device wrote a run folder";
}
#endif

}  // namespace
}  // namespace kestrel::testing
