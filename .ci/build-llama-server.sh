#!/usr/bin/env bash
# Builds llama.cpp's `llama-server` from the llama.cpp source node-llama-cpp ships (its git bundle),
# so benchmarks compare against the same llama.cpp release our engine runs on, and tests have a real
# llama.cpp server to attach to. Cached outside the repo, keyed by the bundle's hash; idempotent.
# Prints the binary's path on the last line. ~20 min on 2 cores the first time.
set -euo pipefail
cd "$(dirname "$0")/.."

bundle=node_modules/node-llama-cpp/llama/gitRelease.bundle
[ -f "$bundle" ] || { echo "missing $bundle: run npm ci first" >&2; exit 1; }
key=$(sha256sum "$bundle" | cut -c1-16)
cache=${LLAMA_SERVER_CACHE:-$HOME/.cache/inference-monitor-llama-server}/$key
binary=$cache/build/bin/llama-server

if [ -x "$binary" ]; then
    echo "$binary"
    exit 0
fi

for tool in cmake g++ git; do
    command -v "$tool" >/dev/null || { echo "llama-server needs $tool (apt-get install cmake g++ git)" >&2; exit 1; }
done

mkdir -p "$cache"
if [ ! -d "$cache/src/.git" ]; then
    rm -rf "$cache/src"
    git clone --quiet "$bundle" "$cache/src" >&2
fi
cmake -S "$cache/src" -B "$cache/build" -DCMAKE_BUILD_TYPE=Release -DBUILD_SHARED_LIBS=OFF \
    -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_USE_PREBUILT_UI=OFF -DLLAMA_OPENSSL=OFF -DLLAMA_CURL=OFF >&2
cmake --build "$cache/build" --target llama-server -j"$(nproc)" >&2
[ -x "$binary" ] || { echo "the build finished without $binary" >&2; exit 1; }
echo "$binary"
