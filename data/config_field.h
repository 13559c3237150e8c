// One named setting of a run: the key it has as a flag, a /config attribute and a config-file
// line, the value it is bound to, and its help line. Tables of these (a task's own options,
// train::config_fields) let the command line, the checkpoint and the config file name every
// setting once.
#pragma once

#include <cstdint>
#include <string>
#include <variant>

namespace gradlab::data {

struct ConfigField {
  const char* key;
  std::variant<int64_t*, double*, std::string*, bool*, uint64_t*> value;
  const char* help;
  // Part of a checkpoint's /config; false for a setting of this machine (threads).
  bool saved = true;
  // May be missing from a checkpoint written before the field existed: it keeps its default.
  bool optional = false;
  // False for a value derived from the data (the text's vocabulary): in /config only, never a
  // flag nor a config-file line.
  bool flag = true;
  // The key the field had before it was renamed, or null: still read from a checkpoint's
  // /config and a config file, and still accepted as a flag.
  const char* old_key = nullptr;
};

}  // namespace gradlab::data
