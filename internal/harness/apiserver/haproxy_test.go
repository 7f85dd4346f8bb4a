package apiserver

import (
	"strings"
	"testing"
	"time"
)

func TestHAProxyConfig(t *testing.T) {
	tests := []struct {
		name string
		opts HAProxyOptions
		want []string
	}{
		{"defaults", HAProxyOptions{Servers: []string{"127.0.0.1:1", "127.0.0.1:2"}}, []string{
			"bind 127.0.0.1:9",
			"mode tcp",
			"balance roundrobin",
			"option httpchk GET /readyz",
			"default-server check check-ssl verify none inter 2000ms fall 3 rise 2",
			"server apiserver-0 127.0.0.1:1\n",
			"server apiserver-1 127.0.0.1:2\n",
		}},
		{"fast checks, leastconn", HAProxyOptions{Servers: []string{"127.0.0.1:1"}, Balance: "leastconn", Inter: 500 * time.Millisecond, Fall: 2, Rise: 1},
			[]string{"balance leastconn", "inter 500ms fall 2 rise 1"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := haproxyConfig("127.0.0.1:9", tt.opts)
			for _, w := range tt.want {
				if !strings.Contains(cfg, w) {
					t.Errorf("config lacks %q:\n%s", w, cfg)
				}
			}
		})
	}
}

func TestStartHAProxyWithoutServers(t *testing.T) {
	if _, err := StartHAProxy(t.Context(), HAProxyOptions{Bin: "/bin/true"}); err == nil {
		t.Error("a balancer without servers started")
	}
}
