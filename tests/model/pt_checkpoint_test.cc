// The .pt reader (model/pt_checkpoint.h), torch-free: genuine torch.save
// fixtures (tests/model/fixtures, made by make_pt_fixtures.py), the real
// Ultralytics checkpoint in ../shared/reference/val_parity (skipped when
// absent), and hostile archives and pickles built here byte by byte.
#include "model/pt_checkpoint.h"

#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include "core/env.h"
#include "core/safetensors.h"
#include "model/spec.h"
#include "zip_bytes.h"

namespace kestrel::model {
namespace {

const std::string kFixtures = std::string(KESTREL_SOURCE_DIR) + "/tests/model/fixtures";
const std::string kParity = std::string(KESTREL_SHARED_DIR) + "/reference/val_parity";

std::string Fixture(const std::string& name) {
  auto bytes = Env::Default().ReadFile(kFixtures + "/" + name);
  EXPECT_TRUE(bytes.IsOk()) << name;
  return bytes.IsOk() ? *bytes : "";
}

void Put16(std::string* s, uint32_t v) {
  s->push_back(static_cast<char>(v & 0xFF));
  s->push_back(static_cast<char>((v >> 8) & 0xFF));
}
void Put32(std::string* s, uint32_t v) {
  Put16(s, v & 0xFFFF);
  Put16(s, v >> 16);
}

// A stored zip like torch.save's: `entries` in order, names as given.
std::string MakeZip(const std::vector<std::pair<std::string, std::string>>& entries) {
  std::vector<testing::RawZipEntry> raw;
  for (const auto& [name, data] : entries) raw.push_back({name, data});
  return testing::RawZip(raw);
}

// An archive "a/" holding `pickle` as data.pkl plus storages.
std::string Archive(const std::string& pickle,
                    std::vector<std::pair<std::string, std::string>> storages = {}) {
  std::vector<std::pair<std::string, std::string>> entries = {{"a/data.pkl", pickle}};
  for (auto& [key, data] : storages) entries.emplace_back("a/data/" + key, data);
  entries.emplace_back("a/version", "3\n");
  return MakeZip(entries);
}

// Pickle text helpers (protocol 2 opcodes).
std::string Str(const std::string& s) {
  std::string out = "X";
  Put32(&out, static_cast<uint32_t>(s.size()));
  return out + s;
}
std::string Int(int32_t v) {
  std::string out = "J";
  Put32(&out, static_cast<uint32_t>(v));
  return out;
}
// {'model.0.conv.weight': _rebuild_tensor_v2(storage(key, numel), 0, shape, stride, False, OrderedDict())}
std::string OneTensorPickle(const std::string& storage_type, int64_t numel, const std::vector<int32_t>& shape,
                            const std::vector<int32_t>& stride) {
  std::string p = "\x80\x02}(" + Str("model.0.conv.weight");
  p += "ctorch._utils\n_rebuild_tensor_v2\n(";
  p += "(" + Str("storage") + "ctorch\n" + storage_type + "\n" + Str("0") + Str("cpu");
  // numel as LONG1 (8 bytes): huge values fit.
  p += std::string("\x8a\x08", 2);
  for (int k = 0; k < 8; ++k)
    p.push_back(static_cast<char>((static_cast<uint64_t>(numel) >> (8 * k)) & 0xFF));
  p += "tQ" + Int(0) + "(";
  for (int32_t d : shape) p += Int(d);
  p += "t(";
  for (int32_t d : stride) p += Int(d);
  p += "t\x89";
  p += "ccollections\nOrderedDict\n)R";
  p += "tRu.";
  return p;
}

Status Parse(const std::string& bytes, const PtReadLimits& limits = {}) {
  return ParsePtCheckpoint(bytes, "test.pt", limits).GetStatus();
}

float F32At(const SafeTensor& t, size_t i) {
  float v;
  std::memcpy(&v, t.data.data() + 4 * i, 4);
  return v;
}
int64_t I64At(const SafeTensor& t, size_t i) {
  int64_t v;
  std::memcpy(&v, t.data.data() + 8 * i, 8);
  return v;
}

// ---- genuine torch.save files ----

TEST(PtCheckpoint, StateDictViewsAreRebuiltContiguousAndWidened) {
  auto r = ParsePtCheckpoint(Fixture("state_dict_views.pt"), "state_dict_views.pt");
  ASSERT_TRUE(r.IsOk()) << r.GetStatus().ToString();
  EXPECT_EQ(r->source, "state_dict");
  const auto& t = r->weights.tensors;
  ASSERT_EQ(t.size(), 5u);
  // base = arange(24).reshape(4, 6) / 8 - 1; conv = base.half().t()[:, 1:3]
  auto base = [](int row, int col) { return static_cast<float>(row * 6 + col) / 8.0f - 1.0f; };
  const SafeTensor& conv = t.at("model.0.conv.weight");
  EXPECT_EQ(conv.dtype, "F32");
  EXPECT_EQ(conv.shape, (std::vector<int64_t>{6, 2}));
  for (int i = 0; i < 6; ++i) {
    for (int j = 0; j < 2; ++j)
      EXPECT_EQ(F32At(conv, static_cast<size_t>(i * 2 + j)), base(j + 1, i)) << i << "," << j;
  }
  const SafeTensor& w = t.at("model.0.bn.weight");  // bf16, storage offset 12
  EXPECT_EQ(w.shape, (std::vector<int64_t>{6}));
  for (int i = 0; i < 6; ++i) EXPECT_EQ(F32At(w, static_cast<size_t>(i)), base(2, i));
  const SafeTensor& b = t.at("model.0.bn.bias");  // f64, stride 6
  for (int i = 0; i < 4; ++i) EXPECT_EQ(F32At(b, static_cast<size_t>(i)), base(i, 5));
  const SafeTensor& n = t.at("model.0.bn.num_batches_tracked");
  EXPECT_EQ(n.dtype, "I64");
  EXPECT_TRUE(n.shape.empty());
  EXPECT_EQ(I64At(n, 0), 7);
  const SafeTensor& m = t.at("model.0.bn.running_mean");  // int8
  EXPECT_EQ(I64At(m, 0), -3);
  EXPECT_EQ(I64At(m, 1), 4);
}

TEST(PtCheckpoint, RefusesWhatIsNotAYolov8DetectionCheckpoint) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"unrelated_state_dict.pt", "state_dict of 2 tensors (first: 'fc.weight')"},
      {"classify_model.pt", "found ultralytics.nn.tasks.ClassificationModel"},
      {"segment_model.pt", "found ultralytics.nn.tasks.SegmentationModel"},
      {"plain_list.pt", "found a pickled list"},
      {"torchscript.pt", "TorchScript archive"},
      {"yolo11_like.pt",
       "layer 2 is ultralytics.nn.modules.block.C3k2 (YOLOv8 has ultralytics.nn.modules.block.C2f)"},
  };
  for (const auto& [file, want] : cases) {
    Status s = Parse(Fixture(file));
    EXPECT_EQ(s.Code(), StatusCode::kInvalidArgument) << file << ": " << s.ToString();
    EXPECT_NE(s.Message().find(want), std::string::npos) << file << ": " << s.ToString();
    if (file != "yolo11_like.pt" && file != "torchscript.pt") {
      EXPECT_NE(
          s.Message().find("Kestrel reads Ultralytics YOLOv8, YOLO11 and YOLOv5u detection checkpoints"),
          std::string::npos)
          << file;
    }
  }
}

TEST(PtCheckpoint, NeverResolvesCodeGlobals) {
  for (const std::string file : {"os_system.pt", "builtins_eval.pt"}) {
    Status s = Parse(Fixture(file));
    EXPECT_EQ(s.Code(), StatusCode::kInvalidArgument) << s.ToString();
    EXPECT_NE(s.Message().find("refusing pickle GLOBAL"), std::string::npos) << s.ToString();
    EXPECT_NE(s.Message().find(file == "os_system.pt" ? "system'" : "builtins.eval'"), std::string::npos)
        << s.ToString();
  }
  // The same by hand, with the names Python 2 pickles use.
  for (const std::string global :
       {"os\nsystem\n", "__builtin__\neval\n", "subprocess\nPopen\n", "torch\nload\n"}) {
    Status s = Parse(Archive("\x80\x02}(" + Str("model") + "c" + global + "(" + Str("id") + "tRu."));
    EXPECT_EQ(s.Code(), StatusCode::kInvalidArgument) << s.ToString();
    EXPECT_NE(s.Message().find("refusing pickle GLOBAL"), std::string::npos) << s.ToString();
  }
  // STACK_GLOBAL too.
  Status s = Parse(Archive("\x80\x04" + Str("os") + Str("system") + "\x93" + "(" + Str("id") + "tR."));
  EXPECT_NE(s.Message().find("refusing pickle GLOBAL 'os.system'"), std::string::npos) << s.ToString();
}

TEST(PtCheckpoint, SharedModuleDagIsBounded) {
  Status s = Parse(Fixture("module_dag.pt"));
  EXPECT_EQ(s.Code(), StatusCode::kResourceExhausted) << s.ToString();
  EXPECT_NE(s.Message().find("module tree"), std::string::npos) << s.ToString();
}

TEST(PtCheckpoint, HandBuiltTensorRoundTrip) {
  std::string data;
  for (float v : {1.5f, -2.0f, 3.25f, 4.0f, 5.0f, 6.0f}) data.append(reinterpret_cast<const char*>(&v), 4);
  // A [3, 2] view with strides (1, 3): the transpose of the [2, 3] storage.
  auto r =
      ParsePtCheckpoint(Archive(OneTensorPickle("FloatStorage", 6, {3, 2}, {1, 3}), {{"0", data}}), "x.pt");
  ASSERT_TRUE(r.IsOk()) << r.GetStatus().ToString();
  const SafeTensor& t = r->weights.tensors.at("model.0.conv.weight");
  const float want[] = {1.5f, 4.0f, -2.0f, 5.0f, 3.25f, 6.0f};
  for (size_t i = 0; i < 6; ++i) EXPECT_EQ(F32At(t, i), want[i]);
}

// {"train_args": {"imgsz": <imgsz>}, "model": {one tensor}}: the reference
// trainer's args beside a state dict (issue 28: the default imgsz).
std::string WithTrainArgs(const std::string& imgsz) {
  const std::string state = OneTensorPickle("FloatStorage", 1, {1}, {1});
  return "\x80\x02}(" + Str("train_args") + "}(" + Str("imgsz") + imgsz + "u" + Str("model") +
         state.substr(2, state.size() - 3) + "u.";
}

TEST(PtCheckpoint, TrainArgsImgszIsReadAsTheLongSide) {
  const std::string one(4, '\0');
  for (const auto& [imgsz, want] :
       std::vector<std::pair<std::string, int>>{{Int(320), 320},
                                                {"(" + Int(256) + Int(320) + "t", 320},
                                                {"]" + std::string("(") + Int(416) + "e", 416},
                                                {"N", 0}}) {
    auto r = ParsePtCheckpoint(Archive(WithTrainArgs(imgsz), {{"0", one}}), "x.pt");
    ASSERT_TRUE(r.IsOk()) << r.GetStatus().ToString();
    EXPECT_EQ(r->imgsz, want);
  }
  // No train_args at all (a bare state dict): 0, nothing recorded.
  auto bare = ParsePtCheckpoint(Archive(OneTensorPickle("FloatStorage", 1, {1}, {1}), {{"0", one}}), "x.pt");
  ASSERT_TRUE(bare.IsOk()) << bare.GetStatus().ToString();
  EXPECT_EQ(bare->imgsz, 0);
  // Not an image size: an error naming the field, never a silent 640.
  for (const std::string& bad : {Str("big"), Int(0), Int(-32), "(" + Int(1) + Int(2) + Int(3) + "t"}) {
    auto r = ParsePtCheckpoint(Archive(WithTrainArgs(bad), {{"0", one}}), "x.pt");
    ASSERT_FALSE(r.IsOk());
    EXPECT_EQ(r.GetStatus().Code(), StatusCode::kInvalidArgument);
    EXPECT_EQ(r.GetStatus().Where().field, "train_args.imgsz") << r.GetStatus().ToString();
  }
}

// ---- hostile input: always a clear error, never a crash or a huge allocation ----

TEST(PtCheckpointHostile, HugeDeclaredSizes) {
  const std::string four(16, '\0');
  // A storage that claims 2^62 elements but holds 16 bytes.
  Status s = Parse(Archive(OneTensorPickle("FloatStorage", int64_t{1} << 62, {4}, {1}), {{"0", four}}));
  EXPECT_EQ(s.Code(), StatusCode::kCorruption) << s.ToString();
  EXPECT_NE(s.Message().find("declares"), std::string::npos) << s.ToString();
  // A shape of 2^31-1 x 2^31-1 elements over 4.
  s = Parse(Archive(OneTensorPickle("FloatStorage", 4, {0x7FFFFFFF, 0x7FFFFFFF}, {1, 1}), {{"0", four}}));
  EXPECT_EQ(s.Code(), StatusCode::kCorruption) << s.ToString();
  // An expanded (stride 0) view: 2^30 elements from one.
  s = Parse(Archive(OneTensorPickle("FloatStorage", 1, {1 << 30}, {0}), {{"0", four}}));
  EXPECT_EQ(s.Code(), StatusCode::kCorruption) << s.ToString();
  EXPECT_NE(s.Message().find("expanded or shared views"), std::string::npos) << s.ToString();
  // A view past the end of its storage; a negative stride; a missing storage.
  s = Parse(Archive(OneTensorPickle("FloatStorage", 4, {2, 2}, {3, 1}), {{"0", four}}));
  EXPECT_NE(s.Message().find("past the end"), std::string::npos) << s.ToString();
  s = Parse(Archive(OneTensorPickle("FloatStorage", 4, {4}, {-1}), {{"0", four}}));
  EXPECT_NE(s.Message().find("negative"), std::string::npos) << s.ToString();
  s = Parse(Archive(OneTensorPickle("FloatStorage", 4, {4}, {1})));
  EXPECT_NE(s.Message().find("not in the archive"), std::string::npos) << s.ToString();
  // A string that claims 4 GB; an integer of 200 bytes; a memo key never stored.
  s = Parse(Archive(std::string("\x80\x02X\xff\xff\xff\xff", 7) + "abc"));
  EXPECT_EQ(s.Code(), StatusCode::kCorruption) << s.ToString();
  EXPECT_NE(s.Message().find("truncated"), std::string::npos) << s.ToString();
  s = Parse(Archive(std::string("\x80\x02\x8a\xc8", 4) + std::string(200, '\x01') + "."));
  EXPECT_NE(s.Message().find("wider than 64 bits"), std::string::npos) << s.ToString();
  s = Parse(Archive("\x80\x02h\x05."));
  EXPECT_NE(s.Message().find("never stored"), std::string::npos) << s.ToString();
  // A zip whose end record claims 65535 entries in a 46-byte directory.
  std::string zip = Archive("\x80\x02N.");
  zip[zip.size() - 12] = zip[zip.size() - 11] = zip[zip.size() - 14] = zip[zip.size() - 13] = '\xff';
  s = Parse(zip);
  EXPECT_FALSE(s.IsOk());
}

TEST(PtCheckpointHostile, DeepNestingAndReferenceBombsHitLimits) {
  // 5000 nested lists: ]]]...]aaa...a
  std::string deep = "\x80\x02" + std::string(5000, ']') + std::string(4999, 'a') + ".";
  Status s = Parse(Archive(deep));
  EXPECT_EQ(s.Code(), StatusCode::kResourceExhausted) << s.ToString();
  EXPECT_NE(s.Message().find("nests"), std::string::npos) << s.ToString();
  // A list appended to itself, again and again.
  std::string self("\x80\x02]q\x00", 5);
  for (int i = 0; i < 3000; ++i) self += std::string("h\x00", 2) + "a";
  s = Parse(Archive(self + "."));
  EXPECT_EQ(s.Code(), StatusCode::kResourceExhausted) << s.ToString();
  // 200k references to one value, against a small limit.
  std::string refs("\x80\x02Nq\x00(", 6);
  for (int i = 0; i < 200000; ++i) refs += std::string("h\x00", 2);
  refs += "l.";
  PtReadLimits small;
  small.max_nodes = 10000;
  s = Parse(Archive(refs), small);
  EXPECT_EQ(s.Code(), StatusCode::kResourceExhausted) << s.ToString();
  // Too many values; too many memo entries.
  std::string ints = "\x80\x02";
  for (int i = 0; i < 20000; ++i) ints += "K\x01";  // each int is a new value
  s = Parse(Archive(ints + "."), small);
  EXPECT_EQ(s.Code(), StatusCode::kResourceExhausted) << s.ToString();
  std::string memo = "\x80\x02N";
  for (int i = 0; i < 3000; ++i) memo += std::string("\x94");
  small.max_memo = 1000;
  s = Parse(Archive(memo + "."), small);
  EXPECT_EQ(s.Code(), StatusCode::kResourceExhausted) << s.ToString();
}

TEST(PtCheckpointHostile, TruncatedFlippedAndRandomBytes) {
  const std::string good = Fixture("state_dict_views.pt");
  ASSERT_TRUE(Parse(good).IsOk());
  for (size_t n = 0; n < good.size(); n += 7) {
    Status s = Parse(good.substr(0, n));
    EXPECT_FALSE(s.IsOk()) << "prefix " << n;
    EXPECT_FALSE(s.Message().empty());
  }
  std::mt19937 rng(7);
  for (int i = 0; i < 2000; ++i) {
    std::string bad = good;
    bad[rng() % bad.size()] ^= static_cast<char>(1 + rng() % 255);
    (void)Parse(bad);  // either fine or an error; the sanitizers and limits check the rest
  }
  for (int i = 0; i < 500; ++i) {
    std::string noise(rng() % 4096, '\0');
    for (char& c : noise) c = static_cast<char>(rng());
    if (i % 2) noise.replace(0, std::min<size_t>(4, noise.size()), std::string("PK\x03\x04", 4));
    EXPECT_FALSE(Parse(noise).IsOk());
  }
  EXPECT_NE(Parse("").Message().find("zip signature"), std::string::npos);
  // A legacy (torch < 1.6) file starts with a pickled magic number.
  EXPECT_NE(Parse(std::string("\x80\x02\x8a\x0a\x6c\xfc\x9c\x46\xf9\x20\x6a\xa8\x50\x19", 14))
                .Message()
                .find("legacy"),
            std::string::npos);
  // A flipped byte inside a storage is caught by the CRC.
  std::string crc = Archive(OneTensorPickle("FloatStorage", 1, {1}, {1}), {{"0", std::string(4, '\0')}});
  ASSERT_TRUE(Parse(crc).IsOk());
  crc[crc.find("a/data/0") + 8] = '\x01';
  EXPECT_NE(Parse(crc).Message().find("CRC"), std::string::npos);
}

TEST(PtCheckpoint, WeightsPathsAndMagic) {
  EXPECT_TRUE(IsWeightsPath("yolov8n.pt"));
  EXPECT_TRUE(IsWeightsPath("runs/x/best.PT"));
  EXPECT_TRUE(IsWeightsPath("w.safetensors"));
  EXPECT_FALSE(IsWeightsPath("yolov8n"));
  EXPECT_FALSE(IsWeightsPath("yolov8n.yaml"));
  EXPECT_TRUE(LooksLikeZip(std::string("PK\x03\x04rest", 8)));
  EXPECT_FALSE(LooksLikeZip("PK"));
  // A .pt that is not a zip gets a .pt error, not a safetensors one.
  const std::string path = ::testing::TempDir() + "/not_a_zip.pt";
  ASSERT_TRUE(Env::Default().WriteFileAtomic(path, "hello, world").IsOk());
  auto r = ReadWeightsFile(path);
  ASSERT_FALSE(r.IsOk());
  EXPECT_NE(r.GetStatus().Message().find("zip signature"), std::string::npos) << r.GetStatus().ToString();
}

// model=yolov8n.pt as the reference framework takes it (it would download
// the file): every command reads weights through ReadWeightsFile, whose
// error says nothing is downloaded, what was looked for and where, and the
// model=<name>.yaml alternative.
TEST(PtCheckpoint, MissingReferenceWeightsSayNothingIsDownloaded) {
  for (const char* model : {"yolov8n.pt", "no_such_dir_d7/yolo11s.pt", "yolov5nu.pt"}) {
    auto r = ReadWeightsFile(model);
    ASSERT_FALSE(r.IsOk());
    const Status& s = r.GetStatus();
    EXPECT_EQ(s.Code(), StatusCode::kNotFound) << s.ToString();
    EXPECT_EQ(s.Where().field, "model");
    const std::string stem = std::filesystem::path(model).stem().string();
    const std::string abs = std::filesystem::absolute(model).lexically_normal().string();
    for (const std::string& want :
         {std::string("no such file"), "looked for '" + abs + "'", std::string("Nothing is downloaded"),
          std::string("models register"), "model=" + stem + ".yaml"}) {
      EXPECT_NE(s.Message().find(want), std::string::npos) << want << ": " << s.ToString();
    }
    EXPECT_EQ(ReadWeightsInfo(model).GetStatus().Message(), s.Message())
        << "the same through ReadWeightsInfo";
  }
  // A name that is no known model gets no .yaml suggestion.
  auto other = ReadWeightsFile("my_weights_d7.pt");
  ASSERT_FALSE(other.IsOk());
  EXPECT_EQ(other.GetStatus().Message().find(".yaml"), std::string::npos) << other.GetStatus().ToString();
}

// ---- the real Ultralytics 8.3 checkpoint ----

TEST(PtCheckpointReference, UltralyticsCheckpointEqualsItsSafetensorsExport) {
  const std::string pt = kParity + "/yolov8n_shapes_p.pt", st = kParity + "/yolov8n_shapes_p.safetensors";
  if (!Env::Default().Stat(pt).exists || !Env::Default().Stat(st).exists) {
    GTEST_SKIP() << "../shared/reference/val_parity not present";
  }
  auto ckpt = ReadPtCheckpoint(pt);
  ASSERT_TRUE(ckpt.IsOk()) << ckpt.GetStatus().ToString();
  EXPECT_EQ(ckpt->model_class, "ultralytics.nn.tasks.DetectionModel");
  EXPECT_EQ(ckpt->scale, "n");
  EXPECT_EQ(ckpt->nc, 3);
  EXPECT_EQ(ckpt->names, (std::vector<std::string>{"circle", "rectangle", "triangle"}));
  EXPECT_EQ(ckpt->ultralytics_version, "8.3.112");
  EXPECT_EQ(ckpt->imgsz, 320);  // its train_args: the size val/predict/export default to
  auto ref = ReadSafeTensorsFile(st);
  ASSERT_TRUE(ref.IsOk()) << ref.GetStatus().ToString();
  ASSERT_EQ(ckpt->weights.tensors.size(), ref->tensors.size());
  for (const auto& [name, want] : ref->tensors) {
    auto it = ckpt->weights.tensors.find(name);
    ASSERT_NE(it, ckpt->weights.tensors.end()) << name;
    EXPECT_EQ(it->second.dtype, want.dtype) << name;
    EXPECT_EQ(it->second.shape, want.shape) << name;
    EXPECT_TRUE(it->second.data == want.data) << name << ": values differ";
  }
  // The same through the format-sniffing reader and the weights info.
  auto file = ReadWeightsFile(pt);
  ASSERT_TRUE(file.IsOk()) << file.GetStatus().ToString();
  EXPECT_EQ(file->metadata.at("format"), "ultralytics.pt");
  EXPECT_EQ(file->metadata.at("imgsz"), "320");
  auto recorded = ReadRecordedImgsz(pt);
  ASSERT_TRUE(recorded.IsOk()) << recorded.GetStatus().ToString();
  EXPECT_EQ(*recorded, 320);
  auto info = ReadWeightsInfo(pt);
  ASSERT_TRUE(info.IsOk()) << info.GetStatus().ToString();
  EXPECT_EQ(info->spec.Name(), "yolov8n");
  EXPECT_EQ(info->spec.nc, 3);
  EXPECT_EQ(info->names, (std::vector<std::string>{"circle", "rectangle", "triangle"}));
  // Cut anywhere, it is an error (never a crash).
  auto bytes = Env::Default().ReadFile(pt);
  ASSERT_TRUE(bytes.IsOk());
  for (size_t n : {size_t{0}, size_t{100}, bytes->size() / 2, bytes->size() - 23, bytes->size() - 1}) {
    EXPECT_FALSE(Parse(bytes->substr(0, n)).IsOk()) << n;
  }
}

}  // namespace
}  // namespace kestrel::model
