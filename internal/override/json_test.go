package override

import (
	"encoding/json"
	"errors"
	"math/rand/v2"
	"strings"
	"testing"
	"time"
)

// TestJSONRoundTrip: an override's JSON reads back as the same override,
// with the same fields in JSON as in Go, and its stored value, parsed,
// is the override without its key's client form and label.
func TestJSONRoundTrip(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 5))
	for range 2000 {
		o := Override{Policy: "p" + string(rune('a'+rng.IntN(3))), StoredKey: []string{"", "ip:192.0.2.1", "org-7/*"}[rng.IntN(3)]}
		switch rng.IntN(4) {
		case 0:
			o.Unlimited = true
		case 1:
			o.Blocked = true
		default:
			if rng.IntN(2) == 0 {
				o.Quota = 1 + rng.IntN(1000)
			}
			if rng.IntN(2) == 0 {
				o.Window = time.Duration(1+rng.IntN(100000)) * time.Millisecond
			}
			switch rng.IntN(3) {
			case 0:
				o.Shadow = true
			case 1:
				o.Enforced = true
			}
		}
		if rng.IntN(4) == 0 {
			o.Label = "customer"
		}
		if o.Check() != nil {
			continue
		}
		b, err := json.Marshal(o)
		if err != nil {
			t.Fatal(err)
		}
		var back Override
		if err := json.Unmarshal(b, &back); err != nil || back != o {
			t.Fatalf("%+v: JSON %s reads back as %+v, %v", o, b, back, err)
		}
		parsed, err := Parse(o.Policy, o.StoredKey, o.Stored())
		want := o
		want.Label = ""
		if err != nil || parsed != want {
			t.Fatalf("%+v: stored as %s, parsed as %+v, %v", o, o.Stored(), parsed, err)
		}
		if strings.Contains(o.Stored(), `"policy"`) || strings.Contains(o.Stored(), "key") {
			t.Fatalf("%+v: stored value %s holds the policy or a key", o, o.Stored())
		}
	}
	b, _ := json.Marshal(Override{Policy: "api", StoredKey: "k", Quota: 5, Window: time.Minute, Shadow: true})
	if got, want := string(b), `{"policy":"api","stored_key":"k","quota":5,"window_ms":60000,"shadow":true}`; got != want {
		t.Errorf("JSON %s, want %s", got, want)
	}
}

// TestJSONRefuses: the forms of before and unknown fields are refused,
// naming what to write.
func TestJSONRefuses(t *testing.T) {
	for _, tt := range []struct{ in, want string }{
		{`{"policy":"api","quota":-1}`, `write "unlimited": true`},
		{`{"policy":"api","quota":0}`, `write "blocked": true`},
		{`{"policy":"api","quota":5,"shadow":false}`, `write "enforced": true`},
		{`{"policy":"api","qouta":5}`, `unknown field "qouta"`},
		{`{"policy":"api","quota":"5"}`, `cannot unmarshal string`},
	} {
		var o Override
		err := json.Unmarshal([]byte(tt.in), &o)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: got %v, want an error saying %q", tt.in, err, tt.want)
		}
		if strings.Contains(tt.want, "write") && !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: %v does not wrap ErrInvalid", tt.in, err)
		}
	}
}

// TestParseReadsValuesOfBefore: values stored before this form read as
// what they meant.
func TestParseReadsValuesOfBefore(t *testing.T) {
	for _, tt := range []struct {
		value string
		want  Override
	}{
		{`{"quota":-1}`, Override{Policy: "p", StoredKey: "k", Unlimited: true}},
		{`{"quota":-2}`, Override{Policy: "p", StoredKey: "k", Blocked: true}},
		{`{"quota":0,"enforce":true}`, Override{Policy: "p", StoredKey: "k", Enforced: true}},
		{`{"quota":7,"window_ms":1000,"shadow":true}`, Override{Policy: "p", StoredKey: "k", Quota: 7, Window: time.Second, Shadow: true}},
	} {
		if got, err := Parse("p", "k", tt.value); err != nil || got != tt.want {
			t.Errorf("Parse(%s) = %+v, %v; want %+v", tt.value, got, err, tt.want)
		}
	}
	if _, err := Parse("p", "k", "not json"); err == nil {
		t.Error("Parse of a value that is not JSON: no error")
	}
}
