#!/usr/bin/env bash
# The Qwen3-Next model on libgdn (python/qwen3next_model.py) on the GPU machine, with Qwen3-Next's GDN heads (Hk 16,
# Hv 32, Dk = Dv 128, hidden 2048; 4 layers: 3 GDN, 1 full attention; MoE; random weights), decoding 128 tokens on
# CUDA: per GDN layer, the CUDA calls against the same layer inputs on CPU (y, state, history bit for bit) and against
# one long prefill; the speculative rounds; and transformers' own model beside it, once with its torch fallbacks on
# CUDA and once as transformers picks (fla's kernels where fla is installed), f32 then bf16. Then the peers' recurrence
# table with libgdn, transformers' fallbacks and fla's two kernels on CUDA (python/tests/peers.py --device cuda).
# Logs go to $OUT.
#
#   bash scripts/gpu_model.sh [DTYPE...]   (default float32 bfloat16)
#
# Needs torch (CUDA) and transformers on the machine, or their wheels in .whl/ (installed with --no-index into
# /tmp/site, as fla's and pytest's are: `pip install --no-index --no-deps --target /tmp/site .whl/*.whl`).
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp}
# shellcheck source=scripts/gpu_common.sh
. scripts/gpu_common.sh
gpu_shared model_build.log || exit 1
gpu_wheels
if ! python3 -c "import transformers.models.qwen3_next.modeling_qwen3_next" 2> "$OUT/model_transformers.log"; then
    echo "transformers (with Qwen3-Next) does not import here: put its wheels in .whl/" \
        "($(tail -1 "$OUT/model_transformers.log"))"
    exit 2
fi
python3 -c "import fla; print('fla', getattr(fla, '__version__', '?'))" 2>&1 | tail -1
rc=0
DTYPES=("$@")
((${#DTYPES[@]})) || DTYPES=(float32 bfloat16)
for dtype in "${DTYPES[@]}"; do
    for impl in "" --as-picked; do
        echo "== qwen3next shape, cuda, $dtype, transformers ${impl:-with its torch fallbacks}"
        python3 python/qwen3next_model.py --device cuda --shape qwen3next --dtype "$dtype" $impl 2>&1 |
            tee -a "$OUT/model.log"
        ((PIPESTATUS[0] == 0)) || rc=1
    done
done
echo "== the peers' recurrence: libgdn, transformers' fallbacks and fla on CUDA, beside float64"
python3 python/tests/peers.py --device cuda 2>&1 | tee "$OUT/peers.log"
exit "$rc"
