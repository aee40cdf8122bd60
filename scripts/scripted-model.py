#!/usr/bin/env python3
"""A scripted model for scripts/check-agents.sh, on 127.0.0.1 only.

It answers in four API shapes, whichever the agent speaks:

  OpenAI chat completions   POST .../chat/completions             (qwen-code)
  Gemini generateContent    POST .../models/M:[stream]GenerateContent (Gemini CLI)
  Anthropic Messages        POST .../messages                      (Claude Code)
  OpenAI Responses          POST .../responses                     (Codex)

streaming (server-sent events) when the request asks for it. Every request
that offers tools is one turn of the same script, chosen by how many tool
results the conversation already holds:

  0  call writegate's write_file: created.txt, "created\\n"
  1  call writegate's edit_file: replace "two" with "TWO" in crlf.txt
  2  call writegate's write_file: .env (writegate's gate holds it)
  3  answer "done" (no tool call)

With --shell (check-agents.sh --sandbox), the script starts with a call of
the agent's shell tool (run_shell_command, Bash, shell) that writes
direct.txt with a shell redirection: inside `writegate run` its result
says "Permission denied", and the script goes on with writegate's tools.

The tool names are the offered ones that contain "writegate" and end in
write_file / edit_file, so the script is the same for every agent's prefix.
A request without tools (a title, a summary, a router) gets a short text.

Each request is one JSON line in the log (--log): the path, the shape, the
names of the tools offered, the step and the tool results seen, so the
check asserts from the model's side what it was offered and told.

    scripts/scripted-model.py --port-file FILE --log FILE
"""

import argparse
import json
import re
import sys
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

LOG_LOCK = threading.Lock()
ARGS = None


def writegate_tool(names, suffix):
    """The offered tool of writegate's that ends in `suffix`."""
    for n in names:
        if "writegate" in n and n.endswith(suffix):
            return n
    return None


# The agents' shell tools and the arguments of the scripted direct write.
DIRECT = "echo direct > direct.txt"
SHELL_TOOLS = {
    "run_shell_command": {"command": DIRECT, "is_background": False, "description": "write direct.txt"},
    "Bash": {"command": DIRECT, "description": "write direct.txt"},
    "shell": {"command": ["sh", "-c", DIRECT]},
}


def script(names, deferred, calls):
    """(tool name, arguments) of this turn, or (None, text). `names`: the
    tools offered with their schemas; `deferred`: tools named but loaded
    only through the agent's tool search (Claude Code's ToolSearch);
    `calls`: the names of the tools already called in the conversation."""
    shell = next((n for n in SHELL_TOOLS if n in names), None)
    if ARGS.shell and shell and shell not in calls:
        return shell, SHELL_TOOLS[shell]
    search = next((n for n in ("ToolSearch", "tool_search") if n in names), None)
    deferred_only = writegate_tool(names, "write_file") is None and writegate_tool(deferred, "write_file")
    if deferred_only and search and search not in calls:
        wanted = [n for n in deferred if "writegate" in n]
        return search, {"query": "select:" + ",".join(wanted)}
    # qwen-code calls a deferred tool through its bridge, tool_call.
    bridge = deferred_only and "tool_call" in names
    names = names + deferred
    step = sum(1 for c in calls if c and "writegate" in c)
    tool, args = step_of(names, step)
    if bridge and tool:
        return "tool_call", {"name": tool, "arguments": args}
    return tool, args


def step_of(names, step):
    """The scripted call of writegate's number `step`."""
    if step == 0:
        return writegate_tool(names, "write_file"), {
            "path": "created.txt",
            "content": "created\n",
        }
    if step == 1:
        return writegate_tool(names, "read_file"), {"path": "crlf.txt"}
    if step == 2:
        return writegate_tool(names, "edit_file"), {
            "path": "crlf.txt",
            "mode": "replace",
            "find": "two",
            "content": "TWO",
        }
    if step == 3:
        return writegate_tool(names, "write_file"), {
            "path": ".env",
            "content": "TOKEN=scripted\n",
        }
    return None, "done"


def text_of(content):
    """The text inside a tool result, whatever its shape."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(text_of(c) for c in content)
    if isinstance(content, dict):
        for k in ("text", "output", "content", "response", "result"):
            if k in content:
                return text_of(content[k])
        return json.dumps(content)
    return str(content)


# --- the four shapes: tool names offered, tool results seen -----------------


def call_name(function):
    """A chat tool call's tool: the bridged tool's name for `tool_call`."""
    if function.get("name") == "tool_call":
        try:
            return json.loads(function.get("arguments") or "{}").get("name")
        except ValueError:
            return None
    return function.get("name")


QWEN_DEFERRED = re.compile(r'^- "([^"]+)": ', re.M)


def openai_chat(body):
    names = [t.get("function", {}).get("name") or t.get("name") for t in body.get("tools") or []]
    msgs = body.get("messages", [])
    calls = [call_name(c.get("function", {})) for m in msgs if m.get("role") == "assistant" for c in m.get("tool_calls") or []]
    results = [text_of(m.get("content")) for m in msgs if m.get("role") == "tool"]
    # qwen-code names the MCP tools reachable through tool_search in a message.
    deferred = []
    for m in msgs:
        for t in [m.get("content")] if isinstance(m.get("content"), str) else m.get("content") or []:
            t = t if isinstance(t, str) else t.get("text", "") if isinstance(t, dict) else ""
            if "reachable through `tool_search`" in t:
                deferred += [n for n in QWEN_DEFERRED.findall(t) if n.startswith("mcp__")]
    return names, deferred, calls, results


def gemini(body):
    names = []
    for t in body.get("tools") or []:
        for d in t.get("functionDeclarations") or t.get("function_declarations") or []:
            names.append(d.get("name"))
    results, calls = [], []
    for c in body.get("contents", []):
        for p in c.get("parts", []):
            fr = p.get("functionResponse") or p.get("function_response")
            if fr:
                results.append(text_of(fr.get("response")))
            fc = p.get("functionCall") or p.get("function_call")
            if fc:
                calls.append(fc.get("name"))
    return names, [], calls, results


DEFERRED_MARK = "The following deferred tools are now available via ToolSearch."


def anthropic(body):
    names = [t.get("name") for t in body.get("tools") or [] if not t.get("defer_loading")]
    results, calls, deferred = [], [], []
    system = body.get("system")
    system = [{"role": "system", "content": system if isinstance(system, (str, list)) else []}]
    for m in system + body.get("messages", []):
        content = m.get("content")
        texts = [content] if isinstance(content, str) else []
        for b in content if isinstance(content, list) else []:
            if b.get("type") == "tool_result":
                results.append(text_of(b.get("content")))
            elif b.get("type") == "tool_use":
                calls.append(b.get("name"))
            elif b.get("type") == "text":
                texts.append(b.get("text", ""))
        for t in texts:
            # Claude Code names the tools it loads on demand in a message.
            if DEFERRED_MARK in t:
                for line in t.split(DEFERRED_MARK, 1)[1].splitlines()[1:]:
                    if not line.strip():
                        break
                    deferred.append(line.strip())
    return names, deferred, calls, results


def responses(body):
    names = []
    for t in body.get("tools") or []:
        if t.get("type") == "namespace":
            for inner in t.get("tools") or []:
                names.append(f"{t.get('name')}.{inner.get('name')}")
        else:
            names.append(t.get("name") or t.get("type"))
    items = [i for i in body.get("input") or [] if isinstance(i, dict)]
    results = [text_of(i.get("output")) for i in items if i.get("type") in ("function_call_output", "custom_tool_call_output")]
    calls = [
        (i["namespace"] + "." if i.get("namespace") else "") + (i.get("name") or "")
        for i in items
        if i.get("type") in ("function_call", "custom_tool_call")
    ]
    return names, [], calls, results


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, fmt, *args):
        pass

    def record(self, entry):
        with LOG_LOCK, open(ARGS.log, "a") as f:
            f.write(json.dumps(entry) + "\n")

    def send_json(self, obj, status=200):
        data = json.dumps(obj).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def start_sse(self):
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Connection", "close")
        self.end_headers()
        self.close_connection = True

    def sse(self, data, event=None):
        out = ""
        if event:
            out += f"event: {event}\n"
        out += f"data: {data if isinstance(data, str) else json.dumps(data)}\n\n"
        self.wfile.write(out.encode())
        self.wfile.flush()

    def do_GET(self):
        self.record({"method": "GET", "path": self.path})
        if "models" in self.path:
            self.send_json({"object": "list", "data": [{"id": "scripted", "object": "model"}], "models": []})
        else:
            self.send_json({})

    def do_HEAD(self):
        self.send_response(200)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def do_POST(self):
        n = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(n) if n else b""
        try:
            body = json.loads(raw or b"{}")
        except ValueError:
            body = {}
        if ARGS.dump:
            import os

            name = f"{time.time():.6f}-{os.getpid()}-{threading.get_ident()}.json"
            with open(os.path.join(ARGS.dump, name), "wb") as f:
                f.write(raw)
        path = self.path.split("?")[0]
        if path.endswith("/chat/completions"):
            shape, (names, deferred, calls, results) = "openai-chat", openai_chat(body)
        elif ":generateContent" in path or ":streamGenerateContent" in path:
            shape, (names, deferred, calls, results) = "gemini", gemini(body)
        elif path.endswith("/messages/count_tokens"):
            self.record({"method": "POST", "path": self.path, "shape": "anthropic-count"})
            return self.send_json({"input_tokens": 100})
        elif path.endswith("/messages"):
            shape, (names, deferred, calls, results) = "anthropic", anthropic(body)
        elif path.endswith("/responses"):
            shape, (names, deferred, calls, results) = "responses", responses(body)
        elif ":countTokens" in path:
            return self.send_json({"totalTokens": 100})
        else:
            self.record({"method": "POST", "path": self.path, "shape": "unknown"})
            return self.send_json({"error": {"message": f"scripted model: no such endpoint {path}"}}, 404)
        if names:
            tool, args = script(names, deferred, calls)
            step = len(calls)
        else:
            tool, args, step = None, "ok", None
        if tool is None and not isinstance(args, str):
            # writegate's tool is not offered: say so and stop.
            args = "writegate's tool is not offered"
        self.record(
            {
                "method": "POST",
                "path": self.path,
                "shape": shape,
                "tools": names,
                "deferred": deferred,
                "step": step,
                "results": results,
                "call": tool,
                "arguments": args if tool else None,
            }
        )
        getattr(self, "answer_" + shape.replace("-", "_"))(body, path, tool, args)

    # --- answers ------------------------------------------------------------

    def answer_openai_chat(self, body, path, tool, args):
        cid = "chatcmpl-" + uuid.uuid4().hex[:12]
        base = {"id": cid, "object": "chat.completion.chunk", "created": int(time.time()), "model": body.get("model", "scripted")}
        usage = {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}
        if tool:
            call = {"index": 0, "id": "call_" + uuid.uuid4().hex[:12], "type": "function",
                    "function": {"name": tool, "arguments": json.dumps(args)}}
            message, finish = {"role": "assistant", "content": None, "tool_calls": [call]}, "tool_calls"
        else:
            message, finish = {"role": "assistant", "content": args}, "stop"
        if not body.get("stream"):
            if tool:
                message["tool_calls"][0].pop("index")
            return self.send_json({**base, "object": "chat.completion",
                                   "choices": [{"index": 0, "message": message, "finish_reason": finish}],
                                   "usage": usage})
        self.start_sse()
        self.sse({**base, "choices": [{"index": 0, "delta": message, "finish_reason": None}]})
        self.sse({**base, "choices": [{"index": 0, "delta": {}, "finish_reason": finish}], "usage": usage})
        self.sse("[DONE]")

    def answer_gemini(self, body, path, tool, args):
        part = {"functionCall": {"name": tool, "args": args}} if tool else {"text": args}
        resp = {
            "candidates": [{"content": {"role": "model", "parts": [part]}, "finishReason": "STOP", "index": 0}],
            "usageMetadata": {"promptTokenCount": 10, "candidatesTokenCount": 5, "totalTokenCount": 15},
            "modelVersion": "scripted",
        }
        if ":streamGenerateContent" not in path:
            return self.send_json(resp)
        self.start_sse()
        self.sse(resp)

    def answer_anthropic(self, body, path, tool, args):
        mid = "msg_" + uuid.uuid4().hex[:12]
        if tool:
            block = {"type": "tool_use", "id": "toolu_" + uuid.uuid4().hex[:12], "name": tool, "input": args}
            stop = "tool_use"
        else:
            block = {"type": "text", "text": args}
            stop = "end_turn"
        usage = {"input_tokens": 10, "output_tokens": 5}
        msg = {"id": mid, "type": "message", "role": "assistant", "model": body.get("model", "scripted"),
               "content": [block], "stop_reason": stop, "stop_sequence": None, "usage": usage}
        if not body.get("stream"):
            return self.send_json(msg)
        self.start_sse()
        self.sse({"type": "message_start", "message": {**msg, "content": [], "stop_reason": None}}, "message_start")
        if tool:
            self.sse({"type": "content_block_start", "index": 0, "content_block": {**block, "input": {}}}, "content_block_start")
            self.sse({"type": "content_block_delta", "index": 0,
                      "delta": {"type": "input_json_delta", "partial_json": json.dumps(args)}}, "content_block_delta")
        else:
            self.sse({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}, "content_block_start")
            self.sse({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": args}}, "content_block_delta")
        self.sse({"type": "content_block_stop", "index": 0}, "content_block_stop")
        self.sse({"type": "message_delta", "delta": {"stop_reason": stop, "stop_sequence": None},
                  "usage": {"output_tokens": 5}}, "message_delta")
        self.sse({"type": "message_stop"}, "message_stop")

    def answer_responses(self, body, path, tool, args):
        rid = "resp_" + uuid.uuid4().hex[:12]
        if tool:
            item = {"type": "function_call", "id": "fc_" + uuid.uuid4().hex[:12],
                    "call_id": "call_" + uuid.uuid4().hex[:12], "name": tool,
                    "arguments": json.dumps(args), "status": "completed"}
            if "." in tool:
                # A tool inside a namespace (Codex's MCP servers): "namespace.name".
                item["namespace"], item["name"] = tool.split(".", 1)
        else:
            item = {"type": "message", "id": "msg_" + uuid.uuid4().hex[:12], "role": "assistant", "status": "completed",
                    "content": [{"type": "output_text", "text": args, "annotations": []}]}
        usage = {"input_tokens": 10, "input_tokens_details": {"cached_tokens": 0}, "output_tokens": 5,
                 "output_tokens_details": {"reasoning_tokens": 0}, "total_tokens": 15}
        resp = {"id": rid, "object": "response", "created_at": int(time.time()), "status": "completed",
                "model": body.get("model", "scripted"), "output": [item], "usage": usage}
        if not body.get("stream"):
            return self.send_json(resp)
        self.start_sse()
        self.sse({"type": "response.created", "response": {**resp, "status": "in_progress", "output": []}}, "response.created")
        self.sse({"type": "response.output_item.added", "output_index": 0, "item": item}, "response.output_item.added")
        self.sse({"type": "response.output_item.done", "output_index": 0, "item": item}, "response.output_item.done")
        self.sse({"type": "response.completed", "response": resp}, "response.completed")


def main():
    global ARGS
    p = argparse.ArgumentParser()
    p.add_argument("--port-file", required=True, help="where the chosen port is written")
    p.add_argument("--log", required=True, help="one JSON line per request")
    p.add_argument("--shell", action="store_true", help="start with a direct write through the agent's shell tool")
    p.add_argument("--dump", help="a directory that gets every request body (debugging)")
    ARGS = p.parse_args()
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    with open(ARGS.port_file + ".tmp", "w") as f:
        f.write(str(server.server_address[1]))
    import os

    os.replace(ARGS.port_file + ".tmp", ARGS.port_file)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    sys.exit(0)


if __name__ == "__main__":
    main()
