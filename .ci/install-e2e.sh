#!/usr/bin/env bash
# Installs what the end-to-end tests (test/e2e/) need, idempotently:
#   1. Debian packages: the headers code-server's native modules build against, ripgrep, Chromium;
#   2. a local ripgrep archive where @vscode/ripgrep's postinstall looks before downloading one
#      (the download is from GitHub, which CI cannot reach);
#   3. code-server 4.100.3 (= VS Code 1.100.3, the last release on Node 20) in its own folder, outside
#      the extension's dependencies.
# Each step is skipped when already done. Prints where code-server is and how long each step took.
#
# Environment:
#   INFERENCE_MONITOR_CODE_SERVER_DIR  where code-server goes (default: ~/.cache/inference-monitor-e2e/code-server-4.100.3;
#                                      test/e2e/codeServer.ts looks in the same place)
set -euo pipefail

CODE_SERVER_VERSION=4.100.3
RIPGREP_CACHE_DIR="${TMPDIR:-/tmp}/vscode-ripgrep-cache-1.15.11"
RIPGREP_ARCHIVE="$RIPGREP_CACHE_DIR/ripgrep-v13.0.0-10-x86_64-unknown-linux-musl.tar.gz"
CODE_SERVER_DIR="${INFERENCE_MONITOR_CODE_SERVER_DIR:-${HOME:-/root}/.cache/inference-monitor-e2e/code-server-$CODE_SERVER_VERSION}"
PACKAGES=(libkrb5-dev pkg-config libsecret-1-dev libx11-dev libxkbfile-dev ripgrep chromium)

started_all=$SECONDS
step_started=$SECONDS
step() { step_started=$SECONDS; echo "[install-e2e] $*"; }
done_step() { echo "[install-e2e]   done in $((SECONDS - step_started)) s${1:+ ($1)}"; }

if [ "$(uname -s)-$(uname -m)" != "Linux-x86_64" ]; then
    echo "[install-e2e] only linux x86_64 is supported (this is $(uname -s)-$(uname -m))" >&2
    exit 1
fi

# --- 1. Debian packages ------------------------------------------------------------------------
step "Debian packages: ${PACKAGES[*]}"
missing=()
for pkg in "${PACKAGES[@]}"; do
    if ! dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed"; then
        missing+=("$pkg")
    fi
done
# code-server's native modules are compiled by node-gyp on install
command -v make >/dev/null && command -v g++ >/dev/null || missing+=(build-essential)
command -v python3 >/dev/null || missing+=(python3)
if [ ${#missing[@]} -gt 0 ]; then
    if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null; then
        echo "[install-e2e] missing packages, and this is not root on a Debian/apt machine. Install them with:" >&2
        echo "    sudo apt-get update && sudo apt-get install -y --no-install-recommends ${missing[*]}" >&2
        exit 2
    fi
    echo "[install-e2e]   installing: ${missing[*]}"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
    done_step "installed ${missing[*]}"
else
    done_step "all present"
fi
for cmd in rg chromium; do
    command -v "$cmd" >/dev/null || { echo "[install-e2e] $cmd still not on PATH after installing its package" >&2; exit 1; }
done

# --- 2. ripgrep archive for @vscode/ripgrep's postinstall --------------------------------------
step "ripgrep archive at $RIPGREP_ARCHIVE"
if [ -s "$RIPGREP_ARCHIVE" ] && tar -tzf "$RIPGREP_ARCHIVE" 2>/dev/null | grep -qx "rg"; then
    done_step "already there"
else
    mkdir -p "$RIPGREP_CACHE_DIR"
    work=$(mktemp -d)
    cp "$(command -v rg)" "$work/rg"
    tar -czf "$RIPGREP_ARCHIVE.tmp" -C "$work" rg
    mv "$RIPGREP_ARCHIVE.tmp" "$RIPGREP_ARCHIVE"
    rm -rf "$work"
    done_step "made from $(command -v rg)"
fi

# --- 3. code-server ----------------------------------------------------------------------------
step "code-server $CODE_SERVER_VERSION in $CODE_SERVER_DIR"
marker="$CODE_SERVER_DIR/.install-complete"
installed_version() {
    node -p "require(process.argv[1]).version" "$CODE_SERVER_DIR/node_modules/code-server/package.json" 2>/dev/null || true
}
if [ -f "$marker" ] && [ "$(installed_version)" = "$CODE_SERVER_VERSION" ] && [ -x "$CODE_SERVER_DIR/node_modules/.bin/code-server" ]; then
    done_step "already installed"
else
    # Install into a fresh sibling folder and move it into place only once it worked, so an
    # interrupted install is never mistaken for a complete one.
    mkdir -p "$(dirname "$CODE_SERVER_DIR")"
    staging="$CODE_SERVER_DIR.partial"
    rm -rf "$staging"
    mkdir -p "$staging"
    echo '{"name": "inference-monitor-e2e-code-server", "private": true}' > "$staging/package.json"
    log="$(dirname "$CODE_SERVER_DIR")/code-server-install.log"
    if ! (cd "$staging" && TMPDIR="${TMPDIR:-/tmp}" npm_config_yes=true npm_config_unsafe_perm=true \
            npm install "code-server@$CODE_SERVER_VERSION" --no-audit --no-fund >"$log" 2>&1); then
        echo "[install-e2e] npm install code-server@$CODE_SERVER_VERSION failed; last lines of $log:" >&2
        tail -n 60 "$log" >&2
        exit 1
    fi
    "$staging/node_modules/.bin/code-server" --version >/dev/null
    touch "$staging/.install-complete"
    rm -rf "$CODE_SERVER_DIR"
    mv "$staging" "$CODE_SERVER_DIR"
    done_step "installed, log in $log"
fi
echo "[install-e2e] code-server: $CODE_SERVER_DIR/node_modules/.bin/code-server ($("$CODE_SERVER_DIR/node_modules/.bin/code-server" --version | head -n 1))"
echo "[install-e2e] chromium: $(command -v chromium) ($(chromium --version 2>/dev/null || echo "version unknown"))"
echo "[install-e2e] total $((SECONDS - started_all)) s"
