package main

import (
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/api/resource"
	"sigs.k8s.io/yaml"
)

// sidecarDir is examples/sidecar, whose kretry-proxy container this command runs as.
var sidecarDir = filepath.Join("..", "..", "examples", "sidecar")

// sidecarBaseline is the memory the rule in docs/kretry-proxy.md#memory gives kretry-proxy
// besides the LIST bodies it holds (22 MiB resident when idle: tools/proxy-memory.sh).
const sidecarBaseline = 32 << 20

type container struct {
	Name  string   `json:"name"`
	Image string   `json:"image"`
	Args  []string `json:"args"`
	Env   []struct {
		Name      string `json:"name"`
		ValueFrom *struct {
			ResourceFieldRef *struct {
				ContainerName string `json:"containerName"`
				Resource      string `json:"resource"`
			} `json:"resourceFieldRef"`
		} `json:"valueFrom"`
	} `json:"env"`
	Ports []struct {
		Name          string `json:"name"`
		ContainerPort int    `json:"containerPort"`
	} `json:"ports"`
	Resources struct {
		Limits map[string]string `json:"limits"`
	} `json:"resources"`
}

func readYAML(t *testing.T, name string, into any) {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(sidecarDir, name))
	if err != nil {
		t.Fatal(err)
	}
	// Not strict: these structs name only what the test reads (TestSidecarManifests has the
	// API server check every field).
	if err := yaml.Unmarshal(raw, into); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
}

// TestSidecarExample: the sidecar's kretry-proxy arguments are flags this command takes; its
// memory limit leaves room for the LIST buffer by the documented rule (32Mi, plus the buffer
// twice for one held LIST at a time) and is the Go runtime's GOMEMLIMIT; Prometheus is
// pointed, by annotations and by podmonitor.yaml, at the port --probe-address serves /metrics
// on; and kustomization.yaml names the image a registry's way.
func TestSidecarExample(t *testing.T) {
	var deployment struct {
		Spec struct {
			Template struct {
				Metadata struct {
					Labels      map[string]string `json:"labels"`
					Annotations map[string]string `json:"annotations"`
				} `json:"metadata"`
				Spec struct {
					InitContainers []container `json:"initContainers"`
				} `json:"spec"`
			} `json:"template"`
		} `json:"spec"`
	}
	readYAML(t, "deployment.yaml", &deployment)
	var proxyContainer *container
	for i, c := range deployment.Spec.Template.Spec.InitContainers {
		if c.Name == "kretry-proxy" {
			proxyContainer = &deployment.Spec.Template.Spec.InitContainers[i]
		}
	}
	if proxyContainer == nil {
		t.Fatal("deployment.yaml has no kretry-proxy init container")
	}
	o, err := parseFlags(proxyContainer.Args, io.Discard)
	if err != nil {
		t.Fatalf("kretry-proxy %q: %v", proxyContainer.Args, err)
	}

	limit, err := resource.ParseQuantity(proxyContainer.Resources.Limits["memory"])
	if err != nil {
		t.Fatalf("kretry-proxy's memory limit: %v", err)
	}
	if need := sidecarBaseline + 2*int64(o.listBufferSize); limit.Value() < need {
		t.Errorf("kretry-proxy's memory limit %s is under 32Mi + 2 x --list-buffer-size %s = %d bytes", limit.String(), o.listBufferSize.String(), need)
	}
	memLimit := false
	for _, env := range proxyContainer.Env {
		if env.Name == "GOMEMLIMIT" && env.ValueFrom != nil && env.ValueFrom.ResourceFieldRef != nil &&
			env.ValueFrom.ResourceFieldRef.ContainerName == "kretry-proxy" && env.ValueFrom.ResourceFieldRef.Resource == "limits.memory" {
			memLimit = true
		}
	}
	if !memLimit {
		t.Error("kretry-proxy's GOMEMLIMIT is not its container's limits.memory")
	}

	_, probePort, err := net.SplitHostPort(o.probeAddress)
	if err != nil {
		t.Fatalf("--probe-address %q: %v", o.probeAddress, err)
	}
	annotations := deployment.Spec.Template.Metadata.Annotations
	if annotations["prometheus.io/scrape"] != "true" || annotations["prometheus.io/port"] != probePort || annotations["prometheus.io/path"] != "/metrics" {
		t.Errorf("the pod's prometheus.io annotations %v, want scrape on port %s, /metrics", annotations, probePort)
	}
	portName := ""
	for _, p := range proxyContainer.Ports {
		if strconv.Itoa(p.ContainerPort) == probePort {
			portName = p.Name
		}
	}
	var podMonitor struct {
		Kind string `json:"kind"`
		Spec struct {
			Selector struct {
				MatchLabels map[string]string `json:"matchLabels"`
			} `json:"selector"`
			PodMetricsEndpoints []struct {
				Port string `json:"port"`
				Path string `json:"path"`
			} `json:"podMetricsEndpoints"`
		} `json:"spec"`
	}
	readYAML(t, "podmonitor.yaml", &podMonitor)
	if endpoints := podMonitor.Spec.PodMetricsEndpoints; podMonitor.Kind != "PodMonitor" || len(endpoints) != 1 || portName == "" ||
		endpoints[0].Port != portName || endpoints[0].Path != "/metrics" {
		t.Errorf("podmonitor.yaml scrapes %+v, want port %q (the probe port %s) at /metrics", endpoints, portName, probePort)
	}
	for k, v := range podMonitor.Spec.Selector.MatchLabels {
		if deployment.Spec.Template.Metadata.Labels[k] != v {
			t.Errorf("podmonitor.yaml selects %s=%s, which the pods do not carry", k, v)
		}
	}

	var kustomization struct {
		Images []struct {
			Name    string `json:"name"`
			NewName string `json:"newName"`
			NewTag  string `json:"newTag"`
		} `json:"images"`
	}
	readYAML(t, "kustomization.yaml", &kustomization)
	named := false
	for _, image := range kustomization.Images {
		if image.Name == proxyContainer.Image {
			named = strings.HasSuffix(image.NewName, "/kretry-proxy") && strings.HasPrefix(image.NewTag, "v")
		}
	}
	if !named {
		t.Errorf("kustomization.yaml gives %q no registry name and version tag: %+v", proxyContainer.Image, kustomization.Images)
	}
}
