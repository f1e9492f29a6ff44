package admin

import (
	"bytes"
	"cmp"
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"html/template"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/ratelimit-go/ratelimit"
	"github.com/ratelimit-go/ratelimit/internal/override"
	"github.com/ratelimit-go/ratelimit/store"
)

// Handler returns the Plane's handler for operators: JSON endpoints to
// read and change the overrides, and a page showing the same. It changes
// limits and shows keys that may be clients' addresses: mount it behind
// the application's own authentication, for operators only (nothing is
// served unless mounted). Endpoints are matched by the path's last
// segment, wherever it is mounted (for example under "/admin/"):
//
//	GET    policies   the limits of the Limiters given the Plane, as in force now:
//	                  [{"policy", "route", "algorithm", "quota", "window_ms", "unlimited", "blocked", "shadow", "overridden"}]
//	GET    overrides  [Override], as Plane.List gives them
//	PUT    overrides  Override: set one (Plane.Set); 204
//	DELETE overrides  Override, or ?policy=P&key=K or ?policy=P&stored_key=K: delete one (Plane.Delete); 204, 404 when none
//	PUT    shadow     {"policy", "shadow"}: put a policy in shadow (true), or enforce it (false); 204
//	GET    top        ?policy=P&last=1m|1h&n=20: [{"key", "label", "denied", "low", "high"}], most denied first
//	                  ("P (shadow)": what P's Shadow limits would have denied)
//	GET    health     whether the overrides were read, each Fallback's health, the bans seen in force
//	GET    (the path ending in "/")  the page
//
// An override is the JSON of [Override], such as {"policy": "gen-tpm",
// "key": "k1", "quota": 100000}; an unknown field or an older form is
// refused, naming what to write. A bad request is a 400 whose JSON
// "error" names the field; a Redis failure a 503, the cause in the
// Plane's log. See docs/overrides.md for the page, Options.Token and
// the "changed" event each change makes.
func (p *Plane) Handler() http.Handler {
	return http.NewCrossOriginProtection().Handler(handler{p})
}

type handler struct{ p *Plane }

// whoKey keys who Options.Token found a request to be.
type whoKey struct{}

func (h handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	seg := r.URL.Path[strings.LastIndexByte(r.URL.Path, '/')+1:]
	get := r.Method == http.MethodGet || r.Method == http.MethodHead
	if s := h.p.sessions; s != nil {
		who, ok := s.allows(r)
		switch {
		case seg == "login" && r.Method == http.MethodPost:
			h.login(w, r)
			return
		case seg == "logout" && r.Method == http.MethodPost:
			s.logout(w, r)
			http.Redirect(w, r, "./", http.StatusSeeOther)
			return
		case !ok && seg == "" && get && r.Header.Get("Authorization") == "":
			h.loginPage(w, http.StatusOK, "")
			return
		case !ok:
			s.refuse()
			w.Header().Set("WWW-Authenticate", `Bearer realm="ratelimit admin"`)
			writeError(w, http.StatusUnauthorized, "this needs Authorization: Bearer and the admin token, or a session of the page's")
			return
		}
		r = r.WithContext(context.WithValue(r.Context(), whoKey{}, who))
	}
	switch {
	case seg == "" && get:
		h.page(w, r, http.StatusOK, pageNote{Notice: r.URL.Query().Get("done")})
	case seg == "" && r.Method == http.MethodPost:
		h.act(w, r)
	case seg == "policies" && get:
		writeJSON(w, http.StatusOK, h.policies())
	case seg == "overrides" && get:
		list, _ := h.p.List()
		writeJSON(w, http.StatusOK, append([]Override{}, list...))
	case seg == "overrides" && r.Method == http.MethodPut:
		h.set(w, r)
	case seg == "overrides" && r.Method == http.MethodDelete:
		h.delete(w, r)
	case seg == "shadow" && r.Method == http.MethodPut:
		h.shadow(w, r)
	case seg == "top" && get:
		h.top(w, r)
	case seg == "health" && get:
		writeJSON(w, http.StatusOK, h.health())
	case allowed[seg] != "":
		w.Header().Set("Allow", allowed[seg])
		writeError(w, http.StatusMethodNotAllowed, "method "+r.Method+" is not allowed here")
	default:
		writeError(w, http.StatusNotFound, "no such endpoint: "+seg)
	}
}

// allowed are the methods of each endpoint.
var allowed = map[string]string{"": "GET, POST", "policies": "GET", "overrides": "GET, PUT, DELETE", "shadow": "PUT", "top": "GET", "health": "GET"}

func (h handler) set(w http.ResponseWriter, r *http.Request) {
	var o Override
	if !readJSON(w, r, &o) {
		return
	}
	if _, _, err := h.apply(r, "set", o); h.done(w, err) {
		w.WriteHeader(http.StatusNoContent)
	}
}

// delete handles DELETE overrides, named by a listing's entry in the body or by the query.
func (h handler) delete(w http.ResponseWriter, r *http.Request) {
	var o Override
	if r.ContentLength != 0 && r.Body != nil && r.Body != http.NoBody && r.URL.RawQuery == "" {
		if !readJSON(w, r, &o) {
			return
		}
	} else {
		q := r.URL.Query()
		o = Override{Policy: q.Get("policy"), Key: q.Get("key"), StoredKey: q.Get("stored_key")}
	}
	if o.Policy == "" {
		writeError(w, http.StatusBadRequest, "policy is missing: name the limit whose override to delete")
		return
	}
	o, deleted, err := h.apply(r, "delete", o)
	switch {
	case !h.done(w, err):
	case !deleted:
		writeError(w, http.StatusNotFound, "no override of "+o.Policy+" for stored_key "+strconv.Quote(o.StoredKey))
	default:
		w.WriteHeader(http.StatusNoContent)
	}
}

func (h handler) shadow(w http.ResponseWriter, r *http.Request) {
	var v struct {
		Policy string `json:"policy"`
		Shadow *bool  `json:"shadow"`
	}
	if !readJSON(w, r, &v) {
		return
	}
	if v.Shadow == nil {
		writeError(w, http.StatusBadRequest, "shadow is missing: true puts the policy in shadow, false enforces it")
		return
	}
	if _, _, err := h.apply(r, "shadow", Override{Policy: v.Policy, Shadow: *v.Shadow}); h.done(w, err) {
		w.WriteHeader(http.StatusNoContent)
	}
}

// apply makes the change action names, audited: "set" o, "delete" the
// override o names, reporting whether there was one, or "shadow" o's
// policy (o.Shadow) or enforce it. It returns o resolved.
func (h handler) apply(r *http.Request, action string, o Override) (Override, bool, error) {
	what, key := "shadow "+o.Policy, ""
	if action != "shadow" {
		if action == "delete" {
			o = Override{Policy: o.Policy, StoredKey: o.StoredKey, Key: o.Key, Quota: 1} // what Delete reads
		}
		if err := h.p.resolve(&o); err != nil {
			return o, false, err
		}
		what, key = "override "+o.Policy+" "+strconv.Quote(o.StoredKey), o.StoredKey
	}
	before, after := h.current(o.Policy, key), ""
	var err error
	changed := true
	switch action {
	case "set":
		err = h.p.Set(r.Context(), o)
	case "delete":
		changed, err = h.p.Delete(r.Context(), o)
	default:
		err = h.p.SetShadow(r.Context(), o.Policy, o.Shadow)
	}
	if err == nil && changed {
		if action != "delete" {
			after = h.current(o.Policy, key)
		}
		h.audit(r, o.Policy, what, before, after)
	}
	return o, changed, err
}

// current returns the override of policy and key, as JSON, or "".
func (h handler) current(policy, key string) string {
	if o, ok := h.p.table.Load().Get(policy, key); ok {
		b, _ := json.Marshal(o)
		return string(b)
	}
	return ""
}

// audit keeps a change to policy for the page and tells the observer, if
// any, of the first Limiter given the Plane that has the policy, or else
// of the first one: one event per change.
func (h handler) audit(r *http.Request, policy, what, before, after string) {
	who := r.RemoteAddr
	if w, ok := r.Context().Value(whoKey{}).(string); ok {
		who = w
	}
	if h.p.opts.Who != nil {
		who = h.p.opts.Who(r)
	}
	h.p.changes.add(change{When: time.Now(), Who: who, What: what, Before: before, After: after})
	limiters := h.p.attached()
	if len(limiters) == 0 {
		return
	}
	a := limiters[max(slices.IndexFunc(limiters, func(l *attached) bool {
		return slices.ContainsFunc(l.Policies(), func(c override.Policy) bool { return c.Name == policy })
	}), 0)]
	if a.observe != nil {
		a.observe(r, ratelimit.Event{Namespace: a.namespace, Outcome: "changed",
			Who: who, What: what, Before: before, After: after})
	}
}

// done answers err, if any, and reports whether there was none.
func (h handler) done(w http.ResponseWriter, err error) bool {
	switch {
	case err == nil:
		return true
	case errors.Is(err, errInvalid):
		writeError(w, http.StatusBadRequest, strings.TrimPrefix(err.Error(), errInvalid.Error()+": "))
	default:
		h.p.logger.Error("admin: a change failed", slog.String("error", err.Error()))
		writeError(w, http.StatusServiceUnavailable, "Redis did not take the change; the cause is in the service's log")
	}
	return false
}

// policyView is a limit as in force now.
type policyView struct {
	Policy     string `json:"policy"`
	Route      string `json:"route,omitempty"`
	Algorithm  string `json:"algorithm"`
	Quota      int    `json:"quota"`
	WindowMS   int64  `json:"window_ms"`
	Unlimited  bool   `json:"unlimited,omitempty"`
	Blocked    bool   `json:"blocked,omitempty"`
	Shadow     bool   `json:"shadow"`
	Overridden bool   `json:"overridden"`            // by the policy's override for every key
	PerRequest bool   `json:"per_request,omitempty"` // of a set WithLimitsFunc chose for a request
}

// policies returns the Limiters' limits, under the overrides of their whole policies.
func (h handler) policies() []policyView {
	t := h.p.table.Load()
	views := []policyView{}
	for _, l := range h.p.attached() {
		for _, c := range l.Policies() {
			v := policyView{Policy: c.Name, Route: c.Route, Algorithm: c.Algorithm, Quota: c.Quota, WindowMS: c.Window.Milliseconds(), Shadow: c.Shadow, PerRequest: c.PerRequest}
			if o, ok := t.Get(c.Name, ""); ok {
				v.Overridden, v.Unlimited, v.Blocked = true, o.Unlimited, o.Blocked
				v.Quota = cmp.Or(o.Quota, v.Quota)
				v.WindowMS = cmp.Or(o.Window.Milliseconds(), v.WindowMS)
				v.Shadow = o.Shadow || v.Shadow && !o.Enforced
			}
			views = append(views, v)
		}
	}
	return views
}

func (h handler) top(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	last, ok := map[string]time.Duration{"": time.Minute, "1m": time.Minute, "1h": time.Hour}[q.Get("last")]
	if !ok {
		writeError(w, http.StatusBadRequest, "last is "+strconv.Quote(q.Get("last"))+": want 1m or 1h")
		return
	}
	n := 20
	if s := q.Get("n"); s != "" {
		var err error
		if n, err = strconv.Atoi(s); err != nil || n < 1 || n > summaryKeys {
			writeError(w, http.StatusBadRequest, "n is "+strconv.Quote(s)+": want 1 to "+strconv.Itoa(summaryKeys))
			return
		}
	}
	if q.Get("policy") == "" {
		writeError(w, http.StatusBadRequest, "policy is missing: name the limit whose keys to list")
		return
	}
	if top, err := h.p.Top(r.Context(), q.Get("policy"), last, n); h.done(w, err) {
		writeJSON(w, http.StatusOK, top)
	}
}

type healthView struct {
	Overrides struct {
		Read    bool `json:"read"`    // they were read from Redis, and apply
		Failing bool `json:"failing"` // the last read failed: they are those read before
		Count   int  `json:"count"`
	} `json:"overrides"`
	Fallbacks []fallbackView `json:"fallbacks"`
	Bans      []banView      `json:"bans"` // the keys this instance saw banned, not yet over
}

// fallbackView is a Fallback's health, named by the namespaces of the Limiters using it.
type fallbackView struct {
	Limiters []string `json:"limiters"`
	store.FallbackHealth
}

func (h handler) health() healthView {
	var v healthView
	list, read := h.p.List()
	v.Overrides.Read, v.Overrides.Failing, v.Overrides.Count = read, h.p.failing.Load(), len(list)
	v.Fallbacks = []fallbackView{}
	var seen []ratelimit.Store
	for _, l := range h.p.attached() {
		f, ok := l.store.(interface{ Health() store.FallbackHealth })
		if !ok {
			continue
		}
		if i := slices.Index(seen, l.store); i >= 0 {
			v.Fallbacks[i].Limiters = append(v.Fallbacks[i].Limiters, l.namespace)
			continue
		}
		seen = append(seen, l.store)
		v.Fallbacks = append(v.Fallbacks, fallbackView{Limiters: []string{l.namespace}, FallbackHealth: f.Health()})
	}
	v.Bans = h.p.bans.inForce(time.Now(), h.p.labelOf)
	return v
}

//go:embed page.html
var pageSource string

var pageTemplate = template.Must(template.New("page").Parse(pageSource))

type pageData struct {
	Policies    []policyView
	PolicyNames []string // of Policies, each once
	Overrides   []Override
	Top         []pageTop
	Health      healthView
	TopError    string
	Now         string // the instance's time
	Instance    string // its name in the keys denied most
	Changes     []change
	Session     bool // a session of Options.Token's, which can log out
	pageNote
}

// pageNote is what the page says of the change asked for last.
type pageNote struct{ Notice, Error string }

type pageTop struct {
	Policy       string // " (shadow)" after a name: its would-be denials
	Minute, Hour []TopKey
}

// page serves what the JSON endpoints say as HTML, with no script or asset from elsewhere.
func (h handler) page(w http.ResponseWriter, r *http.Request, status int, note pageNote) {
	list, _ := h.p.List()
	d := pageData{Policies: h.policies(), Overrides: list, Health: h.health(), pageNote: note,
		Now: time.Now().Format("2006-01-02 15:04:05 MST"), Instance: h.p.top.instance, Changes: h.p.changes.list(), Session: h.p.sessions != nil}
	ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
	defer cancel()
	for _, pv := range d.Policies {
		if slices.Contains(d.PolicyNames, pv.Policy) {
			continue
		}
		d.PolicyNames = append(d.PolicyNames, pv.Policy)
		for _, name := range []string{pv.Policy, pv.Policy + " (shadow)"} {
			minute, err1 := h.p.Top(ctx, name, time.Minute, 20)
			hour, err2 := h.p.Top(ctx, name, time.Hour, 20)
			if err := errors.Join(err1, err2); err != nil {
				h.p.logger.Error("admin: reading the keys denied most for the page", slog.String("error", err.Error()))
				d.TopError = "The keys denied most could not be read from Redis; the cause is in the service's log."
				break
			}
			if name == pv.Policy || len(hour) > 0 {
				d.Top = append(d.Top, pageTop{Policy: name, Minute: minute, Hour: hour})
			}
		}
	}
	var b bytes.Buffer
	if err := pageTemplate.Execute(&b, d); err != nil {
		h.p.logger.Error("admin: writing the page", slog.String("error", err.Error()))
		writeError(w, http.StatusInternalServerError, "the page could not be made; the cause is in the service's log")
		return
	}
	writeHTML(w, status, b.Bytes())
}

// writeHTML answers a page: no script, nothing from elsewhere, forms
// posted only to the handler's origin.
func writeHTML(w http.ResponseWriter, status int, page []byte) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'; form-action 'self'; frame-ancestors 'none'")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_, _ = w.Write(page)
}

//go:embed login.html
var loginSource string

var loginTemplate = template.Must(template.New("login").Parse(loginSource))

// loginPage answers the form that asks for the token, saying problem.
func (h handler) loginPage(w http.ResponseWriter, status int, problem string) {
	var b bytes.Buffer
	_ = loginTemplate.Execute(&b, problem)
	writeHTML(w, status, b.Bytes())
}

// login handles the login form's POST: a right token starts a session
// and goes to the page; a wrong one is refused, and counted.
func (h handler) login(w http.ResponseWriter, r *http.Request) {
	r.Body = http.MaxBytesReader(w, r.Body, 4<<10)
	if err := r.ParseForm(); err != nil || !h.p.sessions.isToken(r.PostForm.Get("token")) {
		h.p.sessions.refuse()
		h.loginPage(w, http.StatusUnauthorized, "That is not the admin token.")
		return
	}
	h.p.sessions.login(w, r)
	http.Redirect(w, r, "./", http.StatusSeeOther)
}

// maxFormNumber bounds a number of the page's forms: a quota past any a
// limit takes in practice, and a window (in ms) of about 35 years, which
// a time.Duration holds.
const maxFormNumber = 1 << 40

// act handles a form of the page: set or delete an override, or flip a
// policy's shadow, then goes back to the page saying what was done, or
// shows it again saying what is wrong.
func (h handler) act(w http.ResponseWriter, r *http.Request) {
	r.Body = http.MaxBytesReader(w, r.Body, 64<<10)
	if err := r.ParseForm(); err != nil {
		h.page(w, r, http.StatusBadRequest, pageNote{Error: "The form could not be read."})
		return
	}
	f := r.PostForm
	o := Override{Policy: f.Get("policy"), Key: f.Get("key"), StoredKey: f.Get("stored_key")}
	var err error
	var done string
	switch f.Get("action") {
	case "set":
		var windowMS int
		for _, field := range []struct {
			name string
			v    *int
		}{{"quota", &o.Quota}, {"window_ms", &windowMS}} {
			if s := f.Get(field.name); s != "" {
				n, err := strconv.Atoi(s)
				if err != nil || n < 0 || n > maxFormNumber {
					h.page(w, r, http.StatusBadRequest, pageNote{Error: field.name + " is " + strconv.Quote(s) + ": want a whole number from 1 to " + strconv.Itoa(maxFormNumber)})
					return
				}
				*field.v = n
			}
		}
		o.Window = time.Duration(windowMS) * time.Millisecond
		modes := map[string]*bool{"unlimited": &o.Unlimited, "blocked": &o.Blocked, "shadow": &o.Shadow, "enforced": &o.Enforced}
		if mode := modes[f.Get("mode")]; mode != nil {
			*mode = true
		}
		fallthrough
	case "delete":
		action := f.Get("action")
		if o, _, err = h.apply(r, action, o); err == nil {
			done = map[string]string{"set": "Set", "delete": "Deleted"}[action] + " the override of " + o.Policy + " for " + cmp.Or(o.StoredKey, "every key") + "."
		}
	case "shadow":
		o.Shadow = f.Get("shadow") == "true"
		done = "Put " + o.Policy + " in shadow."
		if !o.Shadow {
			done = "Enforced " + o.Policy + "."
		}
		_, _, err = h.apply(r, "shadow", o)
	default:
		h.page(w, r, http.StatusBadRequest, pageNote{Error: "No such action."})
		return
	}
	switch {
	case err == nil:
		http.Redirect(w, r, "./?done="+url.QueryEscape(done), http.StatusSeeOther)
	case errors.Is(err, errInvalid):
		h.page(w, r, http.StatusBadRequest, pageNote{Error: strings.TrimPrefix(err.Error(), errInvalid.Error()+": ")})
	default:
		h.p.logger.Error("admin: a change failed", slog.String("error", err.Error()))
		h.page(w, r, http.StatusServiceUnavailable, pageNote{Error: "Redis did not take the change; the cause is in the service's log."})
	}
}

// readJSON decodes r's body, at most 64 KiB of one JSON object with no
// unknown field, into v, or answers a 400 saying why.
func readJSON(w http.ResponseWriter, r *http.Request, v any) bool {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, 64<<10))
	if err != nil {
		writeError(w, http.StatusBadRequest, "the body is longer than 64 KiB")
		return false
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		var typ *json.UnmarshalTypeError
		msg := "the body is not a JSON object of the fields this endpoint takes"
		switch {
		case errors.Is(err, override.ErrInvalid):
			msg = strings.TrimPrefix(err.Error(), override.ErrInvalid.Error()+": ")
		case errors.As(err, &typ):
			msg = typ.Field + ": " + expected[typ.Field] + ", not " + rawField(body, typ.Field)
		case strings.HasPrefix(err.Error(), "json: unknown field "):
			name := strings.TrimPrefix(err.Error(), "json: unknown field ")
			msg = "unknown field " + name
			if hint := instead[strings.Trim(name, `"`)]; hint != "" {
				msg += ": " + hint
			}
		}
		writeError(w, http.StatusBadRequest, msg)
		return false
	}
	return true
}

// expected says what each field of the endpoints' bodies takes.
var expected = map[string]string{
	"policy":     "a limit's name, a string",
	"key":        "the key as the client sends it, a string",
	"stored_key": "the key in the store's form, a string, as listings give it",
	"label":      "a string, which listings give and a change ignores",
	"quota":      "a quota above 0, or none for the limit's",
	"window_ms":  "a number of milliseconds",
	"unlimited":  "true, or none",
	"blocked":    "true, or none",
	"shadow":     "true, or none",
	"enforced":   "true, or none",
}

// instead says what to write for a field the endpoints do not take but a user may guess.
var instead = map[string]string{
	"window":  `write "window_ms", in milliseconds`,
	"enforce": `write "enforced": true`,
	"limit":   `write "quota"`,
}

// rawField returns the JSON text body gives field, or "that".
func rawField(body []byte, field string) string {
	var m map[string]json.RawMessage
	if json.Unmarshal(body, &m) != nil || m[field] == nil {
		return "that"
	}
	return string(m[field])
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func writeError(w http.ResponseWriter, status int, msg string) {
	writeJSON(w, status, struct {
		Error string `json:"error"`
	}{msg})
}

// A change is one made through the handler, as its audit event tells it.
type change struct {
	When                     time.Time
	Who, What, Before, After string
}

// changes are the last maxChanges made through a Plane's handler.
type changes struct {
	mu   sync.Mutex
	last []change // oldest first
}

const maxChanges = 20

func (c *changes) add(ch change) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.last = append(c.last, ch)
	c.last = c.last[max(0, len(c.last)-maxChanges):]
}

// list returns the changes, newest first.
func (c *changes) list() []change {
	c.mu.Lock()
	defer c.mu.Unlock()
	l := slices.Clone(c.last)
	slices.Reverse(l)
	return l
}
