package proxy

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/client-go/rest"
)

// projectedVolume writes files as the kubelet writes a projected service-account token: in a
// fresh directory each time, published by renaming the ..data symlink over the old one, with
// token a symlink to ..data/token.
type projectedVolume struct {
	dir     string
	version int
}

func newProjectedVolume(t *testing.T, token string) *projectedVolume {
	t.Helper()
	v := &projectedVolume{dir: t.TempDir()}
	v.publish(t, token)
	if err := os.Symlink(filepath.Join("..data", "token"), v.token()); err != nil {
		t.Fatal(err)
	}
	return v
}

func (v *projectedVolume) token() string { return filepath.Join(v.dir, "token") }

func (v *projectedVolume) publish(t *testing.T, token string) {
	t.Helper()
	v.version++
	version := fmt.Sprintf("..v%d", v.version)
	if err := os.Mkdir(filepath.Join(v.dir, version), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(v.dir, version, "token"), []byte(token+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(version, filepath.Join(v.dir, "..data_tmp")); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(filepath.Join(v.dir, "..data_tmp"), filepath.Join(v.dir, "..data")); err != nil {
		t.Fatal(err)
	}
}

// TestTokenFile: the token is the file's as it is now, however the file is replaced; a file
// missing or empty for a moment keeps the last token; one never read is an error.
func TestTokenFile(t *testing.T) {
	vol := newProjectedVolume(t, "first")
	f := &tokenFile{path: vol.token()}
	want := func(token string) {
		t.Helper()
		got, err := f.current()
		if err != nil || got != token {
			t.Fatalf("token %q, %v; want %q", got, err, token)
		}
	}
	want("first")
	want("first")
	vol.publish(t, "second") // the kubelet's rotation
	want("second")
	plain := filepath.Join(t.TempDir(), "token")
	f = &tokenFile{path: plain}
	if _, err := f.current(); err == nil || !strings.Contains(err.Error(), plain) {
		t.Fatalf("a missing file: error %v, want one naming it", err)
	}
	os.WriteFile(plain, []byte("third"), 0o600)
	want("third")
	os.WriteFile(plain+".new", []byte("fourth"), 0o600)
	os.Rename(plain+".new", plain) // replaced by a rename
	want("fourth")
	os.WriteFile(plain, []byte("fifth, longer"), 0o600) // rewritten in place
	want("fifth, longer")
	os.WriteFile(plain, nil, 0o600) // emptied for a moment
	want("fifth, longer")
	os.Remove(plain) // gone for a moment
	want("fifth, longer")
	os.WriteFile(plain, []byte("sixth"), 0o600)
	want("sixth")
}

// TestTokenRotationUnderAWatch: the token file is rotated while a watch is open; the next
// request carries the new token at once, and so does kretry's resume of the watch when its
// connection breaks, while the client's one watch response goes on.
func TestTokenRotationUnderAWatch(t *testing.T) {
	rotated := make(chan struct{})
	up := newCountingUpstream(t, func(call int, w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Get("watch") != "true" {
			writeList(w)
			return
		}
		startWatch(w)
		if call == 1 {
			w.Write([]byte(event(6)))
			w.(http.Flusher).Flush()
			select {
			case <-rotated:
			case <-r.Context().Done():
				return
			}
			panic(http.ErrAbortHandler) // the connection breaks after the rotation
		}
		w.Write([]byte(event(7)))
		w.(http.Flusher).Flush()
		<-r.Context().Done()
	})
	vol := newProjectedVolume(t, "first")
	// The rest.Config's own token is not the one used: the file's is.
	base, _ := startProxyFor(t, &rest.Config{Host: up.URL, BearerToken: "static"}, Options{TokenFile: vol.token()})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	resp := get(t, ctx, base+watchPath, nil)
	defer resp.Body.Close()
	body := bufio.NewReader(resp.Body)
	if got := readEvent(t, body); got != event(6) {
		t.Fatalf("event %q", got)
	}
	vol.publish(t, "second")
	list := get(t, ctx, base+"/api/v1/namespaces/ns/configmaps", nil)
	list.Body.Close()
	close(rotated)
	if got := readEvent(t, body); got != event(7) {
		t.Fatalf("event %q after the break, want event 7 on the same response", got)
	}
	var tokens []string
	for _, r := range up.seen() {
		tokens = append(tokens, r.URL.Query().Get("watch")+" "+r.Header.Get("Authorization"))
	}
	if want := []string{"true Bearer first", " Bearer second", "true Bearer second"}; strings.Join(tokens, "|") != strings.Join(want, "|") {
		t.Fatalf("the API server saw (watch, Authorization) %q, want %q", tokens, want)
	}
}

// TestKubeconfigTokenFile: a rest.Config's BearerTokenFile (a kubeconfig's tokenFile) is read
// the same way, at once when it changes.
func TestKubeconfigTokenFile(t *testing.T) {
	up := okUpstream(t)
	path := filepath.Join(t.TempDir(), "token")
	os.WriteFile(path, []byte("first"), 0o600)
	base, _ := startProxyFor(t, &rest.Config{Host: up.URL, BearerTokenFile: path}, Options{})
	for _, token := range []string{"first", "second"} {
		os.WriteFile(path+".new", []byte(token), 0o600)
		os.Rename(path+".new", path)
		get(t, context.Background(), base+"/api/v1/namespaces/ns/configmaps", nil).Body.Close()
		seen := up.seen()
		if got := seen[len(seen)-1].Header.Get("Authorization"); got != "Bearer "+token {
			t.Fatalf("the API server saw %q, want Bearer %s", got, token)
		}
	}
}

// TestTokenFileOnUpgrades: with AllowUpgrades, an upgraded request (it goes to the API server
// by kubectl's upgrade transport, not kretry's) carries the token file's token too.
func TestTokenFileOnUpgrades(t *testing.T) {
	up := newUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		conn, buf, err := http.NewResponseController(w).Hijack()
		if err != nil {
			return
		}
		defer conn.Close()
		buf.WriteString("HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n")
		buf.Flush()
	})
	path := filepath.Join(t.TempDir(), "token")
	os.WriteFile(path, []byte("from-the-file"), 0o600)
	base, _ := startProxyFor(t, &rest.Config{Host: up.URL}, Options{TokenFile: path, AllowUpgrades: true})
	resp := get(t, context.Background(), base+"/api/v1/namespaces/ns/pods/p/exec?command=id",
		http.Header{"Connection": {"Upgrade"}, "Upgrade": {"websocket"}})
	resp.Body.Close()
	seen := up.seen()
	if resp.StatusCode != http.StatusSwitchingProtocols || len(seen) != 1 {
		t.Fatalf("answered %s after %d requests upstream, want 101 after 1", resp.Status, len(seen))
	}
	if got := seen[0].Header.Get("Authorization"); got != "Bearer from-the-file" {
		t.Fatalf("the upgraded request carried Authorization %q, want the file's token", got)
	}
}
