package admin

import (
	"context"
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

// TestACLRule: the commands override.lua calls are those of the store's
// ACL rule and aclCommands, which docs/overrides.md gives; a Plane whose
// client is an ACL user with that rule sets and reads overrides, and one
// without aclCommands fails, naming the command.
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
	granted := strings.Fields(store.ACLRule("rl:") + " " + aclCommands)
	var missing []string
	for _, m := range regexp.MustCompile(`redis\.p?call\('([A-Za-z]+)'`).FindAllStringSubmatch(string(src), -1) {
		if c := "+" + strings.ToLower(m[1]); !slices.Contains(granted, c) && !slices.Contains(missing, c) {
			missing = append(missing, c)
		}
	}
	if len(missing) > 0 {
		t.Errorf("override.lua and top.lua call %v, which neither store.ACLRule nor aclCommands grants", missing)
	}
	doc, err := os.ReadFile("../docs/overrides.md")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(doc), aclCommands) {
		t.Errorf("docs/overrides.md does not give the commands %q", aclCommands)
	}

	srv := redistest.Shared(t)
	root := redis.NewClient(&redis.Options{Addr: srv.Addr})
	t.Cleanup(func() { root.Close() })
	ctx := context.Background()
	for _, tt := range []struct {
		user, rule string
		ok         bool
	}{
		{"plane-acl", store.ACLRule("rlacl:") + " " + aclCommands, true},
		{"plane-acl-short", store.ACLRule("rlacl:"), false},
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
		p, err := New(c, tt.user, Options{Prefix: "rlacl:", Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { p.Close() })
		err = p.Set(ctx, Override{Policy: "api", Key: "k", Quota: 3})
		switch {
		case tt.ok && err != nil:
			t.Errorf("%s: %v", tt.user, err)
		case tt.ok:
			if got, _ := p.List(); len(got) != 1 {
				t.Errorf("%s: lists %+v, want the override set", tt.user, got)
			}
		case err == nil || !strings.Contains(err.Error(), aclCommands):
			t.Errorf("%s, without %s: got %v, want an error naming them", tt.user, aclCommands, err)
		}
	}
}
