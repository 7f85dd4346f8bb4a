package policy_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/kretry/kretry/internal/policy"
)

const maxDuration = time.Duration(1<<63 - 1)

func TestParseRetryAfter(t *testing.T) {
	now := time.Date(2026, 11, 30, 16, 0, 0, 0, time.UTC)
	tests := []struct {
		name  string
		value string
		want  time.Duration
		ok    bool
	}{
		{"absent", "", 0, false},
		{"blank", "   ", 0, false},
		{"seconds", "1", time.Second, true},
		{"seconds padded", " 120 ", 120 * time.Second, true},
		{"zero", "0", 0, false},
		{"negative", "-1", 0, false},
		{"plus sign", "+5", 0, false},
		{"fraction", "1.5", 0, false},
		{"unit", "5s", 0, false},
		{"junk", "soon", 0, false},
		{"largest exact", "9223372036", 9223372036 * time.Second, true},
		{"past a Duration", "9223372037", maxDuration, true},
		{"past int64", "99999999999999999999", maxDuration, true},
		{"HTTP-date", now.Add(30 * time.Second).Format(http.TimeFormat), 30 * time.Second, true},
		{"RFC 850 date", now.Add(time.Minute).Format(time.RFC850), time.Minute, true},
		{"ANSI C date", now.Add(2 * time.Second).Format(time.ANSIC), 2 * time.Second, true},
		{"date now", now.Format(http.TimeFormat), 0, false},
		{"date past", now.Add(-time.Hour).Format(http.TimeFormat), 0, false},
		{"date junk", "Mon, 99 Foo 2026 00:00:00 GMT", 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := policy.ParseRetryAfter(tt.value, now)
			if got != tt.want || ok != tt.ok {
				t.Errorf("ParseRetryAfter(%q) = %v, %v; want %v, %v", tt.value, got, ok, tt.want, tt.ok)
			}
		})
	}
}

func TestSecondsToDuration(t *testing.T) {
	tests := []struct {
		seconds int64
		want    time.Duration
		ok      bool
	}{
		{-5, 0, false},
		{0, 0, false},
		{1, time.Second, true},
		{3600, time.Hour, true},
		{1 << 40, maxDuration, true},
		{1<<63 - 1, maxDuration, true},
	}
	for _, tt := range tests {
		got, ok := policy.SecondsToDuration(tt.seconds)
		if got != tt.want || ok != tt.ok {
			t.Errorf("SecondsToDuration(%d) = %v, %v; want %v, %v", tt.seconds, got, ok, tt.want, tt.ok)
		}
	}
}
