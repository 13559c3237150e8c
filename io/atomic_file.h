// Files replaced whole or not at all. The new content goes to a temporary file beside the
// target, "<path>.tmp-<pid>", which is synced to disk and renamed over the target, and then the
// directory is synced: after a crash, a full disk or a kill at any point the target is either
// its old self or the complete new file, never a mixture. A failure removes the temporary file.
#pragma once

#include <cstddef>
#include <functional>
#include <string>
#include <vector>

namespace gradlab::io {

// Creates the empty temporary file, calls write(temp) to fill it, then syncs and renames it
// over path. Throws FileError naming path and the system's reason; exceptions from write pass
// through. Either way the temporary file is gone.
void replace_file(const std::string& path, const std::function<void(const std::string&)>& write);

// replace_file with these bytes, or text, as the whole content.
void replace_file_bytes(const std::string& path, const char* data, size_t size);
void replace_file_text(const std::string& path, const std::string& text);

// Removes the temporary files of replace_file in dir whose process is gone (a crash or a kill
// in the middle of a save) and whose target's file name `ours` accepts, so that a user's own
// "<name>.tmp-<digits>" is never touched; files of running processes stay. Returns the paths
// removed.
std::vector<std::string> remove_stale_temp_files(
    const std::string& dir, const std::function<bool(const std::string& target)>& ours);

}  // namespace gradlab::io
