#!/usr/bin/python3
"""A ConfigMap cache in Python, watching through kretry-proxy beside it in the pod.

The official client (pip install kubernetes) pointed at http://127.0.0.1:8001: no token,
no CA, no kubeconfig - the proxy sends the pod's service-account token and verifies the API
server. It lists the ConfigMaps of its namespace, then watches from the list's
resourceVersion. Through the proxy a cut connection, a 503 or 429, or an InternalError event
never reaches it: the watch goes on, and only a 410 Expired (the history it asked for is gone)
ends it, after which it lists again, as the client's documentation advises.

It prints one JSON object a line:
  {"list": RV, "items": N}              a list
  {"event": TYPE, "name": N, "rv": RV}  a watch event
  {"ended": KIND, "detail": "..."}      the watch raised (then it lists again)
and when stopped (SIGTERM) {"cache": {name: rv}, "lists": N, "ended": N}.

Environment: KRETRY_PROXY (default http://127.0.0.1:8001), NAMESPACE (default: the pod's)."""

import json
import os
import signal
import time

from kubernetes import client, watch

POD_NAMESPACE = "/var/run/secrets/kubernetes.io/serviceaccount/namespace"


class Stop(BaseException):
    """SIGTERM: not an Exception, so that no handler of the client swallows it."""


def out(**fields):
    print(json.dumps(fields), flush=True)


def namespace():
    if os.environ.get("NAMESPACE"):
        return os.environ["NAMESPACE"]
    with open(POD_NAMESPACE) as f:
        return f.read().strip()


def main():
    # The one line that makes it go through kretry-proxy.
    client.Configuration.set_default(client.Configuration(host=os.environ.get("KRETRY_PROXY", "http://127.0.0.1:8001")))
    v1, ns = client.CoreV1Api(), namespace()

    def stop(signum, frame):
        raise Stop()

    signal.signal(signal.SIGTERM, stop)
    cache, lists, ended = {}, 0, 0
    try:
        while True:
            lists += 1
            listed = v1.list_namespaced_config_map(ns)
            cache = {cm.metadata.name: cm.metadata.resource_version for cm in listed.items}
            out(list=listed.metadata.resource_version, items=len(cache))
            try:
                stream = watch.Watch().stream(v1.list_namespaced_config_map, ns,
                                              resource_version=listed.metadata.resource_version)
                for event in stream:
                    obj = event["object"]
                    if event["type"] == "DELETED":
                        cache.pop(obj.metadata.name, None)
                    else:
                        cache[obj.metadata.name] = obj.metadata.resource_version
                    out(event=event["type"], name=obj.metadata.name, rv=obj.metadata.resource_version)
            except client.exceptions.ApiException as err:
                ended += 1
                out(ended="ApiException %s" % err.status, detail=str(err.reason))
                time.sleep(1)
    except Stop:
        out(cache=cache, lists=lists, ended=ended)


if __name__ == "__main__":
    main()
