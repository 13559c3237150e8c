// The report's page: a fixed frame around the inlined bundle and the data (report/page.h).
#include "report/page.h"

#include "io/atomic_file.h"
#include "report/assets.h"

namespace gradlab::report {

std::string embedded_json(const nlohmann::json& data) {
  const std::string text = data.dump(-1, ' ', true, nlohmann::json::error_handler_t::replace);
  std::string safe;
  safe.reserve(text.size());
  for (const char c : text) {
    // Outside strings JSON has none of these characters, so each is inside a string: escaped.
    switch (c) {
      case '<':
        safe += "\\u003c";
        break;
      case '>':
        safe += "\\u003e";
        break;
      case '&':
        safe += "\\u0026";
        break;
      default:
        safe += c;
    }
  }
  return safe;
}

std::string page_html(const nlohmann::json& data) {
  return "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
         "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n"
         "<title>gradlab report</title>\n<style>\n" +
         report_style() +
         "</style>\n</head>\n<body>\n<main id=\"gradlab-report\" class=\"gradlab\"></main>\n"
         "<script type=\"application/json\" id=\"gradlab-data\">" +
         embedded_json(data) + "</script>\n<script>\n" + report_script() +
         "</script>\n</body>\n</html>\n";
}

void write_page(const std::string& path, const nlohmann::json& data) {
  io::replace_file_text(path, page_html(data));
}

}  // namespace gradlab::report
