#!/bin/sh
# The test sources compile in unity batches (tests/CMakeLists.txt), where two anonymous-namespace
# helpers of the same name collide or silently overload each other. Fails if a source under the
# given directory opens an anonymous namespace, or if two sources open the same file-local one.
set -eu
dir="$1"
status=0

anonymous=$(grep -rlE --include='*.cpp' '^[[:space:]]*namespace[[:space:]]*\{' "$dir" || true)
if [ -n "$anonymous" ]; then
  echo "anonymous namespace (name it after the file instead) in:"
  echo "$anonymous"
  status=1
fi

shared=$(find "$dir" -name '*.cpp' | while read -r file; do
  grep -oE '^namespace [A-Za-z_][A-Za-z0-9_]* \{' "$file" | sort -u
done | grep -v '^namespace gradlab {' | sort | uniq -d)
if [ -n "$shared" ]; then
  echo "opened by more than one test source:"
  echo "$shared"
  status=1
fi
exit $status
