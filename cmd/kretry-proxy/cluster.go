package main

import (
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strings"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// defaultServiceAccountDir is where a pod finds its service account's token and CA.
const defaultServiceAccountDir = "/var/run/secrets/kubernetes.io/serviceaccount"

// cluster is the API server the proxy serves, and how it was found.
type cluster struct {
	config *rest.Config
	// tokenFile, in-cluster, is the service-account token, read again as it rotates.
	tokenFile string
	// found says where the cluster came from, for the log: never a credential.
	found string
}

// findCluster finds the cluster as kubectl does: --kubeconfig, else the files of
// $KUBECONFIG, else ~/.kube/config, else the pod's service account (in-cluster); --context
// picks a context of the kubeconfig. When none is found, the error says what was tried.
// getenv is os.Getenv but for tests.
func findCluster(o options, getenv func(string) string) (cluster, error) {
	rules := &clientcmd.ClientConfigLoadingRules{ExplicitPath: o.kubeconfig}
	var tried []string
	switch env := getenv(clientcmd.RecommendedConfigPathEnvVar); {
	case o.kubeconfig != "":
		if _, err := os.Stat(o.kubeconfig); err != nil {
			return cluster{}, fmt.Errorf("--kubeconfig: %w", err)
		}
	case env != "":
		rules.Precedence = filepath.SplitList(env)
		tried = append(tried, fmt.Sprintf("$%s=%s (%s)", clientcmd.RecommendedConfigPathEnvVar, env, missingOrEmpty(rules.Precedence)))
	default:
		tried = append(tried, "--kubeconfig (not set)", "$"+clientcmd.RecommendedConfigPathEnvVar+" (not set)")
		if home := getenv("HOME"); home != "" {
			rules.Precedence = []string{filepath.Join(home, clientcmd.RecommendedHomeDir, clientcmd.RecommendedFileName)}
			tried = append(tried, fmt.Sprintf("%s (%s)", rules.Precedence[0], missingOrEmpty(rules.Precedence)))
		} else {
			tried = append(tried, "~/.kube/config ($HOME not set)")
		}
	}
	merged, err := rules.Load()
	if err != nil {
		return cluster{}, fmt.Errorf("kubeconfig: %w", err)
	}
	if o.kubeconfig != "" && clientcmdapi.IsConfigEmpty(merged) {
		return cluster{}, fmt.Errorf("--kubeconfig %s holds no cluster", o.kubeconfig)
	}
	if !clientcmdapi.IsConfigEmpty(merged) {
		overrides := &clientcmd.ConfigOverrides{CurrentContext: o.context}
		loader := clientcmd.NewNonInteractiveClientConfig(*merged, o.context, overrides, rules)
		cfg, err := loader.ClientConfig()
		if err != nil {
			return cluster{}, fmt.Errorf("kubeconfig %s: %w", strings.Join(rules.GetLoadingPrecedence(), string(filepath.ListSeparator)), err)
		}
		raw, _ := loader.RawConfig()
		contextName := o.context
		if contextName == "" {
			contextName = raw.CurrentContext
		}
		return cluster{config: cfg, found: fmt.Sprintf("kubeconfig %s, context %q",
			strings.Join(rules.GetLoadingPrecedence(), string(filepath.ListSeparator)), contextName)}, nil
	}
	c, inClusterErr := inCluster(o.serviceAccountDir, getenv)
	if inClusterErr == nil && o.context != "" {
		return cluster{}, fmt.Errorf("--context %q: no kubeconfig found to take it from (tried %s); in-cluster has no contexts",
			o.context, strings.Join(tried, ", "))
	}
	if inClusterErr != nil {
		tried = append(tried, "in-cluster ("+inClusterErr.Error()+")")
		return cluster{}, fmt.Errorf("no cluster found: tried %s; pass --kubeconfig, or --demo to serve an in-process demo API server",
			strings.Join(tried, ", "))
	}
	return c, nil
}

// missingOrEmpty says why none of the kubeconfig files gave a cluster.
func missingOrEmpty(paths []string) string {
	for _, p := range paths {
		if _, err := os.Stat(p); err == nil {
			return "empty"
		}
	}
	if len(paths) == 1 {
		return "no such file"
	}
	return "no such files"
}

// inCluster is the cluster of the pod the proxy runs in: the API server of
// KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT, verified with the pod's CA, and the
// service account's token, which the proxy reads again as it rotates.
func inCluster(dir string, getenv func(string) string) (cluster, error) {
	host, port := getenv("KUBERNETES_SERVICE_HOST"), getenv("KUBERNETES_SERVICE_PORT")
	if host == "" || port == "" {
		return cluster{}, errors.New("KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT not set")
	}
	token, ca := filepath.Join(dir, "token"), filepath.Join(dir, "ca.crt")
	for _, f := range []string{token, ca} {
		if _, err := os.Stat(f); err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return cluster{}, fmt.Errorf("KUBERNETES_SERVICE_HOST is set but %s is missing (is a service account token mounted?)", f)
			}
			return cluster{}, err
		}
	}
	server := "https://" + net.JoinHostPort(host, port)
	return cluster{
		config:    &rest.Config{Host: server, TLSClientConfig: rest.TLSClientConfig{CAFile: ca}},
		tokenFile: token,
		found:     fmt.Sprintf("in-cluster, service account token %s (read again as it rotates)", token),
	}, nil
}
