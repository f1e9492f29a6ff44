package app

import (
	"crypto/sha256"
	"crypto/subtle"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

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

// AdminHandler serves the Plane's handler under /admin/, to requests
// that bear -admin-token ("Authorization: Bearer TOKEN", the scheme in
// any case, as RFC 9110 allows, the token compared in constant time; 401
// otherwise, logged at most once a minute with how many there were), or
// to any without -admin-token, which only a loopback listener allows.
func (a *App) AdminHandler() http.Handler {
	mux := http.NewServeMux()
	mux.Handle("/admin/", a.Plane.Handler())
	want := sha256.Sum256([]byte(a.Config.AdminToken))
	var refused refusals
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if a.Config.AdminToken != "" && !bears(r, want) {
			refused.log(time.Now())
			w.Header().Set("WWW-Authenticate", `Bearer realm="ratelimit example admin"`)
			http.Error(w, "the admin endpoints need Authorization: Bearer and the -admin-token", http.StatusUnauthorized)
			return
		}
		mux.ServeHTTP(w, r)
	})
}

// bears reports whether r's Authorization is the Bearer scheme, in any
// case, with the token whose SHA-256 is want, compared in constant time.
func bears(r *http.Request, want [sha256.Size]byte) bool {
	scheme, token, ok := strings.Cut(r.Header.Get("Authorization"), " ")
	got := sha256.Sum256([]byte(strings.TrimLeft(token, " ")))
	return subtle.ConstantTimeCompare(got[:], want[:]) == 1 && ok && strings.EqualFold(scheme, "Bearer")
}

// refusals logs the admin requests refused for want of the token, at
// most once a minute, with how many were refused since the last line;
// never the client's address, which is an identifier of its.
type refusals struct {
	mu   sync.Mutex
	last time.Time
	n    int64
}

func (f *refusals) log(now time.Time) {
	f.mu.Lock()
	f.n++
	if now.Sub(f.last) < time.Minute {
		f.mu.Unlock()
		return
	}
	n := f.n
	f.last, f.n = now, 0
	f.mu.Unlock()
	slog.Warn("admin: refused requests without the admin token", slog.Int64("refused", n))
}

// who names the operator of a change: the token's bearer, or on a
// loopback listener without one, the connection's address.
func (a *App) who(r *http.Request) string {
	if a.Config.AdminToken != "" {
		return "admin-token"
	}
	return "loopback " + r.RemoteAddr
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
	return admin.Options{Key: a.storedKey, Who: a.who}
}
