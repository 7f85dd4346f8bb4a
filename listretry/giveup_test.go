package listretry_test

import (
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"

	"github.com/kretry/kretry/listretry"
)

// TestGiveUpStandalone: New used without package transport gives up as it
// does through it, by message and errors.Is: the request's give-up does
// not unwrap to its last error (client-go must not retry it), a body's
// give-up unwraps to the very break. (Through package transport both are a
// *transport.GiveUpError: transport's TestGiveUpErrorIsPublic.)
func TestGiveUpStandalone(t *testing.T) {
	body := configMaps(60, "", "application/json")
	const cut = 6000
	breakErr := fmt.Errorf("read tcp: %w", io.ErrUnexpectedEOF)
	changed := body[:cut-100] + "X" + body[cut-99:]
	t.Run("request", func(t *testing.T) {
		s := newServer(t, answer{code: 200, body: items(50), cut: 10, err: io.ErrUnexpectedEOF})
		rt, _ := newList(s, listretry.TestConfig{})
		resp, err := rt.RoundTrip(listRequest(t))
		if resp != nil || err == nil || !strings.HasPrefix(err.Error(), "kretry: gave up after 7 attempts in ") {
			t.Fatalf("RoundTrip = %v, %v; want a give-up after 7 attempts", resp, err)
		}
		if errors.Is(err, io.ErrUnexpectedEOF) {
			t.Errorf("the request's give-up %v unwraps to its last error; only a refusal or a body's break should", err)
		}
	})
	t.Run("body", func(t *testing.T) {
		s := newServer(t, answer{code: 200, body: body, cut: cut, err: breakErr}, answer{code: 200, body: changed, cut: -1})
		resp, err := listretry.New(s.mock, listretry.Config{}).RoundTrip(listRequest(t))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		_, err = io.ReadAll(resp.Body)
		if err == nil || !errors.Is(err, io.ErrUnexpectedEOF) || !strings.HasPrefix(err.Error(), "kretry: gave up after 2 attempts in ") {
			t.Fatalf("read error %v, want a give-up that unwraps to the break", err)
		}
	})
}
