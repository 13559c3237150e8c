// The report's HTML page: the built-in scripts and style, and the data as one JSON document.
// embedded_json is the one place where text a user made (a vocabulary, a prompt, a run's name,
// configuration values) enters the page; the scripts place it with textContent, never as HTML.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

namespace gradlab::report {

// data as JSON that is safe inside a <script> element: every non-ASCII character escaped as
// \uXXXX, invalid UTF-8 replaced by U+FFFD, and '<', '>' and '&' escaped, so that no "</script>"
// or "<!--" can close or change the element.
std::string embedded_json(const nlohmann::json& data);

// The whole page: one offline file, every script, style and datum inlined.
std::string page_html(const nlohmann::json& data);

// Writes page_html(data) to path atomically (a temporary file renamed over it), so that a
// browser reloading a live report never reads half a page (io::replace_file_text, which throws
// FileError naming the path).
void write_page(const std::string& path, const nlohmann::json& data);

}  // namespace gradlab::report
