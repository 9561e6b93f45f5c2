#!/usr/bin/env bash
# The CPU recurrence, gdn_delta, against ggml's GGML_OP_GATED_DELTA_NET (bench/ggml_delta.c), in one process on the
# same inputs.
#
#   bash bench/ggml_delta.sh [GGML_DIR] [-- program options: --json --quick --threads N --cold-mib N]
#
# GGML_DIR: a ggml checkout (default third_party/ggml, git-ignored). Nothing is fetched here: clone ggml-org/ggml
# there first. ggml is built in GGML_DIR/build if it has no libraries yet (CPU only, Release, GGML_NATIVE=ON, no
# OpenMP), libgdn's static library in build/cpu brought up to date; the program is built in build/ggml_delta.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=bench/ggml_common.sh
. bench/ggml_common.sh
ggml_prepare ggml_delta "$@"
exec ./build/ggml_delta/ggml_delta --commit "$GGML_COMMIT" "${ARGS[@]}"
