// GET /api/models/{ref}/exports/{id}/file (docs/server.md "Export files"):
// the bytes of a registered model's verified ONNX export, for the web UI's
// "try it in the browser" (onnxruntime-web runs it client-side). The request
// names a registry record, never a path: the file is the one the registry
// recorded (model_exports.path), served only while it still is a regular
// file of the recorded size and SHA-256, at most ApiContext's
// export_file_limit bytes.
//
// Also the model's stored plots (GET /api/models/{ref}/plots/{file}: the
// run's PR / F1 / confusion / results images kept as blobs at registration,
// served by name from the model's evaluation record, hash-verified), and
// WeightsLink, which names the registered model or job behind a weights path.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "core/status.h"
#include "server/api.h"
#include "server/router.h"

namespace kestrel::server {

// Adds the export file and plot routes to `router`; `ctx` must outlive it.
Status AddExportRoutes(Router& router, ApiContext& ctx);

// What a weights path (a job's pretrained=, a model's parent) is, for a
// link: {"path", "model": {"id", "ref"}} when it is a registered model's
// blob (a file named by its SHA-256, as the store and its download cache
// name blobs), {"path", "job_id"} when it lies under <home>/jobs/<id>/,
// else {"path"} alone. Reads no file. Borrows ctx.meta (the I/O thread).
nlohmann::json WeightsLink(ApiContext& ctx, const std::string& path);

}  // namespace kestrel::server
