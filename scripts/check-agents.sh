#!/usr/bin/env bash
# Proves from the agent's side that `writegate setup AGENT` puts each agent's
# file writes through writegate: qwen-code, Gemini CLI, Claude Code and Codex
# CLI, at pinned versions, installed from npm into a scratch directory, each
# run non-interactively in a scratch project with a scratch HOME that holds
# only what `writegate setup` wrote plus the agent's model settings (a base
# URL on 127.0.0.1 and a dummy key). The model is scripts/scripted-model.py on
# 127.0.0.1: it records the tools each request offers and scripts four calls
# of writegate's tools (a create, a read and an edit of a CRLF file, a `.env`
# write).
#
# For each agent it asserts:
#   - the model is offered writegate's read_file, write_file and edit_file
#     (under the agent's prefix; Claude Code and qwen-code offer MCP tools
#     through their tool search) and none of the agent's own write tools;
#   - created.txt is created, crlf.txt is edited with its CRLF endings kept;
#   - the read's result the model sees is writegate's text block: crlf.txt's
#     numbered lines and the line with its hash (read_file sends no
#     structuredContent, which Claude Code and Codex would show instead);
#   - .env is held: not written, its audit event says approval_required;
#   - one audit event per write (the held .env write may have a second: the
#     agent's answer to writegate's question, cancelled or declined).
#
# With --sandbox, each agent is set up with `writegate setup AGENT --sandbox` and
# started through the launcher that writes (so under `writegate run`), with its
# own tools allowed (qwen --yolo), and the model starts with a direct write
# through the agent's shell tool. It also asserts that the shell tool's result
# the model sees says "Permission denied" and that direct.txt is not written.
# The default agents are then qwen only.
#
#   scripts/check-agents.sh [--sandbox] [WRITEGATE]   # default: target/debug/writegate (built if missing)
#   AGENTS="claude gemini" scripts/check-agents.sh   # a subset
#   KEEP=1 scripts/check-agents.sh        # keep the scratch directory
#
# Needs node and npm (the npm registry), python3, and about 1.5 GB of disk
# for the four packages. Exit status: 0 when every agent passes, 1 otherwise.
set -euo pipefail

QWEN_VERSION=0.24.4
GEMINI_VERSION=0.61.0
CLAUDE_VERSION=2.1.332
CODEX_VERSION=0.171.0

sandbox=
if [ "${1:-}" = --sandbox ]; then
    sandbox=1
    shift
fi
repo=$(cd "$(dirname "$0")/.." && pwd)
writegate=${1:-$repo/target/debug/writegate}
if [ ! -x "$writegate" ]; then
    (cd "$repo" && cargo build -p writegate)
fi
writegate=$(realpath "$writegate")
if [ -n "$sandbox" ]; then
    agents=${AGENTS:-qwen}
else
    agents=${AGENTS:-qwen gemini claude codex}
fi

scratch=$(mktemp -d /tmp/writegate-check-agents.XXXXXX)
server_pid=
cleanup() {
    if [ -n "$server_pid" ]; then kill "$server_pid" 2>/dev/null || true; fi
    if [ -z "${KEEP:-}" ]; then rm -rf "$scratch"; else echo "kept $scratch"; fi
}
trap cleanup EXIT

# Only the packages of the agents checked.
packages=()
for agent in $agents; do
    case $agent in
    qwen) packages+=("@qwen-code/qwen-code@$QWEN_VERSION") ;;
    gemini) packages+=("@google/gemini-cli@$GEMINI_VERSION") ;;
    claude) packages+=("@anthropic-ai/claude-code@$CLAUDE_VERSION") ;;
    codex) packages+=("@openai/codex@$CODEX_VERSION") ;;
    esac
done
echo "installing ${packages[*]} into $scratch/npm ..."
npm install --silent --no-audit --no-fund --prefix "$scratch/npm" "${packages[@]}" \
    >"$scratch/npm.log" 2>&1 || { cat "$scratch/npm.log"; exit 1; }
bin=$scratch/npm/node_modules/.bin

touch "$scratch/model.jsonl"
python3 "$repo/scripts/scripted-model.py" --port-file "$scratch/port" --log "$scratch/model.jsonl" \
    ${sandbox:+--shell} >"$scratch/model.out" 2>&1 &
server_pid=$!
: >"$scratch/model.jsonl"
for _ in $(seq 50); do [ -s "$scratch/port" ] && break; sleep 0.1; done
port=$(cat "$scratch/port")
base=http://127.0.0.1:$port

# Adds the model settings (not writegate's) to an agent's JSON settings.
json_set() { # FILE PYTHON-EXPRESSION-ON-v
    python3 - "$1" "$2" <<'EOF'
import json, sys
p, expr = sys.argv[1], sys.argv[2]
v = json.load(open(p))
exec(expr)
json.dump(v, open(p, "w"), indent=2)
EOF
}

# Runs one agent; prints its result line; returns 1 on a failed check.
run_agent() {
    local agent=$1 home=$scratch/home-$1 project=$scratch/project-$1
    mkdir -p "$home" "$project"
    printf 'one\r\ntwo\r\n' >"$project/crlf.txt"
    local own prefix setup cmd=()
    local env=(HOME="$home" PATH="$PATH")
    # Sandboxed: the agent is started by the launcher `writegate setup --sandbox`
    # wrote, first on PATH, which finds the agent itself on PATH after it.
    [ -z "$sandbox" ] || env=(HOME="$home" PATH="$home/.local/share/writegate/bin:$bin:$PATH")
    case $agent in
    qwen)
        setup=qwen-code own='write_file edit notebook_edit' prefix=mcp__writegate__
        HOME=$home "$writegate" setup "$setup" ${sandbox:+--sandbox} >/dev/null
        json_set "$home/.qwen/settings.json" \
            "v.setdefault('security', {}).setdefault('auth', {})['selectedType'] = 'openai'"
        env+=(OPENAI_API_KEY=dummy OPENAI_BASE_URL="$base/v1" OPENAI_MODEL=scripted)
        cmd=("$bin/qwen" -p "Create created.txt, edit crlf.txt, write .env.")
        # Sandboxed: every tool of its own allowed, its shell's write refused by the kernel.
        [ -z "$sandbox" ] || cmd=(qwen --yolo -p "Write direct.txt, create created.txt, edit crlf.txt, write .env.")
        ;;
    gemini)
        setup=gemini-cli own='write_file replace' prefix=mcp_writegate_
        HOME=$home "$writegate" setup "$setup" ${sandbox:+--sandbox} >/dev/null
        json_set "$home/.gemini/settings.json" \
            "v.setdefault('security', {}).setdefault('auth', {})['selectedType'] = 'gemini-api-key'"
        # What choosing "Trust folder" at Gemini's prompt writes.
        printf '{"%s": "TRUST_FOLDER"}\n' "$project" >"$home/.gemini/trustedFolders.json"
        env+=(GEMINI_API_KEY=dummy GOOGLE_GEMINI_BASE_URL="$base")
        # A model named: no routing request to a classifier model.
        cmd=("$bin/gemini" -m gemini-2.5-pro -p "Create created.txt, edit crlf.txt, write .env.")
        ;;
    claude)
        setup=claude-code own='Write Edit MultiEdit NotebookEdit' prefix=mcp__writegate__
        HOME=$home "$writegate" setup "$setup" ${sandbox:+--sandbox} >/dev/null
        env+=(ANTHROPIC_BASE_URL="$base" ANTHROPIC_API_KEY=dummy CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1)
        cmd=("$bin/claude" -p "Create created.txt, edit crlf.txt, write .env.")
        ;;
    codex)
        setup=codex own='apply_patch' prefix=mcp__writegate.
        mkdir -p "$home/.codex"
        cat >"$home/.codex/config.toml" <<EOF
model = "scripted"
model_provider = "scripted"

[model_providers.scripted]
name = "scripted"
base_url = "$base/v1"
env_key = "SCRIPTED_API_KEY"
wire_api = "responses"
EOF
        HOME=$home "$writegate" setup "$setup" ${sandbox:+--sandbox} >/dev/null
        env+=(SCRIPTED_API_KEY=dummy)
        cmd=("$bin/codex" exec --skip-git-repo-check "Create created.txt, edit crlf.txt, write .env.")
        ;;
    esac
    local before
    before=$(wc -l <"$scratch/model.jsonl" 2>/dev/null || echo 0)
    local start=$SECONDS
    (cd "$project" && env -i "${env[@]}" timeout 300 "${cmd[@]}" </dev/null >"$scratch/$agent.out" 2>&1) || true
    local took=$((SECONDS - start))
    tail -n +"$((before + 1))" "$scratch/model.jsonl" >"$scratch/$agent.model.jsonl"
    python3 - "$agent" "$prefix" "$own" "$project" "$home/.local/state/writegate/audit.jsonl" \
        "$scratch/$agent.model.jsonl" "$took" "$sandbox" <<'EOF'
import json, os, re, sys
agent, prefix, own, project, audit, log, took, sandbox = sys.argv[1:]
own = own.split()
problems = []
requests = [json.loads(l) for l in open(log)]
turns = [r for r in requests if r.get("tools")]
offered = set()
for r in turns:
    offered |= set(r["tools"]) | set(r.get("deferred") or [])
ours = [prefix + t for t in ("read_file", "write_file", "edit_file")]
missing = [t for t in ours if t not in offered]
if missing:
    problems.append(f"writegate's {missing} not offered")
theirs = sorted(t for t in offered if t in own)
shell = ""
if sandbox:
    # The model's view: the shell tool's result says the write was refused.
    refused = [r for q in requests for r in q.get("results") or [] if "Permission denied" in r]
    shells = [q for q in requests if q.get("call") in ("run_shell_command", "Bash", "shell")]
    if not shells:
        problems.append("the shell tool was never called")
    elif not refused:
        problems.append("no tool result says Permission denied")
    if os.path.exists(os.path.join(project, "direct.txt")):
        problems.append("direct.txt was written by the shell")
    said = next((l.strip() for l in refused[0].splitlines() if "Permission denied" in l), "") if refused else ""
    shell = f"; shell write refused: {said!r}" if refused else ""
if theirs:
    problems.append(f"its own write tools offered: {theirs}")
created = os.path.join(project, "created.txt")
if not os.path.exists(created) or open(created, "rb").read() != b"created\n":
    problems.append("created.txt not created")
crlf = open(os.path.join(project, "crlf.txt"), "rb").read()
if crlf != b"one\r\nTWO\r\n":
    problems.append(f"crlf.txt is {crlf!r}")
if os.path.exists(os.path.join(project, ".env")):
    problems.append(".env was written")
seen = [r for q in requests for r in q.get("results") or [] if "two" in r and "one" in r]
if any("2\ttwo" in r and "hash sha256:" in r for r in seen):
    read_form = "text block"
elif any(re.search(r'"text": ?"two"', r) for r in seen):
    # read_file sends no structuredContent: an agent showing it would show
    # the model something writegate does not send.
    read_form = "structured content"
    problems.append("the model saw the read as structured content, not writegate's text")
else:
    read_form = "not seen"
    problems.append("no tool result the model saw holds crlf.txt's numbered lines and hash")
events = [json.loads(l) for l in open(audit)] if os.path.exists(audit) else []
reads = [e for e in events if e.get("route") == "mcp read_file" and e.get("type") == "fs.access"]
if len(reads) != 1:
    problems.append(f"{len(reads)} audit events for the read")
writes = [e for e in events if e.get("route") == "mcp write_file"]
edits = [e for e in events if e.get("route") == "mcp edit_file"]
made = [e for e in writes if e.get("type") == "fs.access" and e.get("created")]
held = [e for e in writes if e.get("errorKind") == "approval_required"]
answered = [e for e in writes if e.get("approval")]
if len(made) != 1:
    problems.append(f"{len(made)} audit events for the create")
if len(edits) != 1 or edits[0].get("type") != "fs.access":
    problems.append(f"audit events for the edit: {edits}")
if len(held) != 1:
    problems.append(f"{len(held)} approval_required events for .env")
if len(writes) != len({e["opId"] for e in made + held + answered}) or len(answered) > 1:
    problems.append(f"unexpected write events: {writes}")
if any(e["approval"].startswith("allowed") for e in answered):
    problems.append(f".env was approved: {answered}")
status = "ok" if not problems else "FAILED: " + "; ".join(problems)
names = sorted(t for t in offered if "writegate" in t)
answer = f", .env answered {answered[0]['approval']}" if answered else ""
print(f"{agent}: {status} ({len(turns)} model turns, {took} s; offered {', '.join(names)}; "
      f"own write tools offered: {', '.join(theirs) or 'none'}; read seen as {read_form}; "
      f"audit: create 1, read {len(reads)}, edit {len(edits)}, "
      f".env held {len(held)}{answer}{shell})")
sys.exit(1 if problems else 0)
EOF
}

versions() {
    echo "qwen-code $("$bin/qwen" --version 2>/dev/null | tail -1), gemini-cli $("$bin/gemini" --version 2>/dev/null | tail -1)," \
        "claude-code $("$bin/claude" --version 2>/dev/null | tail -1), codex $("$bin/codex" --version 2>/dev/null | tail -1)," \
        "node $(node --version), writegate $("$writegate" --version 2>/dev/null | tail -1)"
}
versions

status=0
for agent in $agents; do
    if ! run_agent "$agent"; then
        status=1
        echo "--- $agent's output:"
        tail -20 "$scratch/$agent.out"
    fi
done
if [ "$status" = 0 ]; then
    echo "ok: every agent's writes go through writegate${sandbox:+; under writegate run the direct write of the shell is refused}"
else
    echo "FAILED: see the output above"
fi
exit "$status"
