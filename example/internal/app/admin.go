package app

import (
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"

	"github.com/ratelimit-go/ratelimit"
	"github.com/ratelimit-go/ratelimit/admin"
)

// The operators' endpoints: with -admin, a listener of its own serves
// the Plane's handler under /admin/ (the overrides, shadow, the keys
// denied most, health), every request bearing -admin-token.

// checkAdmin says what is wrong with -admin and -admin-token.
func checkAdmin(c Config) error {
	if c.Admin == "" {
		if c.AdminToken != "" {
			return fmt.Errorf("-admin-token is given without -admin, the address of the operators' listener")
		}
		return nil
	}
	host, port, err := net.SplitHostPort(c.Admin)
	if err != nil {
		return fmt.Errorf("-admin %q: want host:port, such as 127.0.0.1:9090: %v", c.Admin, err)
	}
	if c.Admin == c.Addr && port != "0" {
		return fmt.Errorf("-admin %q is also -addr: give the operators' endpoints a listener of their own", c.Admin)
	}
	if c.AdminToken == "" && !loopback(host) {
		return fmt.Errorf("-admin %q is reachable from other machines: give -admin-token (or $RATELIMIT_ADMIN_TOKEN), which every request to it must bear, or listen on a loopback address such as 127.0.0.1:9090", c.Admin)
	}
	if c.AdminToken != "" && len(c.AdminToken) < 16 {
		return fmt.Errorf("-admin-token is %d bytes long: give at least 16, such as 32 random bytes in hex", len(c.AdminToken))
	}
	return nil
}

// loopback reports whether host is a loopback address or "localhost".
func loopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// storedKey turns the key a client sends for policy (an address for the
// limits of GET / and POST /login, an API key for the others) into the
// key the store is given, as the Limiters' key functions do.
func (a *App) storedKey(policy, k string) (string, error) {
	r := &http.Request{Header: http.Header{}, RemoteAddr: net.JoinHostPort(k, "0")}
	switch policy {
	case "home", LoginLimit.Name:
		if net.ParseIP(k) == nil {
			return "", fmt.Errorf("%q is not an IP address, which policy %s counts by", k, policy)
		}
		return a.ipKey(r)
	}
	r.Header.Set("X-API-Key", k)
	return a.apiKey(r)
}

// AdminHandler serves the Plane's handler under /admin/: with
// -admin-token, to requests that bear it ("Authorization: Bearer
// TOKEN") or to a browser that logged in with it on the page (see
// admin.Options.Token); without, to any, which only a loopback listener
// allows.
func (a *App) AdminHandler() http.Handler {
	mux := http.NewServeMux()
	mux.Handle("/admin/", a.Plane.Handler())
	return mux
}

// logChange logs an operator's change, told to the Limiters' observer,
// without the key it names, which may be a client's address.
func (a *App) logChange(_ ratelimit.Request, e ratelimit.Event) {
	if e.Outcome != "changed" {
		return
	}
	what := e.What
	if f := strings.Fields(what); len(f) > 2 {
		what = f[0] + " " + f[1] + " of a key"
	}
	slog.Info("admin: "+what+" changed", slog.String("by", e.Who), slog.Bool("deleted", e.After == ""))
}

// adminOptions are the Plane's options.
func (a *App) adminOptions() admin.Options {
	if a.Config.AdminToken != "" {
		return admin.Options{Key: a.storedKey, Label: a.labels.of, Token: a.Config.AdminToken}
	}
	return admin.Options{Key: a.storedKey, Label: a.labels.of, Who: func(r *http.Request) string { return "loopback " + r.RemoteAddr }}
}

// labels name, for the operators' page and listings, the stored form of
// each API key the example has seen: "API key …" and the key's last four
// characters, as a dashboard names a card, never the whole key. At most
// maxLabels are kept, past which they start afresh.
type labels struct {
	mu sync.Mutex
	m  map[string]string
}

const maxLabels = 10_000

// labelling returns key, which also remembers the label of each key it
// makes.
func (l *labels) labelling(key ratelimit.KeyFunc) ratelimit.KeyFunc {
	return func(r ratelimit.Request) (string, error) {
		stored, err := key(r)
		if err != nil {
			return stored, err
		}
		k := apiKeyOf(r)
		label := "API key …" + k[max(len(k)-4, 0):]
		if len(k) <= 4 {
			label = "API key " + k
		}
		l.mu.Lock()
		if l.m[stored] != label {
			if l.m == nil || len(l.m) >= maxLabels {
				l.m = map[string]string{}
			}
			l.m[stored] = label
		}
		l.mu.Unlock()
		return stored, nil
	}
}

// of returns the label of stored, or "".
func (l *labels) of(stored string) string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.m[stored]
}
