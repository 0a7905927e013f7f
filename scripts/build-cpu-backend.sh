#!/usr/bin/env bash
# Builds node-llama-cpp's CPU backend (libggml-cpu-VARIANT.so) from the llama.cpp source it ships, with
# this machine's compiler and the same CPU variant flags as the prebuilt one it loads here. Diagnostic
# only: the product always runs node-llama-cpp's prebuilt binaries. `npm run bench:peer -- --cpu-backend
# FILE` runs our side on it, to tell what the prebuilt binary costs from what our serving loop costs.
# Needs cmake, g++, git, python3 and patchelf (apt-get install patchelf). Cached next to llama-server's
# build, keyed by the bundle's hash; idempotent. Prints the library's path on the last line.
set -euo pipefail
cd "$(dirname "$0")/.."

bundle=node_modules/node-llama-cpp/llama/gitRelease.bundle
bins=node_modules/@node-llama-cpp/linux-x64/bins/linux-x64
[ -f "$bundle" ] || { echo "missing $bundle: run npm ci first" >&2; exit 1; }
[ -d "$bins" ] || { echo "missing $bins: this diagnostic is for linux-x64" >&2; exit 1; }
for tool in cmake g++ git python3 patchelf; do
    command -v "$tool" >/dev/null || { echo "needs $tool (apt-get install cmake g++ git python3 patchelf)" >&2; exit 1; }
done

# The variant ggml's loader picks: the prebuilt library with the highest ggml_backend_score() on this CPU.
variant=${1:-$(cd "$bins" && LD_LIBRARY_PATH=. python3 -c '
import ctypes, glob
scores = {}
for path in glob.glob("libggml-cpu-*.so"):
    try:
        scores[path[len("libggml-cpu-"):-len(".so")]] = ctypes.CDLL("./" + path).ggml_backend_score()
    except OSError:
        pass
print(max(scores, key=scores.get))
')}

key=$(sha256sum "$bundle" | cut -c1-16)
cache=${LLAMA_SERVER_CACHE:-$HOME/.cache/inference-monitor-llama-server}/$key
library=$cache/cpu-backend/libggml-cpu-$variant.so
if [ -f "$library" ]; then
    echo "$library"
    exit 0
fi

mkdir -p "$cache"
if [ ! -d "$cache/src/.git" ]; then
    rm -rf "$cache/src"
    git clone --quiet "$bundle" "$cache/src" >&2
fi
# The prebuilt binaries' layout: CPU backends as loadable variants, no OpenMP.
cmake -S "$cache/src" -B "$cache/cpu-backend-build" -DCMAKE_BUILD_TYPE=Release -DBUILD_SHARED_LIBS=ON -DGGML_BACKEND_DL=ON \
    -DGGML_CPU_ALL_VARIANTS=ON -DGGML_NATIVE=OFF -DGGML_OPENMP=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF \
    -DLLAMA_BUILD_TOOLS=OFF -DLLAMA_USE_PREBUILT_UI=OFF -DLLAMA_OPENSSL=OFF -DLLAMA_CURL=OFF >&2
cmake --build "$cache/cpu-backend-build" --target "ggml-cpu-$variant" -j"$(nproc)" >&2
mkdir -p "$cache/cpu-backend"
cp "$cache/cpu-backend-build/bin/libggml-cpu-$variant.so" "$library.tmp"
# Link against the prebuilt libggml-base.so next to it (the local build names its own libggml-base.so.0).
patchelf --replace-needed libggml-base.so.0 libggml-base.so --set-rpath '$ORIGIN' "$library.tmp"
mv "$library.tmp" "$library"
echo "$library"
