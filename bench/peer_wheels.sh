#!/usr/bin/env bash
# The GPU peers as wheels for a machine without a network (the device machine): FlashInfer 0.7.2 (flashinfer-python,
# apache-tvm-ffi, nvidia-cutlass-dsl and its -libs-base, -libs-core, -libs-cu13) and fla 0.6.0 (fla-core,
# flash-linear-attention), in pieces of at most 64 MiB a call can carry.
#
#   bench/peer_wheels.sh pack      here: download them; .whl/ holds the small wheels, .whl2/ .whl3/ .whl4/ the two
#                                  big ones joined and cut in three (all four folders ignored through .git/info/exclude)
#   bench/peer_wheels.sh stage     there, in each of four consecutive calls that carry one folder: copy it to /tmp/w
#   bench/peer_wheels.sh install   there, once all four are staged: join, install into /tmp/peers and print the line
#                                  that puts it on the path (site.addsitedir: cutlass is found through a .pth file)
set -euo pipefail
cd "$(dirname "$0")/.."
BIG=(flashinfer_python-0.7.2-py3-none-any.whl nvidia_cutlass_dsl_libs_cu13-4.7.1-cp312-cp312-manylinux_2_28_x86_64.whl)
case "${1:-}" in
pack)
    plat=(--platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 --platform manylinux_2_24_x86_64
          --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64)
    tmp=$(mktemp -d)
    python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp "${plat[@]}" \
        -d "$tmp" flashinfer-python==0.7.2 "apache-tvm-ffi==0.1.15.post2" nvidia-cutlass-dsl==4.7.1 \
        nvidia-cutlass-dsl-libs-base==4.7.1 nvidia-cutlass-dsl-libs-core==4.7.1 nvidia-cutlass-dsl-libs-cu13==4.7.1 \
        fla-core==0.6.0 flash-linear-attention==0.6.0
    mkdir -p .git/info
    for d in .whl .whl2 .whl3 .whl4; do
        grep -qx "/$d/" .git/info/exclude 2> /dev/null || echo "/$d/" >> .git/info/exclude
        rm -rf "$d" && mkdir "$d"
    done
    for f in "$tmp"/*.whl; do
        case " ${BIG[*]} " in *" $(basename "$f") "*) ;; *) cp "$f" .whl/ ;; esac
    done
    stat -c %s "$tmp/${BIG[0]}" > .whl/big_first_bytes
    cat "$tmp/${BIG[0]}" "$tmp/${BIG[1]}" | split -b 50M - "$tmp/piece"
    mv "$tmp/pieceaa" .whl2/ && mv "$tmp/pieceab" .whl3/ && mv "$tmp/pieceac" .whl4/
    rm -rf "$tmp"
    du -sh .whl .whl2 .whl3 .whl4
    ;;
stage)
    mkdir -p /tmp/w
    for d in .whl .whl2 .whl3 .whl4; do [[ -d $d ]] && cp "$d"/* /tmp/w/; done
    ls /tmp/w
    ;;
install)
    cd /tmp/w
    cat pieceaa pieceab pieceac > big.bin
    head -c "$(cat big_first_bytes)" big.bin > "${BIG[0]}"
    tail -c +"$(( $(cat big_first_bytes) + 1 ))" big.bin > "${BIG[1]}"
    rm big.bin
    python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/peers ./*.whl
    echo "import site; site.addsitedir('/tmp/peers')"
    ;;
*)
    sed -n '2,12p' "$0"
    exit 2
    ;;
esac
