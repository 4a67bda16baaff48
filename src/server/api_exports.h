// GET /api/models/{ref}/exports/{id}/file (docs/server.md "Export files"):
// the bytes of a registered model's verified ONNX export, for the web UI's
// "try it in the browser" (onnxruntime-web runs it client-side). The request
// names a registry record, never a path: the file is the one the registry
// recorded (model_exports.path), served only while it still is a regular
// file of the recorded size and SHA-256, at most ApiContext's
// export_file_limit bytes.
#pragma once

#include "core/status.h"
#include "server/api.h"
#include "server/router.h"

namespace kestrel::server {

// Adds the export file route to `router`; `ctx` must outlive it.
Status AddExportRoutes(Router& router, ApiContext& ctx);

}  // namespace kestrel::server
