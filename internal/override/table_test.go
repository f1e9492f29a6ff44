package override

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"
)

// TestCheck: each wrong field is refused with its name and the reason.
func TestCheck(t *testing.T) {
	ok := Override{Policy: "api", StoredKey: "k1", Quota: 10}
	for _, tt := range []struct {
		o    Override
		want string // in the error; "" for none
	}{
		{ok, ""},
		{Override{Policy: "api", Unlimited: true}, ""},
		{Override{Policy: "api", StoredKey: "org-7/*", Blocked: true}, ""},
		{Override{Policy: "api", StoredKey: "k", Quota: 5, Window: time.Minute, Shadow: true}, ""},
		{Override{StoredKey: "k1", Quota: 10}, "Policy is empty"},
		{Override{Policy: strings.Repeat("p", 65), Quota: 10}, "Policy is 65 bytes"},
		{Override{Policy: "api\nx", Quota: 10}, `Policy "api\nx" is not printable ASCII`},
		{Override{Policy: "api", StoredKey: strings.Repeat("k", 1025), Quota: 10}, "the key is 1025 bytes"},
		{Override{Policy: "api", StoredKey: "a*b", Quota: 10}, `StoredKey "a*b" has a "*" before its end`},
		{Override{Policy: "api", StoredKey: "k1"}, "changes nothing"},
		{Override{Policy: "api", StoredKey: "k1", Window: time.Minute}, ""},
		{Override{Policy: "api", Shadow: true}, ""},
		{Override{Policy: "api", StoredKey: "k1", Quota: -3}, "Quota is -3"},
		{Override{Policy: "api", StoredKey: "k1", Quota: 10, Window: -time.Second}, "Window is -1s"},
		{Override{Policy: "api", StoredKey: "k1", Quota: 10, Window: 1500 * time.Microsecond}, "whole milliseconds"},
		{Override{Policy: "api", StoredKey: "k1", Blocked: true, Window: time.Second}, "Unlimited or Blocked goes alone"},
	} {
		err := tt.o.Check()
		switch {
		case tt.want == "" && err != nil:
			t.Errorf("%+v: got %v, want no error", tt.o, err)
		case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want) || !errors.Is(err, ErrInvalid)):
			t.Errorf("%+v: got %v, want ErrInvalid saying %q", tt.o, err, tt.want)
		}
	}
}

// TestLookup: an exact key beats the longest prefix, which beats a
// shorter one, which beats the whole policy; other policies are apart.
func TestLookup(t *testing.T) {
	table, err := NewTable([]Override{
		{Policy: "api", Quota: 1},
		{Policy: "api", StoredKey: "org-7/*", Quota: 2},
		{Policy: "api", StoredKey: "org-7/team-1/*", Quota: 3},
		{Policy: "api", StoredKey: "org-7/team-1/ann", Quota: 4},
		{Policy: "api", StoredKey: "org-7/team-1/ann", Quota: 5}, // replaces the one before
		{Policy: "login", StoredKey: "*", Blocked: true},
	})
	if err != nil {
		t.Fatal(err)
	}
	if table.Len() != 5 {
		t.Errorf("Len %d, want 5: a repeated policy and key replaces", table.Len())
	}
	for _, tt := range []struct {
		policy, key string
		quota       int // 0: none applies; -2: blocked
	}{
		{"api", "org-7/team-1/ann", 5},
		{"api", "org-7/team-1/bob", 3},
		{"api", "org-7/team-2/ann", 2},
		{"api", "org-7/", 2},
		{"api", "org-7", 1},
		{"api", "", 1},
		{"login", "anyone", -2},
		{"login", "", -2},
		{"other", "org-7/team-1/ann", 0},
	} {
		o, ok := table.Lookup(tt.policy, tt.key)
		if o.Blocked {
			o.Quota = -2
		}
		if got := map[bool]int{true: o.Quota}[ok]; got != tt.quota {
			t.Errorf("Lookup(%q, %q): quota %d (found %v), want %d", tt.policy, tt.key, got, ok, tt.quota)
		}
	}
	if !table.Has("login") || table.Has("other") {
		t.Error("Has: wrong")
	}
	var none *Table
	if _, ok := none.Lookup("api", "k"); ok || none.Len() != 0 || none.Has("api") || none.All() != nil {
		t.Error("a nil table holds something")
	}
}

// TestLookupMatchesModel: random overrides and keys, each lookup against
// a scan of every override in order of precedence.
func TestLookupMatchesModel(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 11))
	keys := func() string {
		var b strings.Builder
		for range rng.IntN(6) {
			b.WriteByte("ab/"[rng.IntN(3)])
		}
		return b.String()
	}
	for round := range 200 {
		var list []Override
		for range rng.IntN(40) {
			o := Override{Policy: fmt.Sprint("p", rng.IntN(3)), StoredKey: keys(), Quota: 1 + rng.IntN(100)}
			if rng.IntN(3) == 0 {
				o.StoredKey += "*"
			}
			list = append(list, o)
		}
		table, err := NewTable(list)
		if err != nil {
			t.Fatal(err)
		}
		for range 50 {
			policy, key := fmt.Sprint("p", rng.IntN(4)), keys()
			want, wantOK := model(list, policy, key)
			got, ok := table.Lookup(policy, key)
			if ok != wantOK || got != want {
				t.Fatalf("round %d: Lookup(%q, %q) = %+v, %v; want %+v, %v (of %+v)", round, policy, key, got, ok, want, wantOK, list)
			}
		}
		if n := len(table.All()); n != table.Len() {
			t.Fatalf("All holds %d, Len says %d", n, table.Len())
		}
	}
}

// model finds the override of policy for key by scanning list: the last
// one set for the key itself, else for its longest prefix, else for the
// whole policy.
func model(list []Override, policy, key string) (Override, bool) {
	var best Override
	rank := -1 // 0: whole policy, 1+len: a prefix, maxKey+2: the key
	for _, o := range list {
		if o.Policy != policy {
			continue
		}
		r := -1
		switch prefix, isPrefix := strings.CutSuffix(o.StoredKey, "*"); {
		case o.StoredKey == "":
			r = 0
		case isPrefix && strings.HasPrefix(key, prefix):
			r = 1 + len(prefix)
		case !isPrefix && o.StoredKey == key:
			r = maxKey + 2
		}
		if r >= 0 && r >= rank {
			best, rank = o, r
		}
	}
	return best, rank >= 0
}

// TestTableIsBounded: past MaxOverrides, a table is refused, saying so.
func TestTableIsBounded(t *testing.T) {
	list := make([]Override, MaxOverrides+1)
	for i := range list {
		list[i] = Override{Policy: "api", StoredKey: fmt.Sprint("k", i), Quota: 1}
	}
	if _, err := NewTable(list[:MaxOverrides]); err != nil {
		t.Fatalf("%d overrides: %v", MaxOverrides, err)
	}
	_, err := NewTable(list)
	if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "at most 10000") {
		t.Errorf("%d overrides: got %v, want ErrInvalid naming the bound", len(list), err)
	}
	if _, err := NewTable([]Override{{Policy: "api", Quota: 1}, {Policy: "api", StoredKey: "x"}}); err == nil || !strings.Contains(err.Error(), "override 1: ") {
		t.Errorf("a wrong second override: got %v, want its index named", err)
	}
}

// BenchmarkLookup: a lookup among MaxOverrides overrides of one policy,
// exact keys and prefixes of several lengths.
func BenchmarkLookup(b *testing.B) {
	var list []Override
	for i := range MaxOverrides - 10 {
		list = append(list, Override{Policy: "api", StoredKey: fmt.Sprintf("key-%06d", i), Quota: 1})
	}
	for i := range 10 {
		list = append(list, Override{Policy: "api", StoredKey: fmt.Sprintf("org-%0*d/*", i+1, i), Quota: 2})
	}
	table, err := NewTable(list)
	if err != nil {
		b.Fatal(err)
	}
	for _, key := range []string{"key-004242", "org-0000000009/ann", "nobody"} {
		b.Run(key, func(b *testing.B) {
			for b.Loop() {
				table.Lookup("api", key)
			}
		})
	}
}

// TestLookupInherits: a key's override takes each field it leaves as the
// limit's from the policy's override: its quota, its window, its shadow
// or enforcement; a blocked or unlimited key has no window, and is
// denied or counted nothing whatever its shadow.
func TestLookupInherits(t *testing.T) {
	table, err := NewTable([]Override{
		{Policy: "api", Quota: 50, Window: time.Minute, Shadow: true},
		{Policy: "api", StoredKey: "shadow-only", Shadow: true},
		{Policy: "api", StoredKey: "window-only", Window: time.Hour},
		{Policy: "api", StoredKey: "enforced", Quota: 7, Enforced: true},
		{Policy: "api", StoredKey: "blocked", Blocked: true},
		{Policy: "login", Blocked: true},
		{Policy: "login", StoredKey: "shadow", Shadow: true},
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		policy, key string
		want        Override
	}{
		{"api", "other", Override{Policy: "api", Quota: 50, Window: time.Minute, Shadow: true}},
		{"api", "shadow-only", Override{Policy: "api", StoredKey: "shadow-only", Quota: 50, Window: time.Minute, Shadow: true}},
		{"api", "window-only", Override{Policy: "api", StoredKey: "window-only", Quota: 50, Window: time.Hour, Shadow: true}},
		{"api", "enforced", Override{Policy: "api", StoredKey: "enforced", Quota: 7, Window: time.Minute, Enforced: true}},
		{"api", "blocked", Override{Policy: "api", StoredKey: "blocked", Blocked: true}},
		{"login", "shadow", Override{Policy: "login", StoredKey: "shadow", Blocked: true}},
	} {
		if got, ok := table.Lookup(tt.policy, tt.key); !ok || got != tt.want {
			t.Errorf("Lookup(%q, %q) = %+v, %v; want %+v", tt.policy, tt.key, got, ok, tt.want)
		}
	}
}
