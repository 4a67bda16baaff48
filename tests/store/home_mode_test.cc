// The Kestrel home is its owner's alone (store/private_files.h, docs/disk.md
// "Permissions", issue 26 item 11): under umask 022 (and 0 and 077) a fresh
// home, its SQLite database with -wal/-shm and the artifact store's
// objects/ are created without group/other bits; an existing home keeps its
// mode and a wider one is warned about, naming the path and the mode.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <string>

#include "store/artifact_store.h"
#include "store/local_artifact_store.h"
#include "store/metadata_store.h"
#include "store/private_files.h"

namespace kestrel::store {
namespace {

namespace fs = std::filesystem;

unsigned ModeOf(const fs::path& p) {
  struct stat st {};
  EXPECT_EQ(::stat(p.c_str(), &st), 0) << p;
  return st.st_mode & 07777u;
}

class HomeModeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::string name = ::testing::UnitTest::GetInstance()->current_test_info()->name();
    dir_ = fs::temp_directory_path() / ("kestrel_home_mode_" + std::to_string(::getpid()) + "_" + name);
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    old_umask_ = ::umask(022);
  }
  void TearDown() override {
    ::umask(old_umask_);
    fs::remove_all(dir_);
  }
  fs::path dir_;
  mode_t old_umask_ = 0;
};

TEST_F(HomeModeTest, AFreshHomeDatabaseAndBlobStoreAreOwnerOnlyWhateverTheUmask) {
  for (mode_t mask : {mode_t{022}, mode_t{0}, mode_t{077}}) {
    ::umask(mask);
    const fs::path home = dir_ / ("home" + std::to_string(mask));
    {
      auto meta = MetadataStore::Open(MetadataUrl(home.string()));
      ASSERT_TRUE(meta.IsOk()) << meta.GetStatus().ToString();
      // Migrations wrote: the WAL and its index exist while the store is open.
      EXPECT_EQ(ModeOf(home), 0700u) << "umask " << mask;
      EXPECT_EQ(ModeOf(home / "kestrel.db"), 0600u) << "umask " << mask;
      ASSERT_TRUE(fs::exists(home / "kestrel.db-wal"));
      EXPECT_EQ(ModeOf(home / "kestrel.db-wal"), 0600u) << "umask " << mask;
      ASSERT_TRUE(fs::exists(home / "kestrel.db-shm"));
      EXPECT_EQ(ModeOf(home / "kestrel.db-shm"), 0600u) << "umask " << mask;
      EXPECT_TRUE(HomeModeWarnings(home.string()).empty());
    }
    // The blob store alone may create the home too.
    const fs::path blobs_home = dir_ / ("blobs" + std::to_string(mask));
    LocalArtifactStore blobs(blobs_home.string());
    ASSERT_TRUE(blobs.Put("bytes").IsOk());
    EXPECT_EQ(ModeOf(blobs_home), 0700u) << "umask " << mask;
    EXPECT_EQ(ModeOf(blobs_home / "objects"), 0700u) << "umask " << mask;
    EXPECT_TRUE(HomeModeWarnings(blobs_home.string()).empty());
  }
}

TEST_F(HomeModeTest, AnExistingWideHomeIsWarnedAboutAndLeftAsItIs) {
  const fs::path home = dir_ / "home";
  fs::create_directories(home);
  ASSERT_EQ(::chmod(home.c_str(), 0755), 0);
  {
    auto meta = MetadataStore::Open(MetadataUrl(home.string()));
    ASSERT_TRUE(meta.IsOk()) << meta.GetStatus().ToString();
  }
  EXPECT_EQ(ModeOf(home), 0755u) << "not ours to change";
  EXPECT_EQ(ModeOf(home / "kestrel.db"), 0600u) << "the database is new";
  auto warnings = HomeModeWarnings(home.string());
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_EQ(warnings[0], "warning: " + home.string() +
                             " has mode 0755 (group/other may read it): chmod 700 " + home.string());
  // A database made world-readable by hand (or an older kestrel).
  ASSERT_EQ(::chmod((home / "kestrel.db").c_str(), 0644), 0);
  warnings = HomeModeWarnings(home.string());
  ASSERT_EQ(warnings.size(), 2u);
  EXPECT_NE(warnings[1].find((home / "kestrel.db").string() + " has mode 0644"), std::string::npos)
      << warnings[1];
  EXPECT_NE(warnings[1].find("chmod 600"), std::string::npos) << warnings[1];
  ASSERT_EQ(::chmod(home.c_str(), 0700), 0);
  ASSERT_EQ(::chmod((home / "kestrel.db").c_str(), 0600), 0);
  EXPECT_TRUE(HomeModeWarnings(home.string()).empty());
  EXPECT_TRUE(HomeModeWarnings((dir_ / "absent").string()).empty());
}

TEST_F(HomeModeTest, PrivateDirAndFileLeaveExistingOnesAlone) {
  const fs::path d = dir_ / "a" / "b";
  ASSERT_TRUE(CreatePrivateDir(d.string()).IsOk());
  EXPECT_EQ(ModeOf(d), 0700u);
  ASSERT_EQ(::chmod(d.c_str(), 0750), 0);
  ASSERT_TRUE(CreatePrivateDir(d.string()).IsOk());
  EXPECT_EQ(ModeOf(d), 0750u);
  const fs::path f = d / "f";
  ASSERT_TRUE(CreatePrivateFile(f.string()).IsOk());
  EXPECT_EQ(ModeOf(f), 0600u);
  ASSERT_EQ(::chmod(f.c_str(), 0640), 0);
  ASSERT_TRUE(CreatePrivateFile(f.string()).IsOk());
  EXPECT_EQ(ModeOf(f), 0640u);
  EXPECT_FALSE(CreatePrivateFile((dir_ / "none" / "f").string()).IsOk()) << "no parent folder";
}

}  // namespace
}  // namespace kestrel::store
