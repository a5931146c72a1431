#!/bin/sh
# check-doc-identifiers.sh: every Go identifier named in backticks in
# docs/*.md and in a doc.go exists in the code (scripts/docidents says what
# counts). Run by `make lint` and .ci/run; prints each missing name with its
# file and line and exits non-zero when there is one.
set -eu
cd "$(dirname "$0")/.."
exec "${GO:-go}" run ./scripts/docidents .
