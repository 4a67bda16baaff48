#include "server/api_dataset_images.h"

#include <string>
#include <utility>

#include "app/datasets.h"
#include "app/jobs.h"
#include "server/query_params.h"

namespace kestrel::server {

Status AddDatasetImageRoutes(Router& router, ApiContext& ctx) {
  KESTREL_RETURN_IF_ERROR(router.Add(
      "GET", "/api/datasets/{name}/images",
      {"A page of a dataset version's images (NAME or NAME@VERSION) with their label boxes as JSON, "
       "normalized centre and size, for the client to draw; manifest order",
       {{"split", "only this split: train, val or test"},
        {"class", "only images with a box of this class (a name or an id)"},
        {"path", "only the image at this manifest path (as the diff and findings routes name it)"},
        {"offset", "skip this many matching images (default 0); the response's next_offset is the next page"},
        {"limit", "at most this many images, 1.." + std::to_string(app::DatasetImagesRequest::kMaxLimit) +
                      " (default 48)"}}},
      [&ctx](const Request& req, const PathParams& p) {
        app::DatasetImagesRequest r;
        r.spec = p.at("name");
        r.split = QueryText(req, "split");
        r.cls = QueryText(req, "class");
        r.path = QueryText(req, "path");
        if (Status s = QueryInts(req, {{"offset", &r.offset}, {"limit", &r.limit}}); !s.IsOk())
          return ErrorResponse(s);
        auto page = app::Datasets(ctx.meta, ctx.blobs).Images(r);
        return page.IsOk() ? JsonResponse(app::DatasetImagesPageJson(*page))
                           : ErrorResponse(page.GetStatus());
      }));
  KESTREL_RETURN_IF_ERROR(router.Add(
      "GET", "/api/datasets/{name}/images/{sha}",
      {"One image of a dataset version by its SHA-256 (as the images route lists it): served only when the "
       "version has it (404 otherwise), content-addressed, so cacheable for good (ETag = the SHA; "
       "If-None-Match answers 304)",
       {},
       "image/*"},
      [&ctx](const Request& req, const PathParams& p) {
        auto img = app::Datasets(ctx.meta, ctx.blobs).ImageBytes(p.at("name"), p.at("sha"));
        if (!img.IsOk()) return ErrorResponse(img.GetStatus());
        Response r;
        r.content_type = img->content_type;
        const std::string etag = "\"" + img->sha + "\"";
        r.headers.emplace_back("ETag", etag);
        // Private: read routes may need a token, so no shared cache keeps it.
        r.headers.emplace_back("Cache-Control", "private, max-age=31536000, immutable");
        r.headers.emplace_back("X-Content-Type-Options", "nosniff");
        if (req.Header("if-none-match") == etag) {
          r.status = 304;
          return r;
        }
        r.body = std::move(img->bytes);
        return r;
      }));
  KESTREL_RETURN_IF_ERROR(router.Add(
      "GET", "/api/datasets/{name}/diff",
      {"Images and labels added, removed or changed between two versions of a dataset, and instances per "
       "class in each (`kestrel dataset diff NAME@A NAME@B --json`)",
       {{"a", "the older version: vN or a version id prefix (required)"},
        {"b", "the newer version: vN or a version id prefix (required)"}}},
      [&ctx](const Request& req, const PathParams& p) {
        const std::string& name = p.at("name");
        if (name.find('@') != std::string::npos) {
          return ErrorResponse(
              Status::InvalidArgument("the diff route takes a dataset name; the versions are ?a= and ?b=",
                                      {app::kRequestFile, 0, "name"}));
        }
        std::string spec[2];
        const char* keys[2] = {"a", "b"};
        for (int i = 0; i < 2; ++i) {
          const std::string v = QueryText(req, keys[i]);
          if (v.empty() || v.find('@') != std::string::npos) {
            return ErrorResponse(Status::InvalidArgument(
                std::string("query parameter ") + keys[i] + " must name a version of " + name +
                    " (vN or a version id prefix)" + (v.empty() ? ", it is missing" : ", got '" + v + "'"),
                {app::kRequestFile, 0, keys[i]}));
          }
          spec[i] = name + "@" + v;
        }
        auto d = app::Datasets(ctx.meta, ctx.blobs).Diff(spec[0], spec[1]);
        if (!d.IsOk()) return ErrorResponse(d.GetStatus());
        nlohmann::json doc = app::DatasetDiffJson(*d);
        doc["ok"] = true;  // the CLI's --json document, "ok" included
        return JsonResponse(doc);
      }));
  return router.Add(
      "GET", "/api/datasets/{name}/findings",
      {"A dataset version's validation findings (the stored report's examples), filtered and paged; each "
       "with \"image\": the manifest image it is about (path, split, sha, size, boxes) or null",
       {{"severity", "only this severity: error, warning or info"},
        {"check", "only this check id (label.out_of_bounds, ...); the response's checks lists them"},
        {"offset", "skip this many matching findings (default 0)"},
        {"limit", "at most this many, 1.." + std::to_string(app::DatasetFindingsRequest::kMaxLimit) +
                      " (default 100)"}}},
      [&ctx](const Request& req, const PathParams& p) {
        app::DatasetFindingsRequest r;
        r.spec = p.at("name");
        r.severity = QueryText(req, "severity");
        r.check = QueryText(req, "check");
        if (Status s = QueryInts(req, {{"offset", &r.offset}, {"limit", &r.limit}}); !s.IsOk())
          return ErrorResponse(s);
        auto page = app::Datasets(ctx.meta, ctx.blobs).Findings(r);
        return page.IsOk() ? JsonResponse(app::DatasetFindingsPageJson(*page))
                           : ErrorResponse(page.GetStatus());
      });
}

}  // namespace kestrel::server
