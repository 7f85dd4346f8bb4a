package main

import (
	"flag"
	"fmt"
	"os"

	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
)

func main() {
	namespace := flag.String("namespace", "default", "namespace whose ConfigMaps are reconciled")
	metricsAddr := flag.String("metrics-bind-address", ":8080", `address of /metrics (kretry_retries_total among controller-runtime's metrics); "0" turns it off`)
	// ctrl.GetConfigOrDie reads --kubeconfig (registered by controller-runtime), KUBECONFIG,
	// the in-cluster config or ~/.kube/config.
	flag.Parse()
	ctrl.SetLogger(klog.NewKlogr())

	mgr, r, err := newManager(ctrl.GetConfigOrDie(), options{namespace: *namespace, metricsAddr: *metricsAddr})
	if err != nil {
		fmt.Fprintln(os.Stderr, "controller-runtime example:", err)
		os.Exit(1)
	}
	if err := mgr.Start(ctrl.SetupSignalHandler()); err != nil {
		fmt.Fprintln(os.Stderr, "controller-runtime example:", err)
		os.Exit(1)
	}
	fmt.Printf("%d reconciles\n", r.reconciles.Load())
}
