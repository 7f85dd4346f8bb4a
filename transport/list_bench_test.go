package transport_test

import (
	"encoding/json"
	"hash/crc32"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"runtime/debug"
	"sync/atomic"
	"testing"

	"github.com/kretry/kretry/transport"
)

// generatedList is a JSON PodList of size bytes rendered on the fly, so that a LIST of any
// size costs no memory to serve: a head naming resourceVersion 42, fixed-length items, and
// the tail. Read i of the same list gets the same bytes.
type generatedList struct {
	size int64
	// cutAt, if positive, ends the first answer's body there with io.ErrUnexpectedEOF.
	cutAt   int64
	answers atomic.Int64
}

const (
	generatedHead = `{"kind":"PodList","apiVersion":"v1","metadata":{"resourceVersion":"42"},"items":[`
	generatedTail = `]}`
	// itemPad makes an item 1 KiB long with its separator.
	itemPad = 1024 - len(`{"metadata":{"name":"pod-000000000"},"pad":""},`)
)

func (g *generatedList) RoundTrip(req *http.Request) (*http.Response, error) {
	body := &generatedBody{total: g.size, limit: g.size, end: io.EOF}
	if g.answers.Add(1) == 1 && g.cutAt > 0 {
		body.limit, body.end = g.cutAt, io.ErrUnexpectedEOF
	}
	return &http.Response{
		StatusCode: http.StatusOK, Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header: http.Header{"Content-Type": {"application/json"}}, Body: body, ContentLength: -1, Request: req,
	}, nil
}

// generatedBody renders a list of total bytes up to limit, then returns end. It allocates
// nothing while it is read.
type generatedBody struct {
	pos, total, limit int64
	end               error
	item              [1024]byte
	itemIndex         int64
	rendered          bool
}

func (b *generatedBody) Read(p []byte) (int, error) {
	n := 0
	for n < len(p) && b.pos < b.limit {
		c := copy(p[n:min(len(p), n+int(b.limit-b.pos))], b.at(b.pos))
		n += c
		b.pos += int64(c)
	}
	if n == 0 {
		return 0, b.end
	}
	return n, nil
}

func (b *generatedBody) Close() error { return nil }

// at returns the list's bytes from offset pos to the end of the piece it falls in.
func (b *generatedBody) at(pos int64) []byte {
	head := int64(len(generatedHead))
	if pos < head {
		return generatedHeadBytes[pos:]
	}
	items := (b.total - head - int64(len(generatedTail))) / 1024
	off := pos - head
	if off >= items*1024 {
		return generatedTailBytes[off-items*1024:]
	}
	index := off / 1024
	if !b.rendered || b.itemIndex != index {
		b.render(index, index == items-1)
	}
	return b.item[off%1024:]
}

var (
	generatedHeadBytes = []byte(generatedHead)
	generatedTailBytes = []byte(generatedTail)
)

// render writes item index into b.item: its name's nine digits, the pad, its separator.
func (b *generatedBody) render(index int64, last bool) {
	if !b.rendered {
		n := copy(b.item[:], `{"metadata":{"name":"pod-000000000"},"pad":"`)
		for i := range itemPad {
			b.item[n+i] = 'x'
		}
		copy(b.item[n+itemPad:], `"},`)
	}
	digits := b.item[len(`{"metadata":{"name":"pod-`):][:9]
	for i, v := 8, index; i >= 0; i, v = i-1, v/10 {
		digits[i] = byte('0' + v%10)
	}
	if last {
		b.item[1023] = ' '
	} else {
		b.item[1023] = ','
	}
	b.itemIndex, b.rendered = index, true
}

// generatedSize is the 1 GiB list's size.
const generatedSize = int64(len(generatedHead)) + (1<<30)/1024*1024 + int64(len(generatedTail))

// BenchmarkList1GiBCut reads a 1 GiB LIST generated in memory as a streaming decoder would
// (io.Copy into a running CRC, never the whole body at once), directly and through kretry,
// whose first answer breaks at 90%: kretry asks again at resourceVersionMatch=Exact, reads
// the 90% again while checking it, and hands over the rest. It checks the caller got exactly
// the list, byte for byte, and reports heap-peak-B/op: HeapInuse after the read, the
// collector run before and kept off during it, so every byte the LIST allocated counts.
func BenchmarkList1GiBCut(b *testing.B) {
	castagnoli := crc32.MakeTable(crc32.Castagnoli)
	whole := crc32.New(castagnoli)
	if _, err := io.Copy(whole, &generatedBody{total: generatedSize, limit: generatedSize, end: io.EOF}); err != nil {
		b.Fatal(err)
	}
	want := whole.Sum32()
	for _, name := range []string{"direct", "kretry"} {
		b.Run(name, func(b *testing.B) {
			defer debug.SetGCPercent(debug.SetGCPercent(-1))
			b.SetBytes(generatedSize)
			b.ReportAllocs()
			var peak uint64
			var stats runtime.MemStats
			for b.Loop() {
				b.StopTimer()
				server := &generatedList{size: generatedSize}
				var rt http.RoundTripper = server
				if name == "kretry" {
					server.cutAt = generatedSize * 9 / 10
					rt = transport.New(server, transport.Config{})
				}
				req, err := http.NewRequest(http.MethodGet, host+"/api/v1/pods", nil)
				if err != nil {
					b.Fatal(err)
				}
				runtime.GC()
				b.StartTimer()
				resp, err := rt.RoundTrip(req)
				if err != nil {
					b.Fatal(err)
				}
				sum := crc32.New(castagnoli)
				n, err := io.Copy(sum, struct{ io.Reader }{resp.Body})
				b.StopTimer()
				runtime.ReadMemStats(&stats)
				peak = max(peak, stats.HeapInuse)
				resp.Body.Close()
				if err != nil || n != generatedSize || sum.Sum32() != want {
					b.Fatalf("read %d of %d bytes (crc %x, want %x), %v", n, generatedSize, sum.Sum32(), want, err)
				}
				if asked := server.answers.Load(); name == "kretry" && asked != 2 {
					b.Fatalf("%d requests, want 2", asked)
				}
				b.StartTimer()
			}
			b.ReportMetric(float64(peak), "heap-peak-B/op")
		})
	}
}

// TestGeneratedListIsJSON: the benchmark's generated list is a valid PodList.
func TestGeneratedListIsJSON(t *testing.T) {
	size := int64(len(generatedHead)) + 5*1024 + int64(len(generatedTail))
	data, err := io.ReadAll(&generatedBody{total: size, limit: size, end: io.EOF})
	if err != nil {
		t.Fatal(err)
	}
	var list struct {
		Metadata struct{ ResourceVersion string }
		Items    []struct{ Metadata struct{ Name string } }
	}
	if err := json.Unmarshal(data, &list); err != nil || len(list.Items) != 5 || list.Items[4].Metadata.Name != "pod-000000004" || list.Metadata.ResourceVersion != "42" {
		t.Fatalf("%v: %+v", err, list)
	}
}

// BenchmarkList10MiBLoopback reads a 10 MiB LIST as client-go does (io.ReadAll, Close) over
// loopback TLS and HTTP/2, as a client reaches kube-apiserver, chunked as kube-apiserver sends
// it: directly and through kretry, which streams it with its running hash.
func BenchmarkList10MiBLoopback(b *testing.B) {
	body := tenMiBList()
	server := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		for rest := body; len(rest) > 0; {
			n := min(len(rest), 32<<10)
			_, _ = w.Write(rest[:n])
			rest = rest[n:]
		}
	}))
	server.EnableHTTP2 = true
	server.StartTLS()
	defer server.Close()
	next := server.Client().Transport
	for _, rt := range []struct {
		name string
		rt   http.RoundTripper
	}{{"direct", next}, {"kretry", transport.New(next, transport.Config{})}} {
		b.Run(rt.name, func(b *testing.B) {
			req, err := http.NewRequest(http.MethodGet, server.URL+"/api/v1/pods", nil)
			if err != nil {
				b.Fatal(err)
			}
			b.SetBytes(int64(len(body)))
			b.ReportAllocs()
			for b.Loop() {
				resp, err := rt.rt.RoundTrip(req)
				if err != nil {
					b.Fatal(err)
				}
				got, err := io.ReadAll(resp.Body)
				resp.Body.Close()
				if err != nil || len(got) != len(body) || resp.ProtoMajor != 2 {
					b.Fatalf("read %d bytes over HTTP/%d, %v", len(got), resp.ProtoMajor, err)
				}
			}
		})
	}
}
