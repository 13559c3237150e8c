// The report's activation patching: it needs a clean and a corrupted prompt whose answers
// differ, which a run does not name, so the section says how to make it with `gradlab patch`.
#include "report/sections.h"

namespace gradlab::report {

SectionResult collect_patching(ReportRun& run) {
  return {nullptr,
          "not computed: patching needs a clean and a corrupted prompt; run gradlab patch "
          "--checkpoint " +
              run.path("best.h5") + " --input CLEAN --corrupt CORRUPTED"};
}

}  // namespace gradlab::report
