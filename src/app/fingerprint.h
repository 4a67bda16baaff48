// The environment fingerprint of a worker and its attempts (issue 31,
// docs/jobs.md "Environment fingerprint"): about 20 facts about the host
// and the build that decide whether a job runs the same here as elsewhere,
// and a hash of them. `kestrel worker` collects it at start (the LibTorch
// facts from `kestrel-torch fingerprint --json`, so `kestrel` stays
// torch-free) and names its hash on every attempt; `jobs show` and
// `jobs diff-env A B` read it back.
//
// Torch-free. Collecting reads /proc, uname and the C library: no process
// is started here (the caller hands in the torch facts).
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "core/status.h"
#include "store/metadata_store.h"

namespace kestrel::app {

// The facts this process can see: kestrel_version, kestrel_build (compiler,
// optimisation, assertions), opencv, glibc, kernel, os, arch, cpu_model,
// cpu_count, avx2, avx512f, avx512_bf16, amx, omp_num_threads,
// mkl_num_threads, cuda_driver (null without the NVIDIA driver), gpus
// (model and UUID of each, [] without). Values are strings, numbers,
// booleans or null, never objects, so a diff compares field by field.
nlohmann::json HostFingerprint();

// `torch` (the object `kestrel-torch fingerprint --json` prints: libtorch,
// torch_cuda_build, cudnn, cuda_available, cuda_devices, torch_threads ...)
// merged into `host`; a non-object `torch` (kestrel-torch failed) becomes
// {"libtorch": null, "torch_error": why}.
nlohmann::json MergeFingerprint(nlohmann::json host, const nlohmann::json& torch,
                                const std::string& torch_error);

// The first 16 hex digits of the SHA-256 of the fingerprint's canonical
// JSON (keys sorted): equal fingerprints, equal hashes.
std::string FingerprintHash(const nlohmann::json& fingerprint);

// The fields whose values differ (a field one side lacks is null there):
// [{"field", "a", "b"}], by field name.
nlohmann::json DiffFingerprints(const nlohmann::json& a, const nlohmann::json& b);

// `kestrel jobs diff-env A B` and GET /api/jobs/{id}/env-diff: A and B are
// "JOB" (its last attempt) or "JOB:ATTEMPT". {"ok", "a": {"job", "attempt",
// "host", "fingerprint" (hash or null)}, "b": {...}, "same" (bool),
// "differences": DiffFingerprints}; kNotFound naming the job or attempt,
// kFailedPrecondition when an attempt recorded no fingerprint.
Result<nlohmann::json> DiffAttemptEnvironments(store::MetadataStore& meta, const std::string& a,
                                               const std::string& b);

// The fingerprint fields of an attempt's hash ({} when it has none or the
// store lacks it): for `jobs show`.
nlohmann::json AttemptFingerprint(store::MetadataStore& meta, const std::string& hash);

}  // namespace kestrel::app
