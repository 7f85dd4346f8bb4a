package listretry_test

import (
	"errors"
	"fmt"
	"io"
	"testing"

	"github.com/kretry/kretry/listretry"
	"github.com/kretry/kretry/transport"
)

// TestGiveUpIsTransportGiveUpError: a caller of New outside this module
// cannot name the internal give-up type, so both give-ups, of the request
// and of a body whose resume failed, must reach it as the public
// *transport.GiveUpError, with what it unwraps to kept.
func TestGiveUpIsTransportGiveUpError(t *testing.T) {
	body := configMaps(60, "", "application/json")
	const cut = 6000
	breakErr := fmt.Errorf("read tcp: %w", io.ErrUnexpectedEOF)
	changed := body[:cut-100] + "X" + body[cut-99:]
	t.Run("request", func(t *testing.T) {
		s := newServer(t, answer{code: 200, body: items(50), cut: 10, err: io.ErrUnexpectedEOF})
		rt, _ := newList(s, listretry.TestConfig{})
		resp, err := rt.RoundTrip(listRequest(t))
		var giveUp *transport.GiveUpError
		if resp != nil || !errors.As(err, &giveUp) || giveUp.Last != io.ErrUnexpectedEOF || giveUp.Attempts != 7 { //nolint:errorlint
			t.Fatalf("RoundTrip = %v, %v; want a *transport.GiveUpError after 7 attempts", resp, err)
		}
		if errors.Is(err, io.ErrUnexpectedEOF) {
			t.Errorf("the request's give-up %v unwraps to its last error; only a refusal or a body's break should", err)
		}
	})
	t.Run("body", func(t *testing.T) {
		s := newServer(t, answer{code: 200, body: body, cut: cut, err: breakErr}, answer{code: 200, body: changed, cut: -1})
		rt, _ := newList(s, listretry.TestConfig{})
		resp, err := rt.RoundTrip(listRequest(t))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		_, err = io.ReadAll(resp.Body)
		var giveUp *transport.GiveUpError
		if !errors.As(err, &giveUp) || giveUp.Last != breakErr || giveUp.Attempts != 2 || !errors.Is(giveUp, io.ErrUnexpectedEOF) { //nolint:errorlint
			t.Fatalf("read error %v, want a *transport.GiveUpError after 2 requests that unwraps to the break", err)
		}
	})
}
