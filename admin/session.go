package admin

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"log/slog"
	"maps"
	"net/http"
	"strings"
	"sync"
	"time"
)

const (
	sessionCookie = "ratelimit_admin"
	sessionLife   = 8 * time.Hour // from its login
	maxSessions   = 64            // kept by a Plane, past which the oldest goes
)

// sessions are the logged-in browsers of a handler.
type sessions struct {
	token [sha256.Size]byte // of Options.Token
	mu    sync.Mutex
	ends  map[string]time.Time // by the SHA-256 of the cookie's value, in hex
	now   func() time.Time

	refusedMu   sync.Mutex
	refusedLast time.Time
	refused     int64
	logger      *slog.Logger
}

func newSessions(token string, logger *slog.Logger) *sessions {
	return &sessions{token: sha256.Sum256([]byte(token)), ends: map[string]time.Time{}, now: time.Now, logger: logger}
}

// allows reports whether r bears the token or a live session's cookie, and who it is.
func (s *sessions) allows(r *http.Request) (who string, ok bool) {
	if scheme, token, found := strings.Cut(r.Header.Get("Authorization"), " "); found && strings.EqualFold(scheme, "Bearer") {
		if s.isToken(strings.TrimLeft(token, " ")) {
			return "token", true
		}
		return "", false
	}
	c, err := r.Cookie(sessionCookie)
	if err != nil {
		return "", false
	}
	id := sessionID(c.Value)
	s.mu.Lock()
	defer s.mu.Unlock()
	end, live := s.ends[id]
	if !live || !s.now().Before(end) {
		delete(s.ends, id)
		return "", false
	}
	return "session " + id[:8], true
}

// isToken compares token with Options.Token in constant time.
func (s *sessions) isToken(token string) bool {
	got := sha256.Sum256([]byte(token))
	return subtle.ConstantTimeCompare(got[:], s.token[:]) == 1
}

// sessionID is what the sessions keep of a cookie's value: its SHA-256,
// so that the map holds nothing a browser could send.
func sessionID(value string) string {
	sum := sha256.Sum256([]byte(value))
	return hex.EncodeToString(sum[:])
}

// login starts a session and sets its cookie, scoped to where the handler is mounted.
func (s *sessions) login(w http.ResponseWriter, r *http.Request) {
	var b [32]byte
	_, _ = rand.Read(b[:])
	value := hex.EncodeToString(b[:])
	now := s.now()
	s.mu.Lock()
	maps.DeleteFunc(s.ends, func(_ string, end time.Time) bool { return !now.Before(end) })
	if len(s.ends) >= maxSessions {
		deleteFirst(s.ends)
	}
	s.ends[sessionID(value)] = now.Add(sessionLife)
	s.mu.Unlock()
	http.SetCookie(w, &http.Cookie{Name: sessionCookie, Value: value, Path: mount(r), MaxAge: int(sessionLife / time.Second),
		HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: r.TLS != nil})
}

// logout ends r's session, if any, and expires its cookie.
func (s *sessions) logout(w http.ResponseWriter, r *http.Request) {
	if c, err := r.Cookie(sessionCookie); err == nil {
		s.mu.Lock()
		delete(s.ends, sessionID(c.Value))
		s.mu.Unlock()
	}
	http.SetCookie(w, &http.Cookie{Name: sessionCookie, Path: mount(r), MaxAge: -1, HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: r.TLS != nil})
}

// refuse counts a request refused for want of the token, and logs the
// count at most once a minute, never with the client's address.
func (s *sessions) refuse() {
	now := s.now()
	s.refusedMu.Lock()
	s.refused++
	if now.Sub(s.refusedLast) < time.Minute {
		s.refusedMu.Unlock()
		return
	}
	n := s.refused
	s.refusedLast, s.refused = now, 0
	s.refusedMu.Unlock()
	s.logger.Warn("admin: refused requests without the token or a session", slog.Int64("refused", n))
}

// mount returns the path the handler is mounted at: r's, up to its last '/'.
func mount(r *http.Request) string {
	return r.URL.Path[:strings.LastIndexByte(r.URL.Path, '/')+1]
}
