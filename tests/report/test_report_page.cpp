// The report's page: user text reaches it only as escaped JSON (report/page.h), whatever the
// text holds, and big arrays as base64 float32.
#include <gtest/gtest.h>

#include "report/page.h"
#include "report/sections.h"

namespace test_report_page {

TEST(ReportPage, HostileTextCannotCloseTheScriptElement) {
  const std::string hostile =
      "</script><script>alert(1)</script><!-- \"q\" 'a' & \x01\n\xe2\x80\xa8";
  const std::string json = gradlab::report::embedded_json({{"title", hostile}});
  for (const char* forbidden : {"<", ">", "&", "\n", "\x01", "\xe2"}) {
    EXPECT_EQ(json.find(forbidden), std::string::npos) << forbidden;
  }
  EXPECT_EQ(nlohmann::json::parse(json)["title"], hostile);  // escaped, not changed
  const std::string page = gradlab::report::page_html({{"title", hostile}});
  EXPECT_EQ(page.find("alert(1)</script>"), std::string::npos);
}

TEST(ReportPage, InvalidUtf8BecomesTheReplacementCharacter) {
  const std::string json = gradlab::report::embedded_json({{"token", std::string("a\xff\xc3")}});
  EXPECT_NE(json.find("\\ufffd"), std::string::npos) << json;
  EXPECT_EQ(nlohmann::json::parse(json)["token"], "a\ufffd\ufffd");
}

TEST(ReportPage, FloatsAreBase64LittleEndian) {
  // 1.0f is 00 00 80 3f; -2.0f is 00 00 00 c0.
  EXPECT_EQ(gradlab::report::base64_floats({1.0f}), "AACAPw==");
  EXPECT_EQ(gradlab::report::base64_floats({1.0f, -2.0f}), "AACAPwAAAMA=");
  EXPECT_EQ(gradlab::report::base64_floats({}), "");
}

}  // namespace test_report_page
