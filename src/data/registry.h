// Transitional (issue 27): the dataset registry's use cases are
// app::Datasets' (app/datasets.h) and its mechanics data/analyze.h and
// data/version.h. Only Load is left, for a caller that is being moved into
// src/app at the same time; this header goes when it has moved.
#pragma once

#include <string>

#include "core/env.h"
#include "core/status.h"
#include "data/analyze.h"
#include "data/version.h"
#include "store/artifact_store.h"
#include "store/metadata_store.h"

namespace kestrel::data {

class Registry {
 public:
  Registry(store::MetadataStore& meta, store::ArtifactStore& blobs, Env& env = Env::Default())
      : meta_(meta), blobs_(blobs), env_(env) {}
  // data::LoadVersion.
  Result<VersionView> Load(const std::string& spec) { return LoadVersion(meta_, blobs_, spec, env_); }

 private:
  store::MetadataStore& meta_;
  store::ArtifactStore& blobs_;
  Env& env_;
};

}  // namespace kestrel::data
