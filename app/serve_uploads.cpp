// POST /v1/uploads: a file for a research to search (docs/api.md,
// "Uploads"; upload_files.hpp keeps them).

#include "report_export.hpp"
#include "serve_service.hpp"
#include "upload_files.hpp"

#include "quarry/host/services.hpp"
#include "quarry/sdk/text.hpp"

#include <spdlog/spdlog.h>

namespace quarry::app {

namespace {

http::response upload_error(const upload_refusal& r) {
  auto res = http::json_error(r.status, r.code, r.message);
  if (r.status == 429)
    res.headers.emplace_back("Retry-After", "60");
  return res;
}

} // namespace

void add_upload_routes(http::router& r, std::shared_ptr<service> svc) {
  const auto& server = svc->ctx.config.values.server;
  upload_limits limits;
  limits.max_files = server.max_pending_uploads;
  limits.max_bytes = server.max_pending_upload_bytes;
  auto folder = std::make_shared<upload_folder>(svc->ctx.services->data_dir(), limits);
  // What expired while the server was down goes now; the rest at the next
  // upload after it expires.
  if (auto n = folder->sweep(); n > 0)
    spdlog::info("removed {} upload(s) no research took within 24 hours", n);
  auto most = static_cast<size_t>(server.max_upload_bytes);
  r.add("POST", "/v1/uploads",
        [svc, folder, most](http::request& req, std::shared_ptr<http::responder> res) {
          auto raw_name = req.query_param("name");
          if (!raw_name || raw_name->empty()) {
            res->respond(http::json_error(400, "bad_request",
                                          "name: missing (POST /v1/uploads?name=FILE.pdf with "
                                          "the file's bytes as the body)"));
            return;
          }
          if (req.body.size() > most) {
            res->respond(http::json_error(413, "too_large",
                                          "the file is larger than " + std::to_string(most)
                                            + " bytes (server.max_upload_bytes)"));
            return;
          }
          auto safe = safe_upload_name(*raw_name);
          if (auto* refused = std::get_if<upload_refusal>(&safe)) {
            res->respond(upload_error(*refused));
            return;
          }
          auto name = std::get<std::string>(std::move(safe));
          auto decided = decide_upload_kind(req.header("Content-Type").value_or(""), name,
                                            req.body);
          if (auto* refused = std::get_if<upload_refusal>(&decided)) {
            res->respond(upload_error(*refused));
            return;
          }
          auto kind = std::get<upload_kind>(decided);
          // A DOCX is read through pandoc's Markdown: without pandoc it
          // could never be searched.
          if (kind == upload_kind::docx) {
            auto tool = find_export_tool(export_format::docx);
            if (auto* err = std::get_if<export_error>(&tool)) {
              res->respond(http::json_error(
                501, "not_implemented",
                "DOCX files are read with pandoc, which this server lacks (install the Debian "
                "package pandoc), or upload the document as PDF: "
                  + err->message));
              return;
            }
          }
          // Written (and synced) on the blocking pool.
          auto body = std::make_shared<std::string>(std::move(req.body));
          bool queued = svc->pool.submit([folder, name, kind, body, res] {
            auto added = folder->add(name, kind, *body);
            if (auto* refused = std::get_if<upload_refusal>(&added)) {
              if (refused->status >= 500)
                spdlog::error("{}", refused->message);
              res->respond(upload_error(*refused));
              return;
            }
            const auto& up = std::get<pending_upload>(added);
            auto keep = std::chrono::duration_cast<std::chrono::seconds>(folder->limits().keep);
            res->respond(http::json_response(201, {{"upload", up.id},
                                                   {"name", up.name},
                                                   {"bytes", up.bytes},
                                                   {"type", to_string(up.kind)},
                                                   {"expires_in_s", keep.count()}}));
          });
          if (!queued) {
            auto busy = http::json_error(429, "busy", "the server is busy; try again");
            busy.headers.emplace_back("Retry-After", "2");
            res->respond(std::move(busy));
          }
        });
}

} // namespace quarry::app
