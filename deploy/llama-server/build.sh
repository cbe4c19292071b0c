#!/usr/bin/env bash
# Builds llama.cpp's OpenAI-compatible server (`llama-server`, CPU only) once per machine.
#
# Source: the llama.cpp that the MIT-licensed `llama-cpp-python` source distribution vendors, taken
# from PyPI with pip (no binary wheel of llama.cpp exists there). Only the `llama-server` target is
# built: no tests, examples, web UI, HTTPS or download support, statically linked so the binary can
# move. The result lies in a machine-wide cache (not the checkout), so a fresh clone, CI included,
# reuses it: a machine pays the compile once.
#
#   deploy/llama-server/build.sh           # prints the binary's path (building it if absent)
#   deploy/llama-server/build.sh --check   # prints it if built, else exits 4
#   SABER_LLAMA_SERVER_HOME=DIR ...         # another cache folder
set -euo pipefail

VERSION="${SABER_LLAMA_CPP_PYTHON_VERSION:-0.3.36}"
# Not GGML_NATIVE: a VM may report CPU features (AVX-512 FP16, AMX) its host traps, and a native
# build then dies with SIGILL loading the model (seen here: exit 132 after `--version` passed).
# AVX2 + FMA + F16C is every x86-64 machine this project runs on; other CPUs ignore the flags.
FLAGS=(-G Ninja -DCMAKE_BUILD_TYPE=Release -DBUILD_SHARED_LIBS=OFF -DGGML_NATIVE=OFF
       -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON
       -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_TOOLS=ON
       -DLLAMA_BUILD_SERVER=ON -DLLAMA_BUILD_APP=OFF -DLLAMA_BUILD_UI=OFF
       -DLLAMA_USE_PREBUILT_UI=OFF -DLLAMA_OPENSSL=OFF -DLLAMA_BUILD_HTML=OFF)
KEY="$(printf '%s %s' "$VERSION" "${FLAGS[*]}" | sha256sum | cut -c1-12)"
HOME_DIR="${SABER_LLAMA_SERVER_HOME:-${XDG_CACHE_HOME:-$HOME/.cache}/saber/llama-server}"
OUT="$HOME_DIR/$VERSION-$KEY"
BIN="$OUT/bin/llama-server"

if [ -x "$BIN" ] && "$BIN" --version >/dev/null 2>&1; then
  echo "$BIN"
  exit 0
fi
if [ "${1:-}" = "--check" ]; then
  echo "no llama-server built at $BIN" >&2
  exit 4
fi

for tool in cmake ninja c++; do
  command -v "$tool" >/dev/null 2>&1 || { echo "llama-server cannot be built: no $tool" >&2; exit 3; }
done

WORK="$(mktemp -d "${TMPDIR:-/tmp}/llama-server-build.XXXXXX")"
trap 'rm -rf "$WORK"' EXIT
SDIST="${SABER_LLAMA_CPP_SDIST:-}"
if [ -z "$SDIST" ]; then
  # pip reads the archive's metadata with the package's own build backend (a few seconds, no
  # compile); inside a uv environment without pip, uv runs pip as a tool.
  if python3 -m pip --version >/dev/null 2>&1; then PIP=(python3 -m pip); else PIP=(uv tool run pip); fi
  "${PIP[@]}" download --quiet --no-deps --no-binary=llama-cpp-python \
    --dest "$WORK" "llama-cpp-python==$VERSION" >&2 || true
  SDIST="$(ls "$WORK"/llama_cpp_python-"$VERSION".tar.gz 2>/dev/null || true)"
  [ -n "$SDIST" ] || { echo "llama-server cannot be built: pip could not fetch llama-cpp-python==$VERSION's source" >&2; exit 3; }
fi
tar -xzf "$SDIST" -C "$WORK"
SRC="$WORK/llama_cpp_python-$VERSION/vendor/llama.cpp"

start=$(date +%s)
cmake -S "$SRC" -B "$WORK/build" "${FLAGS[@]}" >"$WORK/configure.log" 2>&1 \
  || { tail -40 "$WORK/configure.log" >&2; exit 1; }
# One compile job per core; `nice` keeps a machine that is also running tests responsive.
nice -n 10 cmake --build "$WORK/build" --target llama-server -j "$(nproc)" >"$WORK/build.log" 2>&1 \
  || { tail -60 "$WORK/build.log" >&2; exit 1; }
mkdir -p "$OUT.tmp/bin"
cp "$WORK/build/bin/llama-server" "$OUT.tmp/bin/"
cp "$SRC/LICENSE" "$OUT.tmp/LICENSE.llama.cpp"
printf '{"llama_cpp_python": "%s", "flags": "%s", "seconds": %s}\n' \
  "$VERSION" "${FLAGS[*]}" "$(( $(date +%s) - start ))" >"$OUT.tmp/build.json"
rm -rf "$OUT"
mv "$OUT.tmp" "$OUT"
echo "llama-server built in $(( $(date +%s) - start )) s" >&2
echo "$BIN"
