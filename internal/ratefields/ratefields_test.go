package ratefields_test

import (
	"cmp"
	"fmt"
	"net/http"
	"net/textproto"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ratelimit-go/ratelimit/internal/ratefields"
)

// now is the time every case is parsed at; maxDelay the cap, unless a
// case sets its own.
var (
	now      = time.Date(2026, 11, 25, 14, 35, 37, 250_000_000, time.UTC)
	maxDelay = 10 * time.Minute
)

// A parseCase is a response and what Parse should make of it.
type parseCase struct {
	name     string
	header   []string // "Name: value" lines, in order; a name may repeat
	status   int      // 0 means 200
	body     string
	maxDelay time.Duration // 0 means maxDelay
	want     ratefields.Info
	problems []ratefields.Problem // in any order
}

// header returns the lines "Name: value" as net/http would give them:
// canonical names, values trimmed, one entry per line.
func header(lines ...string) http.Header {
	h := http.Header{}
	for _, l := range lines {
		name, value, ok := strings.Cut(l, ":")
		if !ok {
			continue
		}
		key := textproto.CanonicalMIMEHeaderKey(strings.TrimSpace(name))
		h[key] = append(h[key], strings.Trim(value, " \t"))
	}
	return h
}

// run parses c's response and wants c's Info and Problems.
func run(t *testing.T, c parseCase) {
	t.Helper()
	status := cmp.Or(c.status, http.StatusOK)
	var body []byte
	if c.body != "" {
		body = []byte(c.body)
	}
	got, problems := ratefields.Parse(header(c.header...), status, body, now, cmp.Or(c.maxDelay, maxDelay))
	if !reflect.DeepEqual(got, c.want) {
		t.Errorf("Info:\ngot  %+v\nwant %+v", got, c.want)
	}
	sortProblems(problems)
	want := slices.Clone(c.problems)
	sortProblems(want)
	if !slices.Equal(problems, want) {
		t.Errorf("Problems: got %v, want %v", problems, want)
	}
}

func sortProblems(ps []ratefields.Problem) {
	slices.SortFunc(ps, func(a, b ratefields.Problem) int {
		return cmp.Or(cmp.Compare(a.Field, b.Field), cmp.Compare(a.Reason, b.Reason))
	})
}

// runAll runs each case as a subtest.
func runAll(t *testing.T, cases []parseCase) {
	t.Helper()
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) { run(t, c) })
	}
}

// pol and lim build the policies and limits cases want; a unit of ""
// means "requests".
func pol(name string, quota int64, window time.Duration, unit, partition string) ratefields.Policy {
	return ratefields.Policy{Name: name, Quota: quota, Window: window, Unit: cmp.Or(unit, "requests"), Partition: partition}
}

func lim(name string, remaining int64, reset time.Duration, partition string) ratefields.Limit {
	return ratefields.Limit{Name: name, Remaining: remaining, Reset: reset, Partition: partition}
}

func problem(field string, reason ratefields.Reason) ratefields.Problem {
	return ratefields.Problem{Field: field, Reason: reason}
}

func policies(ps ...ratefields.Policy) []ratefields.Policy { return ps }
func limits(ls ...ratefields.Limit) []ratefields.Limit     { return ls }

// items returns n items made by item(i), joined as a List.
func items(n int, item func(i int) string) string {
	s := make([]string, n)
	for i := range s {
		s[i] = item(i)
	}
	return strings.Join(s, ", ")
}

const (
	malformed   = ratefields.ReasonMalformed
	duplicate   = ratefields.ReasonDuplicate
	negative    = ratefields.ReasonNegative
	tooLarge    = ratefields.ReasonTooLarge
	tooMany     = ratefields.ReasonTooMany
	capped      = ratefields.ReasonCapped
	inPast      = ratefields.ReasonInPast
	contradicts = ratefields.ReasonContradicts
)

// TestDraft11 reads RateLimit-Policy and RateLimit as drafts 8 to 11
// define them, and refuses what they do not.
func TestDraft11(t *testing.T) {
	long := strings.Repeat("n", ratefields.MaxName+1)
	pk257 := ":" + strings.Repeat("AAAA", 85) + "AAA=:" // 257 bytes
	runAll(t, []parseCase{
		{name: "what this module's Limiter sends",
			header: []string{`RateLimit-Policy: "api";q=100;w=60`, `RateLimit: "api";r=99;t=60`},
			want:   ratefields.Info{Policies: policies(pol("api", 100, time.Minute, "", "")), Limits: limits(lim("api", 99, time.Minute, ""))}},
		{name: "units and partition keys",
			header: []string{
				`RateLimit-Policy: "default";q=100;w=60, "tokens";q=40000;w=60;qu="content-bytes";pk=:cHJvamVjdA==:`,
				`RateLimit: "default";r=50;t=30;pk=:cHJvamVjdA==:`,
			},
			want: ratefields.Info{
				Policies: policies(pol("default", 100, time.Minute, "", ""), pol("tokens", 40000, time.Minute, "content-bytes", "project")),
				Limits:   limits(lim("default", 50, 30*time.Second, "project")),
			}},
		{name: "names as Tokens, drafts 8 to 10",
			header: []string{`RateLimit-Policy: burst;q=100;w=60,daily;q=1000;w=86400`, `RateLimit: burst;r=50;t=30, daily;r=999`},
			want: ratefields.Info{
				Policies: policies(pol("burst", 100, time.Minute, "", ""), pol("daily", 1000, 24*time.Hour, "", "")),
				Limits:   limits(lim("burst", 50, 30*time.Second, ""), lim("daily", 999, 0, "")),
			}},
		{name: "spaces after semicolons, as express-rate-limit's draft-8",
			header: []string{`RateLimit-Policy: "100-in-1min"; q=100; w=60; pk=:ZGVmYXVsdA==:`, `RateLimit: "100-in-1min"; r=25; t=5; pk=:ZGVmYXVsdA==:`},
			want: ratefields.Info{
				Policies: policies(pol("100-in-1min", 100, time.Minute, "", "default")),
				Limits:   limits(lim("100-in-1min", 25, 5*time.Second, "default")),
			}},
		{name: "a list split over lines",
			header: []string{`RateLimit-Policy: "a";q=1;w=1`, `RateLimit-Policy: "b";q=2;w=2`, `RateLimit: "a";r=0;t=1`, `RateLimit: "b";r=1;t=2`},
			want: ratefields.Info{
				Policies: policies(pol("a", 1, time.Second, "", ""), pol("b", 2, 2*time.Second, "", "")),
				Limits:   limits(lim("a", 0, time.Second, ""), lim("b", 1, 2*time.Second, "")),
			}},
		{name: "no window: calendar quotas and requests in flight; other parameters are comments",
			header: []string{`RateLimit-Policy: "month";q=1000000, "gen";q=4;qu="concurrent-requests";acme-x=?1, "r";q=9;w=9;qu="request"`, `RateLimit: "gen";r=3;t=0;acme-y="z"`},
			want: ratefields.Info{
				Policies: policies(pol("month", 1000000, 0, "", ""), pol("gen", 4, 0, "concurrent-requests", ""), pol("r", 9, 9*time.Second, "", "")),
				Limits:   limits(lim("gen", 3, 0, "")),
			}},
		{name: "RateLimit alone", header: []string{`RateLimit: "default";r=50;t=30`},
			want: ratefields.Info{Limits: limits(lim("default", 50, 30*time.Second, ""))}},
		{name: "RateLimit-Policy alone", header: []string{`RateLimit-Policy: "default";q=50`},
			want: ratefields.Info{Policies: policies(pol("default", 50, 0, "", ""))}},

		{name: "an unparsable field is ignored whole",
			header:   []string{`RateLimit-Policy: "a";q=1, "b";q=`, `RateLimit: "a";r=1, b"`},
			problems: []ratefields.Problem{problem("Ratelimit-Policy", malformed), problem("Ratelimit", malformed)}},
		{name: "an empty field is malformed",
			header:   []string{`RateLimit-Policy: `, `RateLimit: `},
			problems: []ratefields.Problem{problem("Ratelimit-Policy", malformed), problem("Ratelimit", malformed)}},
		{name: "a wrong item is ignored alone",
			header: []string{
				`RateLimit-Policy: "ok";q=1, "noq";w=1, "strq";q="1", "decq";q=1.5, "w0";q=1;w=0, "boolw";q=1;w, "unit";q=1;qu="tokens", "pk";q=1;pk="x", ("inner";q=1), ?1;q=1, 5;w=1`,
				`RateLimit: "ok";r=1, "nor";t=1, "strr";r="1", "tdec";r=1;t=1.5, 7;r=1, ("inner";r=1), "pk";r=1;pk=abc`,
			},
			want:     ratefields.Info{Policies: policies(pol("ok", 1, 0, "", "")), Limits: limits(lim("ok", 1, 0, ""))},
			problems: []ratefields.Problem{problem("Ratelimit-Policy", malformed), problem("Ratelimit", malformed)}},
		{name: "negative numbers",
			header:   []string{`RateLimit-Policy: "q";q=-1, "w";q=1;w=-60, "ok";q=5`, `RateLimit: "r";r=-1, "t";r=1;t=-1, "ok";r=5`},
			want:     ratefields.Info{Policies: policies(pol("ok", 5, 0, "", "")), Limits: limits(lim("ok", 5, 0, ""))},
			problems: []ratefields.Problem{problem("Ratelimit-Policy", negative), problem("Ratelimit", negative)}},
		{name: "names, partition keys and windows too large",
			header: []string{
				`RateLimit-Policy: "` + long + `";q=1, "pk";q=1;pk=` + pk257 + `, "w";q=1;w=315360001, "ok";q=1;w=315360000`,
				`RateLimit: "` + long + `";r=1, "pk";r=1;pk=` + pk257 + `, "ok";r=1`,
			},
			want: ratefields.Info{
				Policies: policies(pol("ok", 1, ratefields.MaxWindow, "", "")),
				Limits:   limits(lim("ok", 1, 0, "")),
			},
			problems: []ratefields.Problem{problem("Ratelimit-Policy", tooLarge), problem("Ratelimit", tooLarge)}},
		{name: "a field too large is not read",
			header: []string{
				`RateLimit-Policy: "a";q=1;comment="` + strings.Repeat("x", ratefields.MaxField) + `"`,
				`RateLimit: "a";r=1`,
			},
			want:     ratefields.Info{Limits: limits(lim("a", 1, 0, ""))},
			problems: []ratefields.Problem{problem("Ratelimit-Policy", tooLarge)}},
		{name: "many empty lines make a field too large",
			header:   slices.Repeat([]string{"RateLimit: "}, ratefields.MaxField),
			problems: []ratefields.Problem{problem("Ratelimit", tooLarge)}},
		{name: "more than MaxItems: the first kept",
			header: []string{
				"RateLimit-Policy: " + items(ratefields.MaxItems+1, func(i int) string { return fmt.Sprintf(`"p%d";q=%d`, i, i) }),
				"RateLimit: " + items(ratefields.MaxItems+1, func(i int) string { return fmt.Sprintf(`"p%d";r=%d`, i, i) }),
			},
			want: ratefields.Info{
				Policies: func() (ps []ratefields.Policy) {
					for i := range ratefields.MaxItems {
						ps = append(ps, pol(fmt.Sprintf("p%d", i), int64(i), 0, "", ""))
					}
					return ps
				}(),
				Limits: func() (ls []ratefields.Limit) {
					for i := range ratefields.MaxItems {
						ls = append(ls, lim(fmt.Sprintf("p%d", i), int64(i), 0, ""))
					}
					return ls
				}(),
			},
			problems: []ratefields.Problem{problem("Ratelimit-Policy", tooMany), problem("Ratelimit", tooMany)}},
		{name: "an item repeated as it was is one",
			header: []string{`RateLimit-Policy: "a";q=5;w=1`, `RateLimit-Policy: "a";q=5;w=1`, `RateLimit: "a";r=1;t=1, "a";r=1;t=1`},
			want:   ratefields.Info{Policies: policies(pol("a", 5, time.Second, "", "")), Limits: limits(lim("a", 1, time.Second, ""))}},
		{name: "an item repeated with other values: the tighter is kept",
			header: []string{
				`RateLimit-Policy: "a";q=10;w=1, "a";q=5;w=1, "a";q=5;w=60, "a";q=7, "a";pk=:AA==:;q=50`,
				`RateLimit: "a";r=4;t=1, "a";r=2;t=1, "a";r=2;t=9, "a";r=3;t=60`,
			},
			want: ratefields.Info{
				Policies: policies(pol("a", 5, time.Minute, "", ""), pol("a", 50, 0, "", "\x00")),
				Limits:   limits(lim("a", 2, 9*time.Second, "")),
			},
			problems: []ratefields.Problem{problem("Ratelimit-Policy", duplicate), problem("Ratelimit", duplicate)}},
		{name: "a reset beyond the cap is kept: it is no wait while units are left",
			header: []string{`RateLimit: "hour";r=97;t=3598`},
			want:   ratefields.Info{Limits: limits(lim("hour", 97, 3598*time.Second, ""))}},
		{name: "more remaining than the quota: the limit is ignored",
			header: []string{
				`RateLimit-Policy: "a";q=100, "b";q=10;pk=:AA==:, "c";q=10`,
				`RateLimit: "a";r=101, "b";r=11;pk=:AA==:, "b";r=11;pk=:AQ==:, "c";r=10`,
			},
			want: ratefields.Info{
				Policies: policies(pol("a", 100, 0, "", ""), pol("b", 10, 0, "", "\x00"), pol("c", 10, 0, "", "")),
				Limits:   limits(lim("b", 11, 0, "\x01"), lim("c", 10, 0, "")),
			},
			problems: []ratefields.Problem{problem("Ratelimit", contradicts)}},
		{name: "a policy list of one kind: an Integer after a String is malformed",
			header:   []string{`RateLimit-Policy: "a";q=1, 100;w=60`},
			want:     ratefields.Info{Policies: policies(pol("a", 1, 0, "", ""))},
			problems: []ratefields.Problem{problem("Ratelimit-Policy", malformed)}},
		{name: "the largest numbers RFC 9651 allows",
			header: []string{`RateLimit-Policy: "a";q=999999999999999`, `RateLimit: "a";r=999999999999999;t=999999999999999`},
			want: ratefields.Info{
				Policies: policies(pol("a", 999999999999999, 0, "", "")),
				Limits:   limits(lim("a", 999999999999999, ratefields.MaxWindow, "")),
			},
			problems: []ratefields.Problem{problem("Ratelimit", tooLarge)}},
		// RFC 9651 (section 4.2.7) asks parsers to accept a Byte
		// Sequence without its base64 padding; this module pads.
		{name: "a partition key without padding is the same key",
			header: []string{`RateLimit-Policy: "a";q=5;pk=:cHJvamVjdA:`, `RateLimit: "a";r=2;pk=:cHJvamVjdA:, "a";r=1;pk=:cHJvamVjdA==:`},
			want: ratefields.Info{
				Policies: policies(pol("a", 5, 0, "", "project")),
				Limits:   limits(lim("a", 1, 0, "project")),
			},
			problems: []ratefields.Problem{problem("Ratelimit", duplicate)}},
		{name: "a partition key with part of its padding makes the field unparsable",
			header:   []string{`RateLimit: "a";r=1;pk=:cHJvamVjdA=:`},
			problems: []ratefields.Problem{problem("Ratelimit", malformed)}},
		{name: "numbers beyond them make the field unparsable",
			header:   []string{`RateLimit-Policy: "a";q=1000000000000000`},
			problems: []ratefields.Problem{problem("Ratelimit-Policy", malformed)}},
	})
}

// TestHostileFieldsAllocateLittle parses fields of MaxField bytes made
// to cost a parser the most: thousands of distinct items, parameters,
// Dictionary members or Inner Lists, or a field on a thousand lines.
// Parse allocates for what it keeps, not for what it reads: a name and a
// partition key for each policy and limit kept, the slices that hold
// them, the problems, and the lines of a field joined into one value.
func TestHostileFieldsAllocateLittle(t *testing.T) {
	// fill returns first, then item(0), item(1) and so on, then last, in
	// at most MaxField bytes.
	fill := func(first string, item func(i int) string, last string) string {
		b := strings.Builder{}
		b.WriteString(first)
		for i := 0; b.Len()+len(item(i))+len(last) <= ratefields.MaxField; i++ {
			b.WriteString(item(i))
		}
		b.WriteString(last)
		return b.String()
	}
	for _, tc := range []struct {
		name   string
		header http.Header
		kept   int // policies and limits
	}{
		{"distinct items", http.Header{
			"Ratelimit-Policy": {fill("", func(i int) string { return fmt.Sprintf(`"p\"%d";q=1;w=1;pk=:AAAA:, `, i) }, "x")},
			"Ratelimit":        {fill("", func(i int) string { return fmt.Sprintf(`"p\"%d";r=1;pk=:AAAA:, `, i) }, "x")},
		}, 2 * ratefields.MaxItems},
		{"parameters", http.Header{"Ratelimit": {fill(`"a";r=1`, func(i int) string { return fmt.Sprintf(";k%d=%d", i, i) }, "")}}, 1},
		{"Dictionary members", http.Header{"Ratelimit": {fill("limit=1, reset=1", func(i int) string { return fmt.Sprintf(", k%d=1;x", i) }, "")}}, 1},
		{"Inner Lists", http.Header{"Ratelimit-Policy": {fill("", func(int) string { return "(1 2 3);a=1, " }, "1;w=1")}}, 1},
		{"lines", http.Header{"Ratelimit-Policy": strings.Split(fill("", func(i int) string { return fmt.Sprintf(`"p%d";q=1, `, i) }, "x"), ", ")}, ratefields.MaxItems},
	} {
		t.Run(tc.name, func(t *testing.T) {
			info, _ := ratefields.Parse(tc.header, http.StatusOK, nil, now, maxDelay)
			if kept := len(info.Policies) + len(info.Limits); kept != tc.kept {
				t.Fatalf("got %d policies and limits, want %d", kept, tc.kept)
			}
			allocs := testing.AllocsPerRun(10, func() { ratefields.Parse(tc.header, http.StatusOK, nil, now, maxDelay) })
			if want := 4*ratefields.MaxItems + 8; allocs > float64(want) {
				t.Errorf("got %v allocations, want at most %d", allocs, want)
			}
		})
	}
}

// TestDraft7And6 reads the unnamed forms of drafts 6 and 7.
func TestDraft7And6(t *testing.T) {
	runAll(t, []parseCase{
		{name: "draft 7",
			header: []string{`RateLimit: limit=100, remaining=0, reset=60`, `RateLimit-Policy: 100;w=60`},
			want:   ratefields.Info{Policies: policies(pol("", 100, time.Minute, "", "")), Limits: limits(lim("", 0, time.Minute, ""))}},
		{name: "draft 7: the limit's policy first",
			header: []string{`RateLimit: limit=100, remaining=50, reset=30`, `RateLimit-Policy: 10;w=1, 100;w=60;comment="x", 1000;w=3600`},
			want: ratefields.Info{
				Policies: policies(pol("", 100, time.Minute, "", ""), pol("", 10, time.Second, "", ""), pol("", 1000, time.Hour, "", "")),
				Limits:   limits(lim("", 50, 30*time.Second, "")),
			}},
		{name: "draft 7 without RateLimit-Policy or remaining; parameters and other keys ignored",
			header: []string{`RateLimit: limit=100;x=1, reset=5, policy="p"`},
			want:   ratefields.Info{Policies: policies(pol("", 100, 0, "", ""))}},
		{name: "draft 7 without limit or reset is malformed; then draft 6 is read",
			header:   []string{`RateLimit: remaining=5, reset=5`, `RateLimit-Limit: 10`, `RateLimit-Remaining: 5`},
			want:     ratefields.Info{Policies: policies(pol("", 10, 0, "", "")), Limits: limits(lim("", 5, 0, ""))},
			problems: []ratefields.Problem{problem("Ratelimit", malformed)}},
		{name: "draft 7 values that are not Integers",
			header:   []string{`RateLimit: limit=100, remaining="5", reset=5`},
			problems: []ratefields.Problem{problem("Ratelimit", malformed)}},
		{name: "draft 7 as an inner list",
			header:   []string{`RateLimit: limit=(100), reset=5`},
			problems: []ratefields.Problem{problem("Ratelimit", malformed)}},
		{name: "draft 7 negative",
			header:   []string{`RateLimit: limit=100, remaining=0, reset=-5`},
			problems: []ratefields.Problem{problem("Ratelimit", negative)}},
		{name: "draft 7 more remaining than the limit",
			header:   []string{`RateLimit: limit=100, remaining=101, reset=5`},
			want:     ratefields.Info{Policies: policies(pol("", 100, 0, "", ""))},
			problems: []ratefields.Problem{problem("Ratelimit", contradicts)}},
		{name: "draft 7 reset beyond the cap, kept",
			header: []string{`RateLimit: limit=100, remaining=1, reset=86400`},
			want:   ratefields.Info{Policies: policies(pol("", 100, 0, "", "")), Limits: limits(lim("", 1, 24*time.Hour, ""))}},
		{name: "draft 7 policies: w required, one per quota, the longer window kept",
			header:   []string{`RateLimit: limit=10, remaining=1, reset=1`, `RateLimit-Policy: 10;w=1, 10;w=60, 20, 30;w=0, -1;w=1, 40;w=1.5`},
			want:     ratefields.Info{Policies: policies(pol("", 10, time.Minute, "", "")), Limits: limits(lim("", 1, time.Second, ""))},
			problems: []ratefields.Problem{problem("Ratelimit-Policy", duplicate), problem("Ratelimit-Policy", malformed), problem("Ratelimit-Policy", negative)}},
		{name: "draft 7: MaxItems policies in all, the limit's first",
			header: []string{`RateLimit: limit=1000, remaining=1, reset=1`,
				"RateLimit-Policy: " + items(ratefields.MaxItems, func(i int) string { return fmt.Sprintf("%d;w=1", i) })},
			want: ratefields.Info{
				Policies: func() []ratefields.Policy {
					ps := policies(pol("", 1000, 0, "", ""))
					for i := range ratefields.MaxItems - 1 {
						ps = append(ps, pol("", int64(i), time.Second, "", ""))
					}
					return ps
				}(),
				Limits: limits(lim("", 1, time.Second, "")),
			},
			problems: []ratefields.Problem{problem("Ratelimit-Policy", tooMany)}},
		{name: "RateLimit-Policy alone, unnamed",
			header: []string{`RateLimit-Policy: 100;w=60`},
			want:   ratefields.Info{Policies: policies(pol("", 100, time.Minute, "", ""))}},

		{name: "draft 6",
			header: []string{`RateLimit-Limit: 100`, `RateLimit-Remaining: 0`, `RateLimit-Reset: 60`, `RateLimit-Policy: 100;w=60`},
			want:   ratefields.Info{Policies: policies(pol("", 100, time.Minute, "", "")), Limits: limits(lim("", 0, time.Minute, ""))}},
		{name: "draft 6: lines repeating one value are one",
			header: []string{`RateLimit-Limit: 100`, `RateLimit-Limit: 100`, `RateLimit-Remaining: 7`},
			want:   ratefields.Info{Policies: policies(pol("", 100, 0, "", "")), Limits: limits(lim("", 7, 0, ""))}},
		{name: "draft 6: lines that differ are ignored",
			header:   []string{`RateLimit-Limit: 100`, `RateLimit-Limit: 1000`, `RateLimit-Remaining: 7`},
			problems: []ratefields.Problem{problem("Ratelimit-Limit", duplicate), problem("Ratelimit-Remaining", malformed)}},
		{name: "draft 6: remaining with no limit counts against no known quota",
			header:   []string{`RateLimit-Remaining: 7`, `RateLimit-Reset: 1`, `RateLimit-Policy: 10;w=1`},
			want:     ratefields.Info{Policies: policies(pol("", 10, time.Second, "", ""))},
			problems: []ratefields.Problem{problem("Ratelimit-Remaining", malformed)}},
		{name: "draft 6: not Integers",
			header:   []string{`RateLimit-Limit: 100, 100`, `RateLimit-Remaining: "7"`, `RateLimit-Reset: 1.5`},
			problems: []ratefields.Problem{problem("Ratelimit-Limit", malformed), problem("Ratelimit-Remaining", malformed)}},
		{name: "draft 6: a bad reset leaves the limit without one",
			header:   []string{`RateLimit-Limit: 100`, `RateLimit-Remaining: 7`, `RateLimit-Reset: soon`},
			want:     ratefields.Info{Policies: policies(pol("", 100, 0, "", "")), Limits: limits(lim("", 7, 0, ""))},
			problems: []ratefields.Problem{problem("Ratelimit-Reset", malformed)}},
		{name: "draft 6: negative, and more remaining than the limit",
			header:   []string{`RateLimit-Limit: 10`, `RateLimit-Remaining: 11`, `RateLimit-Reset: -1`},
			want:     ratefields.Info{Policies: policies(pol("", 10, 0, "", ""))},
			problems: []ratefields.Problem{problem("Ratelimit-Remaining", contradicts), problem("Ratelimit-Reset", negative)}},
		{name: "draft 6: negative limit",
			header:   []string{`RateLimit-Limit: -10`},
			problems: []ratefields.Problem{problem("Ratelimit-Limit", negative)}},
		{name: "draft 6: reset beyond MaxWindow",
			header:   []string{`RateLimit-Limit: 10`, `RateLimit-Remaining: 1`, `RateLimit-Reset: 999999999999999`},
			want:     ratefields.Info{Policies: policies(pol("", 10, 0, "", "")), Limits: limits(lim("", 1, ratefields.MaxWindow, ""))},
			problems: []ratefields.Problem{problem("Ratelimit-Reset", tooLarge)}},
	})
}

// TestXRateLimit reads the X-RateLimit-* fields.
func TestXRateLimit(t *testing.T) {
	reset := now.Add(30 * time.Minute).Unix()
	runAll(t, []parseCase{
		{name: "what this module's Limiter sends: seconds",
			header: []string{`X-RateLimit-Limit: 2`, `X-RateLimit-Remaining: 1`, `X-RateLimit-Reset: 29`},
			want:   ratefields.Info{Policies: policies(pol("", 2, 0, "", "")), Limits: limits(lim("", 1, 29*time.Second, ""))}},
		{name: "GitHub: a Unix time, a resource, used",
			header: []string{`X-RateLimit-Limit: 5000`, `X-RateLimit-Remaining: 4999`, fmt.Sprintf("X-RateLimit-Reset: %d", reset),
				`X-RateLimit-Used: 1`, `X-RateLimit-Resource: core`},
			maxDelay: time.Hour,
			want: ratefields.Info{
				Policies: policies(pol("core", 5000, 0, "", "")),
				// The Unix time has whole seconds: now's quarter second is gone.
				Limits: limits(lim("core", 4999, 30*time.Minute-250*time.Millisecond, "")),
			}},
		{name: "a Unix time beyond the cap, kept",
			header: []string{`X-RateLimit-Limit: 60`, `X-RateLimit-Remaining: 0`, fmt.Sprintf("X-RateLimit-Reset: %d", reset)},
			want:   ratefields.Info{Policies: policies(pol("", 60, 0, "", "")), Limits: limits(lim("", 0, time.Unix(reset, 0).Sub(now), ""))}},
		{name: "a Unix time in the current second is now",
			header: []string{`X-RateLimit-Limit: 60`, `X-RateLimit-Remaining: 0`, fmt.Sprintf("X-RateLimit-Reset: %d", now.Unix())},
			want:   ratefields.Info{Policies: policies(pol("", 60, 0, "", "")), Limits: limits(lim("", 0, 0, ""))}},
		{name: "a Unix time past",
			header:   []string{`X-RateLimit-Limit: 60`, `X-RateLimit-Remaining: 0`, fmt.Sprintf("X-RateLimit-Reset: %d", now.Unix()-1)},
			want:     ratefields.Info{Policies: policies(pol("", 60, 0, "", "")), Limits: limits(lim("", 0, 0, ""))},
			problems: []ratefields.Problem{problem("X-Ratelimit-Reset", inPast)}},
		{name: "a year of seconds is still seconds",
			header: []string{`X-RateLimit-Limit: 60`, `X-RateLimit-Remaining: 0`, `X-RateLimit-Reset: 31536000`},
			want:   ratefields.Info{Policies: policies(pol("", 60, 0, "", "")), Limits: limits(lim("", 0, 365*24*time.Hour, ""))}},
		{name: "Discord: Reset-After, with a fraction, before Reset",
			header: []string{`X-RateLimit-Limit: 5`, `X-RateLimit-Remaining: 0`, `X-RateLimit-Reset: 1470173023.123`, `X-RateLimit-Reset-After: 1.5`},
			want:   ratefields.Info{Policies: policies(pol("", 5, 0, "", "")), Limits: limits(lim("", 0, 1500*time.Millisecond, ""))}},
		{name: "a malformed Reset-After leaves Reset",
			header:   []string{`X-RateLimit-Limit: 5`, `X-RateLimit-Remaining: 0`, `X-RateLimit-Reset: 7.25`, `X-RateLimit-Reset-After: 1.`},
			want:     ratefields.Info{Policies: policies(pol("", 5, 0, "", "")), Limits: limits(lim("", 0, 7250*time.Millisecond, ""))},
			problems: []ratefields.Problem{problem("X-Ratelimit-Reset-After", malformed)}},
		{name: "remaining with no limit: a limit of no known quota",
			header: []string{`X-RateLimit-Remaining: 3`, `X-RateLimit-Reset: 10`},
			want:   ratefields.Info{Limits: limits(lim("", 3, 10*time.Second, ""))}},
		{name: "a limit alone",
			header: []string{`X-RateLimit-Limit: 3`, `X-RateLimit-Reset: 10`},
			want:   ratefields.Info{Policies: policies(pol("", 3, 0, "", ""))}},
		{name: "the largest count",
			header: []string{`X-RateLimit-Limit: 9007199254740991`, `X-RateLimit-Remaining: 0009007199254740991`},
			want:   ratefields.Info{Policies: policies(pol("", ratefields.MaxInt, 0, "", "")), Limits: limits(lim("", ratefields.MaxInt, 0, ""))}},
		{name: "counts too large, negative, malformed",
			header:   []string{`X-RateLimit-Limit: 9007199254740992`, `X-RateLimit-Remaining: -1`, `X-RateLimit-Reset: 1e3`},
			problems: []ratefields.Problem{problem("X-Ratelimit-Limit", tooLarge), problem("X-Ratelimit-Remaining", negative)}},
		{name: "not decimal digits",
			header:   []string{`X-RateLimit-Limit: +5`, `X-RateLimit-Remaining: 5 5`},
			problems: []ratefields.Problem{problem("X-Ratelimit-Limit", malformed), problem("X-Ratelimit-Remaining", malformed)}},
		{name: "resets negative and malformed",
			header:   []string{`X-RateLimit-Remaining: 1`, `X-RateLimit-Reset: -5`, `X-RateLimit-Reset-After: 1.1234567891`},
			want:     ratefields.Info{Limits: limits(lim("", 1, 0, ""))},
			problems: []ratefields.Problem{problem("X-Ratelimit-Reset", negative), problem("X-Ratelimit-Reset-After", malformed)}},
		{name: "more remaining than the limit",
			header:   []string{`X-RateLimit-Limit: 10`, `X-RateLimit-Remaining: 11`},
			want:     ratefields.Info{Policies: policies(pol("", 10, 0, "", ""))},
			problems: []ratefields.Problem{problem("X-Ratelimit-Remaining", contradicts)}},
		{name: "more used than the limit leaves room for",
			header:   []string{`X-RateLimit-Limit: 10`, `X-RateLimit-Remaining: 5`, `X-RateLimit-Used: 6`},
			want:     ratefields.Info{Policies: policies(pol("", 10, 0, "", "")), Limits: limits(lim("", 5, 0, ""))},
			problems: []ratefields.Problem{problem("X-Ratelimit-Used", contradicts)}},
		{name: "a resource that is no token",
			header:   []string{`X-RateLimit-Limit: 10`, `X-RateLimit-Remaining: 5`, `X-RateLimit-Resource: a b`},
			want:     ratefields.Info{Policies: policies(pol("", 10, 0, "", "")), Limits: limits(lim("", 5, 0, ""))},
			problems: []ratefields.Problem{problem("X-Ratelimit-Resource", malformed)}},
		{name: "a resource too long",
			header:   []string{`X-RateLimit-Limit: 10`, "X-RateLimit-Resource: " + strings.Repeat("r", ratefields.MaxName+1)},
			want:     ratefields.Info{Policies: policies(pol("", 10, 0, "", ""))},
			problems: []ratefields.Problem{problem("X-Ratelimit-Resource", tooLarge)}},
		{name: "lines that differ are ignored, lines that repeat are one",
			header: []string{`X-RateLimit-Limit: 10`, `X-RateLimit-Limit: 10`, `X-RateLimit-Remaining: 5`, `X-RateLimit-Remaining: 0`,
				`X-RateLimit-Reset: 5`, `X-RateLimit-Reset: 6`},
			want:     ratefields.Info{Policies: policies(pol("", 10, 0, "", ""))},
			problems: []ratefields.Problem{problem("X-Ratelimit-Remaining", duplicate)}},
		{name: "a field too large",
			header:   []string{"X-RateLimit-Limit: " + strings.Repeat("1", ratefields.MaxField+1)},
			problems: []ratefields.Problem{problem("X-Ratelimit-Limit", tooLarge)}},
	})
}

// TestRetryAfter reads Retry-After, and Limited with it.
func TestRetryAfter(t *testing.T) {
	date := func(d time.Duration) string { return "Retry-After: " + now.Add(d).UTC().Format(http.TimeFormat) }
	runAll(t, []parseCase{
		{name: "seconds", header: []string{`Retry-After: 120`}, status: 429,
			want: ratefields.Info{RetryAfter: 2 * time.Minute, Limited: true}},
		{name: "zero", header: []string{`Retry-After: 0`}, status: 429,
			want: ratefields.Info{Limited: true}},
		{name: "a year is capped", header: []string{`Retry-After: 31536000`}, status: 429,
			want: ratefields.Info{RetryAfter: maxDelay, Limited: true}, problems: []ratefields.Problem{problem("Retry-After", capped)}},
		{name: "more digits than any integer, capped", header: []string{"Retry-After: " + strings.Repeat("9", 40)}, status: 429,
			want: ratefields.Info{RetryAfter: maxDelay, Limited: true}, problems: []ratefields.Problem{problem("Retry-After", capped)}},
		{name: "the cap exactly", header: []string{`Retry-After: 600`}, status: 429,
			want: ratefields.Info{RetryAfter: maxDelay, Limited: true}},
		{name: "a date: whole seconds", header: []string{date(90 * time.Second)}, status: 503,
			want: ratefields.Info{RetryAfter: 90*time.Second - 250*time.Millisecond, Limited: true}},
		{name: "a date of RFC 850 and of asctime", header: []string{"Retry-After: Wednesday, 25-Nov-26 14:36:37 GMT"}, status: 503,
			want: ratefields.Info{RetryAfter: 59*time.Second + 750*time.Millisecond, Limited: true}},
		{name: "asctime", header: []string{"Retry-After: Wed Nov 25 14:36:37 2026"}, status: 503,
			want: ratefields.Info{RetryAfter: 59*time.Second + 750*time.Millisecond, Limited: true}},
		{name: "a date beyond the cap", header: []string{date(24 * time.Hour)}, status: 429,
			want: ratefields.Info{RetryAfter: maxDelay, Limited: true}, problems: []ratefields.Problem{problem("Retry-After", capped)}},
		{name: "a date in the current second is now", header: []string{date(0)}, status: 503,
			want: ratefields.Info{Limited: true}},
		{name: "a date past", header: []string{date(-time.Second)}, status: 503,
			want: ratefields.Info{Limited: true}, problems: []ratefields.Problem{problem("Retry-After", inPast)}},
		{name: "negative", header: []string{`Retry-After: -1`}, status: 503,
			problems: []ratefields.Problem{problem("Retry-After", negative)}},
		{name: "malformed", header: []string{`Retry-After: 1.5`}, status: 503,
			problems: []ratefields.Problem{problem("Retry-After", malformed)}},
		{name: "a date in another format", header: []string{"Retry-After: 2026-11-25T14:36:37Z"}, status: 429,
			want: ratefields.Info{Limited: true}, problems: []ratefields.Problem{problem("Retry-After", malformed)}},
		{name: "lines that differ", header: []string{`Retry-After: 1`, `Retry-After: 2`}, status: 429,
			want: ratefields.Info{Limited: true}, problems: []ratefields.Problem{problem("Retry-After", duplicate)}},
		{name: "lines that repeat", header: []string{`Retry-After: 2`, `Retry-After:  2`}, status: 429,
			want: ratefields.Info{RetryAfter: 2 * time.Second, Limited: true}},
		{name: "on a 200, read but no limit", header: []string{`Retry-After: 2`},
			want: ratefields.Info{RetryAfter: 2 * time.Second}},
		{name: "a 429 alone is a limit", status: 429, want: ratefields.Info{Limited: true}},
		{name: "a 503 alone is not", status: 503},
		{name: "a negative cap caps at zero", header: []string{`Retry-After: 2`}, status: 429, maxDelay: -time.Second,
			want: ratefields.Info{Limited: true}, problems: []ratefields.Problem{problem("Retry-After", capped)}},
	})
}

// TestProblemDetails reads the problem details of a 429 or 503.
func TestProblemDetails(t *testing.T) {
	problemJSON := "Content-Type: application/problem+json"
	quota := `{"type":"https://iana.org/assignments/http-problem-types#quota-exceeded","title":"Quota exceeded","status":429,"detail":"rate limit exceeded; retry in 29 s","violated-policies":["home"]}` + "\n"
	names := func(n int) []string {
		s := make([]string, n)
		for i := range s {
			s[i] = fmt.Sprintf("p%d", i)
		}
		return s
	}
	quoted := func(ss []string) string { return `"` + strings.Join(ss, `","`) + `"` }
	runAll(t, []parseCase{
		{name: "this module's 429", status: 429, header: []string{problemJSON, "Retry-After: 29"}, body: quota,
			want: ratefields.Info{RetryAfter: 29 * time.Second, Limited: true, Violated: []string{"home"}}},
		{name: "a 503 of reduced capacity, no policy", status: 503, header: []string{"Content-Type: application/problem+json; charset=utf-8"},
			body: `{"type":"https://iana.org/assignments/http-problem-types#temporary-reduced-capacity","violated-policies":[]}`,
			want: ratefields.Info{Limited: true}},
		{name: "abnormal usage, members in any order, nested ones skipped", status: 429, header: []string{"content-type: Application/Problem+JSON"},
			body: `{"x":{"type":"no","violated-policies":[1]},"violated-policies":["a","b"],"y":[[{}],null],"type":"https://iana.org/assignments/http-problem-types#abnormal-usage-detected"}`,
			want: ratefields.Info{Limited: true, Violated: []string{"a", "b"}}},
		{name: "numbers beyond a float64 in other members", status: 429, header: []string{problemJSON},
			body: `{"status":1e400,"x":[-1e999],"type":"https://iana.org/assignments/http-problem-types#quota-exceeded","violated-policies":["a"]}`,
			want: ratefields.Info{Limited: true, Violated: []string{"a"}}},
		{name: "another type: its members are not the draft's", status: 429, header: []string{problemJSON},
			body: `{"type":"about:blank","violated-policies":["a"]}`, want: ratefields.Info{Limited: true}},
		{name: "no type", status: 503, header: []string{problemJSON},
			body: `{"violated-policies":["a"]}`},
		{name: "not problem details", status: 429, header: []string{"Content-Type: text/plain"}, body: quota,
			want: ratefields.Info{Limited: true}},
		{name: "not a 429 or 503", status: 200, header: []string{problemJSON}, body: quota},
		{name: "two Content-Types", status: 429, header: []string{problemJSON, problemJSON}, body: quota,
			want: ratefields.Info{Limited: true}},
		{name: "malformed JSON", status: 429, header: []string{problemJSON}, body: `{"type":`,
			want: ratefields.Info{Limited: true}, problems: []ratefields.Problem{problem("body", malformed)}},
		{name: "trailing data", status: 429, header: []string{problemJSON}, body: quota + `{}`,
			want: ratefields.Info{Limited: true}, problems: []ratefields.Problem{problem("body", malformed)}},
		{name: "not an object", status: 429, header: []string{problemJSON}, body: `["type"]`,
			want: ratefields.Info{Limited: true}, problems: []ratefields.Problem{problem("body", malformed)}},
		{name: "a type that is no string", status: 503, header: []string{problemJSON}, body: `{"type":["https://iana.org/assignments/http-problem-types#quota-exceeded"]}`,
			problems: []ratefields.Problem{problem("body", malformed)}},
		{name: "violated policies that are no strings", status: 429, header: []string{problemJSON},
			body: `{"type":"https://iana.org/assignments/http-problem-types#quota-exceeded","violated-policies":["a",1]}`,
			want: ratefields.Info{Limited: true}, problems: []ratefields.Problem{problem("body", malformed)}},
		{name: "violated policies that are no array", status: 429, header: []string{problemJSON},
			body: `{"type":"https://iana.org/assignments/http-problem-types#quota-exceeded","violated-policies":"a"}`,
			want: ratefields.Info{Limited: true}, problems: []ratefields.Problem{problem("body", malformed)}},
		{name: "a member twice", status: 503, header: []string{problemJSON},
			body:     `{"type":"https://iana.org/assignments/http-problem-types#quota-exceeded","type":"about:blank"}`,
			problems: []ratefields.Problem{problem("body", duplicate)}},
		{name: "violated policies twice", status: 429, header: []string{problemJSON},
			body: `{"type":"https://iana.org/assignments/http-problem-types#quota-exceeded","violated-policies":[],"violated-policies":["a"]}`,
			want: ratefields.Info{Limited: true}, problems: []ratefields.Problem{problem("body", duplicate)}},
		{name: "too many and too long names", status: 429, header: []string{problemJSON},
			body: `{"type":"https://iana.org/assignments/http-problem-types#quota-exceeded","violated-policies":[` +
				quoted(append([]string{strings.Repeat("x", ratefields.MaxName+1)}, names(ratefields.MaxItems+1)...)) + `]}`,
			want:     ratefields.Info{Limited: true, Violated: names(ratefields.MaxItems)},
			problems: []ratefields.Problem{problem("body", tooLarge), problem("body", tooMany)}},
		{name: "a body too large", status: 429, header: []string{problemJSON},
			body: quota + strings.Repeat(" ", ratefields.MaxBody),
			want: ratefields.Info{Limited: true}, problems: []ratefields.Problem{problem("body", tooLarge)}},
		{name: "a body of MaxBody bytes", status: 429, header: []string{problemJSON},
			body: quota + strings.Repeat(" ", ratefields.MaxBody-len(quota)),
			want: ratefields.Info{Limited: true, Violated: []string{"home"}}},
		{name: "nested deep", status: 429, header: []string{problemJSON},
			body: `{"x":` + strings.Repeat("[", 20000) + strings.Repeat("]", 20000) + `}`,
			want: ratefields.Info{Limited: true}, problems: []ratefields.Problem{problem("body", malformed)}},
	})
}

// TestPrecedence: the most precise form that says anything wins, and the
// others are not read.
func TestPrecedence(t *testing.T) {
	x := []string{`X-RateLimit-Limit: 2`, `X-RateLimit-Remaining: 1`, `X-RateLimit-Reset: 29`}
	runAll(t, []parseCase{
		{name: "draft 11 over X-RateLimit-*, which are not read",
			header: append([]string{`RateLimit-Policy: "home";q=2;w=30`, `RateLimit: "home";r=1;t=29`, `X-RateLimit-Limit: x`}, x...),
			want:   ratefields.Info{Policies: policies(pol("home", 2, 30*time.Second, "", "")), Limits: limits(lim("home", 1, 29*time.Second, ""))}},
		{name: "a draft 11 field that says nothing leaves X-RateLimit-*",
			header:   append([]string{`RateLimit: "home";r=-1`}, x...),
			want:     ratefields.Info{Policies: policies(pol("", 2, 0, "", "")), Limits: limits(lim("", 1, 29*time.Second, ""))},
			problems: []ratefields.Problem{problem("Ratelimit", negative)}},
		{name: "draft 7 over draft 6",
			header: []string{`RateLimit: limit=100, remaining=1, reset=1`, `RateLimit-Limit: 5`, `RateLimit-Remaining: 5`},
			want:   ratefields.Info{Policies: policies(pol("", 100, 0, "", "")), Limits: limits(lim("", 1, time.Second, ""))}},
		{name: "draft 6 over X-RateLimit-*",
			header: append([]string{`RateLimit-Limit: 5`, `RateLimit-Remaining: 5`}, x...),
			want:   ratefields.Info{Policies: policies(pol("", 5, 0, "", "")), Limits: limits(lim("", 5, 0, ""))}},
		{name: "named policies over a draft 7 limit",
			header: []string{`RateLimit-Policy: "a";q=5`, `RateLimit: limit=100, remaining=1, reset=1`},
			want:   ratefields.Info{Policies: policies(pol("a", 5, 0, "", ""))}},
		{name: "nothing at all", header: []string{"Content-Type: text/plain"}},
	})
}
