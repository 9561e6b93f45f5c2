#!/usr/bin/env bash
# The CPU layer step against ggml's op chain (bench/ggml_layer.c), in one process on the same inputs.
#
#   bash bench/ggml_layer.sh [GGML_DIR] [-- program options: --json --quick --sets N --threads N]
#
# GGML_DIR: a ggml checkout (default third_party/ggml, git-ignored). Nothing is fetched here: clone ggml-org/ggml
# there first. ggml is built in GGML_DIR/build if it has no libraries yet (CPU only, Release, GGML_NATIVE=ON, no
# OpenMP), libgdn's static library in build/cpu brought up to date; the program is built in build/ggml_layer.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=bench/ggml_common.sh
. bench/ggml_common.sh
ggml_prepare ggml_layer "$@"
exec ./build/ggml_layer/ggml_layer --commit "$GGML_COMMIT" "${ARGS[@]}"
