package admin

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/ratelimit-go/ratelimit/store"
	"github.com/ratelimit-go/ratelimit/testkits/redistest"
)

// TestACLRule: the commands override.lua and top.lua call are in the
// store's ACL rule, which docs/managed-redis.md gives; a Plane whose
// client is an ACL user with that rule sets and reads overrides, and one
// whose rule lacks +hget fails with the store's diagnosis
// (store.ErrMisconfigured), which gives the rule.
func TestACLRule(t *testing.T) {
	t.Parallel()
	var src []byte
	for _, f := range []string{"../lua/override.lua", "../lua/top.lua"} {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		src = append(src, b...)
	}
	granted := strings.Fields(store.ACLRule("rl:"))
	var missing []string
	for _, m := range regexp.MustCompile(`redis\.p?call\('([A-Za-z]+)'`).FindAllStringSubmatch(string(src), -1) {
		if c := "+" + strings.ToLower(m[1]); !slices.Contains(granted, c) && !slices.Contains(missing, c) {
			missing = append(missing, c)
		}
	}
	if len(missing) > 0 {
		t.Errorf("override.lua and top.lua call %v, which store.ACLRule does not grant", missing)
	}
	doc, err := os.ReadFile("../docs/managed-redis.md")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(doc), "ACL SETUSER ratelimit on >password "+store.ACLRule("rl:")+"\n") {
		t.Errorf("docs/managed-redis.md does not give store.ACLRule(\"rl:\"): %s", store.ACLRule("rl:"))
	}

	srv := redistest.Shared(t)
	root := redis.NewClient(&redis.Options{Addr: srv.Addr})
	t.Cleanup(func() { root.Close() })
	ctx := context.Background()
	for _, tt := range []struct {
		user, rule string
		ok         bool
	}{
		{"plane-acl", store.ACLRule("rlacl:"), true},
		{"plane-acl-short", strings.Replace(store.ACLRule("rlacl:"), " +hget ", " ", 1), false},
	} {
		args := []any{"ACL", "SETUSER", tt.user, "reset", "on", ">pw"}
		for _, f := range strings.Fields(tt.rule) {
			args = append(args, f)
		}
		if err := root.Do(ctx, args...).Err(); err != nil {
			t.Fatal(err)
		}
		c := redis.NewClient(&redis.Options{Addr: srv.Addr, Username: tt.user, Password: "pw"})
		t.Cleanup(func() { c.Close() })
		p, err := New(storeOf(t, c, "rlacl:"), tt.user, Options{Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { p.Close() })
		err = p.Set(ctx, Override{Policy: "api", StoredKey: "k", Quota: 3})
		switch {
		case tt.ok && err != nil:
			t.Errorf("%s: %v", tt.user, err)
		case tt.ok:
			if got, _ := p.List(); len(got) != 1 {
				t.Errorf("%s: lists %+v, want the override set", tt.user, got)
			}
		case !errors.Is(err, store.ErrMisconfigured) || !strings.Contains(err.Error(), "the ACL user may not run") || !strings.Contains(err.Error(), store.ACLRule("rlacl:")):
			// Redis 7.0 does not name the command in a script; the store
			// names it where Redis does (see TestMisconfigured in store).
			t.Errorf("%s, without +hget: got %v, want the store's misconfiguration giving the rule", tt.user, err)
		}
	}
}
