// POST /api/datasets/upload?name=N (docs/server.md "Uploads"): a dataset as
// a zip in the request body (application/zip), streamed to a file by the
// transport under `serve --max-upload-mb`, unpacked under the Kestrel home
// with the limits of upload_archive.h, then imported exactly as `kestrel
// dataset import FOLDER --name N key=value ...` (the query's other
// parameters are its options): the same use case, validation, errors and
// JSON. The unpacked folder is removed whatever happens.
#pragma once

#include "core/status.h"
#include "server/api.h"
#include "server/router.h"

namespace kestrel::server {

// Adds the route (Access::kWrite, RouteDoc::upload "application/zip");
// `ctx` must outlive `router`.
Status AddDatasetUploadRoutes(Router& router, ApiContext& ctx);

}  // namespace kestrel::server
