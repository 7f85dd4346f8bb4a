#!/bin/bash
# kretry-proxy's resident memory while it holds LIST bodies whole: a stand-in API server on
# loopback serves a custom resource's JSON list (keys sorted, so kretry holds it) of about
# 32 MB; kretry-proxy with --list-buffer-size 32Mi serves it to 0, 1, 2 and 4 clients at once
# (three rounds each) and its process_resident_memory_bytes is read from /metrics after.
#   tools/proxy-memory.sh            (from the repository's root; needs go, python3, curl)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
dir=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null; rm -rf "$dir"' EXIT
api=${API_PORT:-18771} serve=${PROXY_PORT:-18772} probe=${PROBE_PORT:-18773}
(cd "$root/cmd/kretry-proxy" && CGO_ENABLED=0 go build -trimpath -o "$dir/kretry-proxy" .)
cat >"$dir/kubeconfig" <<KC
apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "http://127.0.0.1:$api"}}]
users: [{name: u, user: {}}]
contexts: [{name: c, context: {cluster: c, user: u}}]
current-context: c
KC
python3 - "$api" <<'PY' &
import http.server, sys
item = '{"apiVersion":"example.com/v1","kind":"Widget","metadata":{"name":"w","namespace":"default"},"spec":{"pad":"%s"}}' % ("x" * 1000)
body = ('{"apiVersion":"example.com/v1","items":[' + ",".join([item] * 30000) + '],"kind":"WidgetList","metadata":{"resourceVersion":"7"}}').encode()
class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def do_GET(self):
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
    def log_message(self, *args): pass
http.server.ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), Handler).serve_forever()
PY
sleep 2
for clients in 0 1 2 4; do
  "$dir/kretry-proxy" --kubeconfig "$dir/kubeconfig" --port "$serve" --probe-address "127.0.0.1:$probe" \
    --list-buffer-size 32Mi >/dev/null 2>&1 &
  proxy=$!
  until curl -sf -o /dev/null "http://127.0.0.1:$probe/healthz"; do
    kill -0 "$proxy" 2>/dev/null || { echo "kretry-proxy did not start (ports $serve, $probe in use?)" >&2; exit 1; }
    sleep 0.2
  done
  kill -0 "$proxy" 2>/dev/null || { echo "kretry-proxy did not start (ports $serve, $probe in use?)" >&2; exit 1; }
  for round in 1 2 3; do
    pids=()
    for ((i = 0; i < clients; i++)); do
      curl -sf -o /dev/null "http://127.0.0.1:$serve/apis/example.com/v1/namespaces/default/widgets" & pids+=($!)
    done
    for pid in "${pids[@]}"; do wait "$pid"; done
  done
  rss=$(curl -sf "http://127.0.0.1:$probe/metrics" | awk '$1 == "process_resident_memory_bytes" {printf "%.0f", $2 / 1048576}')
  size=$(curl -sf -o /dev/null -w '%{size_download}' "http://127.0.0.1:$serve/apis/example.com/v1/namespaces/default/widgets")
  kill -TERM "$proxy"; wait "$proxy" || true
  echo "list of $size bytes held by $clients client(s) at once: resident memory after $rss MiB"
done
