// The dataset gallery's routes (docs/server.md "Dataset images"), over the
// app use cases Datasets::Images, ImageBytes and Findings:
//   GET /api/datasets/{name}/images          a page of images with their
//                                            label boxes as JSON (the client
//                                            draws them), by split and class
//   GET /api/datasets/{name}/images/{sha}    one image's bytes, only when the
//                                            version has an image of that
//                                            SHA-256 (never a path)
//   GET /api/datasets/{name}/findings        the validation findings, by
//                                            severity and check, each with
//                                            the image it is about
#pragma once

#include "core/status.h"
#include "server/api.h"
#include "server/router.h"

namespace kestrel::server {

// Adds the three routes to `router`; `ctx` must outlive it.
Status AddDatasetImageRoutes(Router& router, ApiContext& ctx);

}  // namespace kestrel::server
