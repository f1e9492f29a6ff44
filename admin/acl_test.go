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
// whose rule lacks +hget fails, naming the command.
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
		case err == nil || !strings.Contains(err.Error(), "store.ACLRule"):
			t.Errorf("%s, without +hget: got %v, want an error pointing to store.ACLRule", tt.user, err)
		}
	}
}

// TestACLHint: the hint names the command refused in Redis's wording and
// in Valkey 8's, and points to the one rule.
func TestACLHint(t *testing.T) {
	for _, tt := range []struct{ msg, want string }{
		{"ERR ACL failure in script: User plane has no permissions to run the 'hget' command script: abc, on @user_script:12.",
			"the ACL user may not run hget: give it the store's ACL rule (store.ACLRule)"},
		{"NOPERM this user has no permissions to run the 'hlen' command",
			"the ACL user may not run hlen"},
		{"ERR Error running script: @user_script:12: The user executing the script can't run this command or subcommand",
			"give the ACL user the store's ACL rule (store.ACLRule)"},
	} {
		if got := aclHint(errors.New(tt.msg)).Error(); !strings.Contains(got, tt.want) {
			t.Errorf("%q: got %q, want it to say %q", tt.msg, got, tt.want)
		}
	}
	if err := errors.New("WRONGTYPE"); aclHint(err) != err {
		t.Error("an error that is no ACL refusal gained a hint")
	}
}
