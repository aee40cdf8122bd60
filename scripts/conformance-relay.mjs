// The bearer token for the MCP conformance suite, which has no option to send
// a header of its own (`conformance server --url URL` only). Listens on
// 127.0.0.1 (a port of its own, printed as the first line of stdout) and
// passes every request to the daemon's MCP HTTP listener as it came, adding
// `Authorization: Bearer <token>`: what an agent's configured header does.
//
// `Host` and `Origin` are passed on unchanged, except that this relay's own
// authority in them becomes the daemon's (same host name, the daemon's
// port), so a request the suite means as local stays local and every other
// one (the DNS-rebinding scenario's `evil.example.com`) reaches the daemon's
// own check as it was sent. Responses (SSE streams included) are streamed
// back as they come.
//
// Usage: node conformance-relay.mjs DAEMON_PORT TOKEN_FILE
import http from "node:http";
import fs from "node:fs";

const daemonPort = Number(process.argv[2]);
const token = fs.readFileSync(process.argv[3], "utf8").trim();
let relayPort = 0;

// `authority` with this relay's port replaced by the daemon's, when it
// names a loopback host on this relay's port; anything else as it is.
function toDaemon(authority) {
  if (typeof authority !== "string") return authority;
  const m = /^(127\.0\.0\.1|localhost|\[::1\]):(\d+)$/.exec(authority);
  return m && Number(m[2]) === relayPort ? `${m[1]}:${daemonPort}` : authority;
}

const server = http.createServer((req, res) => {
  const headers = { ...req.headers, authorization: `Bearer ${token}` };
  headers.host = toDaemon(req.headers.host);
  if (req.headers.origin) {
    const o = /^(https?:\/\/)(.*)$/.exec(req.headers.origin);
    headers.origin = o ? o[1] + toDaemon(o[2]) : req.headers.origin;
  }
  const upstream = http.request(
    { host: "127.0.0.1", port: daemonPort, method: req.method, path: req.url, headers },
    (up) => {
      res.writeHead(up.statusCode, up.headers);
      up.pipe(res);
    },
  );
  upstream.on("error", (e) => {
    if (!res.headersSent) res.writeHead(502, { "content-type": "text/plain" });
    res.end(`relay: ${e.message}\n`);
  });
  res.on("close", () => upstream.destroy());
  req.pipe(upstream);
});
server.listen(0, "127.0.0.1", () => {
  relayPort = server.address().port;
  console.log(relayPort);
});
