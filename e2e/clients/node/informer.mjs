// The kretry e2e suite's JavaScript client: a stock @kubernetes/client-node informer
// (makeInformer) on the ConfigMaps of one namespace, restarted after an error the way
// client-node's README shows (after 1s instead of 5s, to keep the scenario short).
//
//   node informer.mjs --namespace NS (--kubeconfig PATH | --server http://127.0.0.1:8001)
//
// It prints one JSON object a line on stdout, as things happen:
//   {"list": N}                                     the informer's Nth list call
//   {"event": "add"|"update"|"delete", "src": "list"|"watch", "name": N, "rv": RV}
//   {"ended": "..."}                                the informer reported an error
// and on SIGTERM {"cache": {name: rv}, "lists": N, "ended": N, "connects": N}, then exits.
//
// With --server it talks to kretry-proxy: the one-line change is loadFromClusterAndUser.
import * as k8s from '@kubernetes/client-node';
import { parseArgs } from 'node:util';

const { values: args } = parseArgs({
  options: { namespace: { type: 'string' }, kubeconfig: { type: 'string' }, server: { type: 'string' } },
});
const out = (fields) => process.stdout.write(JSON.stringify(fields) + '\n');

const kc = new k8s.KubeConfig();
if (args.server) {
  // client-node refuses an http:// server unless skipTLSVerify is set: on plain loopback HTTP
  // there is no TLS to verify.
  kc.loadFromClusterAndUser({ name: 'kretry-proxy', server: args.server, skipTLSVerify: true }, { name: 'kretry-proxy' });
} else {
  kc.loadFromFile(args.kubeconfig);
}
const api = kc.makeApiClient(k8s.CoreV1Api);

let lists = 0;
let ended = 0;
let connects = 0;
let fromList = false; // the informer's callbacks between a list's answer and its watch
const listFn = async () => {
  lists++;
  out({ list: lists });
  const list = await api.listNamespacedConfigMap({ namespace: args.namespace });
  fromList = true;
  setImmediate(() => { fromList = false; });
  return list;
};
const informer = k8s.makeInformer(kc, `/api/v1/namespaces/${args.namespace}/configmaps`, listFn);
for (const verb of ['add', 'update', 'delete']) {
  informer.on(verb, (obj) => out({
    event: verb, src: fromList ? 'list' : 'watch', name: obj.metadata.name, rv: obj.metadata.resourceVersion,
  }));
}
informer.on('connect', () => { connects++; });
informer.on('error', (err) => {
  ended++;
  out({ ended: String(err?.message ?? err).split('\n')[0].slice(0, 200) });
  setTimeout(() => informer.start().catch((e) => out({ start_failed: String(e?.message ?? e) })), 1000);
});
process.on('SIGTERM', () => {
  const cache = Object.fromEntries(informer.list().map((o) => [o.metadata.name, o.metadata.resourceVersion]));
  out({ cache, lists, ended, connects });
  process.exit(0);
});
await informer.start();
