#!/usr/bin/env bash
# Checks that qwen-code and Gemini CLI, installed from npm into a scratch
# directory, list writegate as a connected MCP server from the configuration
# `writegate setup` writes. Everything happens under a scratch HOME; nothing
# of the person's own settings is read or changed. CI does not run it (it
# needs the npm registry).
#
#   scripts/check-agents.sh [WRITEGATE]   # default: target/debug/writegate (built if missing)
#
# Exit status: 0 when both list writegate as connected, 1 otherwise.
set -euo pipefail

repo=$(cd "$(dirname "$0")/.." && pwd)
writegate=${1:-$repo/target/debug/writegate}
if [ ! -x "$writegate" ]; then
    (cd "$repo" && cargo build -p writegate)
fi
writegate=$(realpath "$writegate")

scratch=$(mktemp -d /tmp/writegate-check-agents.XXXXXX)
trap 'rm -rf "$scratch"' EXIT
home=$scratch/home
project=$scratch/project
mkdir -p "$home" "$project"

echo "installing @qwen-code/qwen-code and @google/gemini-cli into $scratch/npm ..."
npm install --silent --no-audit --no-fund --prefix "$scratch/npm" \
    @qwen-code/qwen-code@latest @google/gemini-cli@latest >"$scratch/npm.log" 2>&1 ||
    { cat "$scratch/npm.log"; exit 1; }
bin=$scratch/npm/node_modules/.bin
echo "qwen-code $("$bin/qwen" --version 2>/dev/null), gemini-cli $("$bin/gemini" --version 2>/dev/null)"

HOME=$home "$writegate" setup qwen-code >/dev/null
HOME=$home "$writegate" setup gemini-cli >/dev/null
# Gemini CLI starts MCP servers only in a trusted folder: what choosing
# "Trust folder" at its prompt writes.
printf '{"%s": "TRUST_FOLDER"}\n' "$project" >"$home/.gemini/trustedFolders.json"

status=0
for agent in qwen gemini; do
    out=$(cd "$project" && HOME=$home timeout 120 "$bin/$agent" mcp list 2>&1 || true)
    # Strip colour codes before matching.
    line=$(printf '%s\n' "$out" | sed 's/\x1b\[[0-9;]*m//g' | grep -E 'writegate:' || true)
    echo "$agent mcp list: ${line:-<no writegate line>}"
    case "$line" in
        *"$writegate mcp --client-roots trusted"*Connected*) ;;
        *) status=1; printf '%s\n' "$out" ;;
    esac
done
if [ "$status" = 0 ]; then
    echo "ok: both agents list writegate as connected"
else
    echo "FAILED: see the output above"
fi
exit "$status"
