#!/usr/bin/python3
"""The kretry e2e suite's Python client: a list-then-watch cache of the ConfigMaps of one
namespace, written with the official client (Debian's python3-kubernetes) the way its
documentation shows: list, then watch.Watch().stream(list_namespaced_config_map, ...) from the
list's resourceVersion; when the stream raises (a cut connection, an ERROR event, an error
answer), list again and watch from there, as watch.stream's docstring advises for 410.

It prints one JSON object a line on stdout, as things happen:
  {"list": RV, "items": N}             a successful list
  {"list_failed": KIND, "detail": "..."} a list that raised (tried again after 1s)
  {"event": TYPE, "name": N, "rv": RV}   a watch event
  {"ended": KIND, "detail": "..."}       the watch stream raised
and on SIGTERM {"cache": {name: rv}, "lists": N, "ended": N}, then exits.

With --server the client talks to kretry-proxy: the one-line change is the Configuration."""

import argparse
import json
import signal
import time

from kubernetes import client, config, watch


class Stop(BaseException):
    """SIGTERM: not an Exception, so that no handler of the client swallows it."""


def out(**fields):
    print(json.dumps(fields), flush=True)


def kind(err):
    """What ended a call, in a word: the exception's class, with the status of an ApiException."""
    if isinstance(err, client.exceptions.ApiException):
        return "ApiException %s" % err.status
    return type(err).__name__


def short(err):
    return ("%s: %s" % (type(err).__name__, err)).splitlines()[0][:200]


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--namespace", required=True)
    target = parser.add_mutually_exclusive_group(required=True)
    target.add_argument("--kubeconfig", help="straight to the API server")
    target.add_argument("--server", help="kretry-proxy's URL, e.g. http://127.0.0.1:8001")
    args = parser.parse_args()

    if args.server:
        client.Configuration.set_default(client.Configuration(host=args.server))
    else:
        config.load_kube_config(config_file=args.kubeconfig)
    v1 = client.CoreV1Api()

    stopping = []

    def stop(signum, frame):
        stopping.append(signum)
        raise Stop()

    signal.signal(signal.SIGTERM, stop)
    cache, lists, ended = {}, 0, 0
    try:
        rv = None
        while True:
            if rv is None:
                lists += 1
                try:
                    listed = v1.list_namespaced_config_map(args.namespace)
                except Exception as err:
                    if stopping:
                        raise Stop()
                    out(list_failed=kind(err), detail=short(err))
                    time.sleep(1)
                    continue
                cache = {cm.metadata.name: cm.metadata.resource_version for cm in listed.items}
                rv = listed.metadata.resource_version
                out(list=rv, items=len(cache))
            try:
                for event in watch.Watch().stream(v1.list_namespaced_config_map, args.namespace, resource_version=rv):
                    obj = event["object"]
                    name, obj_rv = obj.metadata.name, obj.metadata.resource_version
                    if event["type"] == "DELETED":
                        cache.pop(name, None)
                    else:
                        cache[name] = obj_rv
                    out(event=event["type"], name=name, rv=obj_rv)
            except Exception as err:
                if stopping:  # a library turned the Stop into an error of its own
                    raise Stop()
                ended += 1
                out(ended=kind(err), detail=short(err))
                rv = None
                time.sleep(1)
    except Stop:
        out(cache=cache, lists=lists, ended=ended)


if __name__ == "__main__":
    main()
