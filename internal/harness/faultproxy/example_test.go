package faultproxy_test

import (
	"fmt"
	"io"
	"net"

	"github.com/kretry/kretry/internal/harness/faultproxy"
)

// Put a proxy in front of a server and cut every connection after 5 response bytes.
func Example() {
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	defer ln.Close()
	go func() {
		c, _ := ln.Accept()
		c.Write([]byte("hello, world"))
		c.Close()
	}()

	p, _ := faultproxy.New(1, ln.Addr().String())
	defer p.Close()
	p.SetRule(faultproxy.Rule{CutAfterBytes: 5})

	c, _ := net.Dial("tcp", p.Addr())
	got, _ := io.ReadAll(c)
	fmt.Printf("%q, cuts: %d\n", got, p.Stats().Cuts)
	// Output: "hello", cuts: 1
}
