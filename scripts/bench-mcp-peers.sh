#!/bin/sh
# writegate mcp next to the MCP filesystem servers people use today, on the
# same workload in one run (docs/performance.md has the figures):
# installs @modelcontextprotocol/server-filesystem (npm) and rust-mcp-filesystem
# (cargo install; several minutes on 2 cores, once) under target/mcp-peers/,
# then runs bin/writegate/benches/mcp_peers.rs in the release profile. It
# prints ops/s and ratios, idle memory and start-up time; it asserts nothing.
#
# Needs: node and npm, cargo. Versions can be overridden:
#   NODE_FS_VERSION=2026.8.31 RUST_FS_VERSION=0.4.5 scripts/bench-mcp-peers.sh
# WG_BENCH_SCALE=0.5 (or 2) scales the number of operations.
set -eu

root=$(cd "$(dirname "$0")/.." && pwd)
peers="$root/target/mcp-peers"
node_version=${NODE_FS_VERSION:-2026.8.31}
rust_version=${RUST_FS_VERSION:-0.4.5}

node_fs="$peers/npm/node_modules/@modelcontextprotocol/server-filesystem/dist/index.js"
installed_node=$(sed -n 's/^  "version": "\(.*\)",$/\1/p' \
  "$peers/npm/node_modules/@modelcontextprotocol/server-filesystem/package.json" 2>/dev/null || true)
if [ "$installed_node" != "$node_version" ]; then
  echo "installing @modelcontextprotocol/server-filesystem@$node_version (npm)" >&2
  mkdir -p "$peers/npm"
  npm install --prefix "$peers/npm" --no-audit --no-fund --silent \
    "@modelcontextprotocol/server-filesystem@$node_version"
fi

rust_fs="$peers/cargo/bin/rust-mcp-filesystem"
if ! "$rust_fs" --version 2>/dev/null | grep -q " $rust_version\$"; then
  echo "installing rust-mcp-filesystem $rust_version (cargo install; slow, once)" >&2
  cargo install rust-mcp-filesystem --version "$rust_version" --locked \
    --root "$peers/cargo" --target-dir "$peers/build"
fi

cd "$root"
WG_PEER_NODE_FS="$node_fs" WG_PEER_RUST_FS="$rust_fs" \
  cargo bench -p writegate --bench mcp_peers
