package ratefields

import (
	"cmp"
	"slices"
	"strings"
	"time"

	"github.com/ratelimit-go/ratelimit/internal/wire"
)

// The quota units of the draft's registry.
const (
	unitRequests   = "requests"
	unitBytes      = "content-bytes"
	unitConcurrent = "concurrent-requests"
)

// ietf reads the draft's fields into p.info, drafts 8 to 11 before 6
// and 7, and reports whether they said anything.
func (p *parser) ietf() bool {
	named, unnamed := p.policyField()
	limits, dict := p.rateLimitField()
	if len(named) > 0 || len(limits) > 0 {
		p.info.Policies = named
		p.info.Limits = p.withinQuota(named, limits)
		return true
	}
	l, ok := p.dictionary(dict)
	if !ok {
		l = p.separateFields()
	}
	return p.unnamed(l, unnamed)
}

// policyField reads RateLimit-Policy: named policies (drafts 8 to 11)
// or unnamed (6 and 7), as its first item is; the other is malformed.
func (p *parser) policyField() (named, unnamed []Policy) {
	lines := p.lines(wire.FieldPolicy)
	if len(lines) == 0 {
		return nil, nil
	}
	v := strings.Join(lines, ", ") // as RFC 9651 parses them (section 4.2)
	n, ok := listLen(v)
	if !ok || n == 0 {
		p.report(wire.FieldPolicy, ReasonMalformed)
		return nil, nil
	}
	const unknown, byName, byQuota = 0, 1, 2
	kind := unknown
	ps := make([]Policy, 0, min(n, MaxItems))
	list := newList(v)
	for m, ok := list.next(); ok; m, ok = list.next() {
		if isName(m) && kind != byQuota {
			kind = byName
			if k, pol, reason := namedPolicy(m); reason != "" {
				p.report(wire.FieldPolicy, reason)
			} else {
				ps = p.addPolicy(ps, k, pol)
			}
		} else if m.typ == sfInteger && kind != byName {
			kind = byQuota
			if pol, reason := quotaPolicy(m.n, m.params); reason != "" {
				p.report(wire.FieldPolicy, reason)
			} else {
				// Drafts 6 and 7 name no policy, and forbid two of one quota.
				i := slices.IndexFunc(ps, func(q Policy) bool { return q.Quota == pol.Quota })
				ps = add(p, wire.FieldPolicy, ps, i, pol, tighter)
			}
		} else {
			p.report(wire.FieldPolicy, ReasonMalformed)
		}
	}
	switch {
	case len(ps) == 0:
		return nil, nil
	case kind == byName:
		return ps, nil
	}
	return nil, ps
}

// An itemKey is a named item's name and pk as sent, compared in place
// and copied only when kept: an item not kept allocates nothing.
type itemKey struct{ name, pk string }

func (k itemKey) is(name, partition string) bool {
	return textEqual(k.name, name) && b64Equal(k.pk, partition)
}

// namedPolicy reads a policy item of drafts 8 to 11: q, required; w,
// qu and pk; other parameters are comments. Its name and pk are k's.
func namedPolicy(m sfItem) (itemKey, Policy, Reason) {
	q, _, qReason := intParam(m.params, "q", true)
	w, wReason := window(m.params, false)
	u, uReason := unit(m.params)
	pk, pkReason := partition(m.params)
	// The first reason, in the order the parameters are checked.
	if reason := cmp.Or(nameReason(m), qReason, wReason, uReason, pkReason); reason != "" {
		return itemKey{}, Policy{}, reason
	}
	return itemKey{name: m.text, pk: pk}, Policy{Quota: q, Window: w, Unit: u}, ""
}

// nameReason returns why m is not a name kept, or "".
func nameReason(m sfItem) Reason {
	switch {
	case !isName(m):
		return ReasonMalformed
	case textLen(m.text) > MaxName:
		return ReasonTooLarge
	}
	return ""
}

// quotaPolicy reads a policy item of drafts 6 and 7: the quota q, with w required.
func quotaPolicy(q int64, params string) (Policy, Reason) {
	w, wReason := window(params, true)
	if reason := cmp.Or(count(q), wReason); reason != "" {
		return Policy{}, reason
	}
	return Policy{Quota: q, Window: w, Unit: unitRequests}, ""
}

// window reads the parameter w: whole seconds, from 1 to MaxWindow.
func window(params string, required bool) (time.Duration, Reason) {
	w, ok, reason := intParam(params, "w", required)
	switch {
	case reason != "":
		return 0, reason
	case ok && w == 0:
		return 0, ReasonMalformed
	case w > int64(MaxWindow/time.Second):
		return 0, ReasonTooLarge
	}
	return time.Duration(w) * time.Second, ""
}

// unit returns the registered quota unit qu names, "requests" when
// absent: the registry spells "request", the text "requests".
func unit(params string) (string, Reason) {
	switch v, ok := param(params, "qu"); {
	case !ok:
		return unitRequests, ""
	case !isName(v):
		return "", ReasonMalformed
	case textEqual(v.text, "requests"), textEqual(v.text, "request"):
		return unitRequests, ""
	case textEqual(v.text, unitBytes):
		return unitBytes, ""
	case textEqual(v.text, unitConcurrent):
		return unitConcurrent, ""
	}
	return "", ReasonMalformed
}

// addPolicy adds the policy of key k to ps, unless ps has one of that
// key. Of two that differ, the tighter is kept.
func (p *parser) addPolicy(ps []Policy, k itemKey, pol Policy) []Policy {
	i := slices.IndexFunc(ps, func(q Policy) bool { return k.is(q.Name, q.Partition) })
	if i >= 0 {
		pol.Name, pol.Partition = ps[i].Name, ps[i].Partition
	} else if len(ps) < MaxItems {
		pol.Name, pol.Partition = textValue(k.name), b64Value(k.pk)
	}
	return add(p, wire.FieldPolicy, ps, i, pol, tighter)
}

// add appends v to vs, or with i not -1, keeps the tighter of v and
// vs[i], an item of the same key, reporting field when they differ.
func add[T comparable](p *parser, field string, vs []T, i int, v T, tighter func(a, b T) bool) []T {
	switch {
	case i >= 0:
		if vs[i] != v {
			p.report(field, ReasonDuplicate)
			if tighter(v, vs[i]) {
				vs[i] = v
			}
		}
	case len(vs) == MaxItems:
		p.report(field, ReasonTooMany)
	default:
		vs = append(vs, v)
	}
	return vs
}

// tighter reports whether a allows less than b: less, or as much for longer.
func tighter(a, b Policy) bool {
	return a.Quota < b.Quota || a.Quota == b.Quota && a.Window > b.Window
}

// rateLimitField reads RateLimit: the named limits of drafts 8 to 11,
// or else draft 7's Dictionary, returned unread ("" when none).
func (p *parser) rateLimitField() (limits []Limit, dict string) {
	lines := p.lines(wire.FieldRateLimit)
	if len(lines) == 0 {
		return nil, ""
	}
	v := strings.Join(lines, ", ")
	n, ok := listLen(v)
	if !ok || n == 0 {
		if n, ok := dictLen(v); ok && n > 0 {
			return nil, v
		}
		p.report(wire.FieldRateLimit, ReasonMalformed)
		return nil, ""
	}
	limits = make([]Limit, 0, min(n, MaxItems))
	list := newList(v)
	for m, ok := list.next(); ok; m, ok = list.next() {
		if k, l, reason := p.namedLimit(m); reason != "" {
			p.report(wire.FieldRateLimit, reason)
		} else {
			limits = p.addLimit(limits, k, l)
		}
	}
	return limits, "" // withinQuota makes none nil
}

// namedLimit reads a limit item of drafts 8 to 11: r, required; t and
// pk; other parameters are comments. Its name and pk are k's.
func (p *parser) namedLimit(m sfItem) (itemKey, Limit, Reason) {
	r, _, rReason := intParam(m.params, "r", true)
	t, _, tReason := intParam(m.params, "t", false)
	pk, pkReason := partition(m.params)
	if reason := cmp.Or(nameReason(m), rReason, tReason, pkReason); reason != "" {
		return itemKey{}, Limit{}, reason
	}
	return itemKey{name: m.text, pk: pk}, Limit{Remaining: r, Reset: p.delay(wire.FieldRateLimit, t, 0, true)}, ""
}

// addLimit is addPolicy for limits: the tighter has less left, or as much for longer.
func (p *parser) addLimit(ls []Limit, k itemKey, l Limit) []Limit {
	i := slices.IndexFunc(ls, func(q Limit) bool { return k.is(q.Name, q.Partition) })
	if i >= 0 {
		l.Name, l.Partition = ls[i].Name, ls[i].Partition
	} else if len(ls) < MaxItems {
		l.Name, l.Partition = textValue(k.name), b64Value(k.pk)
	}
	return add(p, wire.FieldRateLimit, ls, i, l, func(a, b Limit) bool {
		return a.Remaining < b.Remaining || a.Remaining == b.Remaining && a.Reset > b.Reset
	})
}

// withinQuota returns the limits with no more units remaining than
// their policies allow, reporting the others.
func (p *parser) withinQuota(policies []Policy, limits []Limit) []Limit {
	kept := slices.DeleteFunc(limits, func(l Limit) bool {
		over := slices.ContainsFunc(policies, func(pol Policy) bool {
			return pol.Name == l.Name && (pol.Partition == "" || pol.Partition == l.Partition) && l.Remaining > pol.Quota
		})
		if over {
			p.report(wire.FieldRateLimit, ReasonContradicts)
		}
		return over
	})
	if len(kept) == 0 {
		return nil
	}
	return kept
}

// draftLimit is the one limit of drafts 6 and 7.
type draftLimit struct {
	limit, remaining       int64
	hasLimit, hasRemaining bool
	reset                  time.Duration
	field                  string // where remaining was read, for reports
}

// dictionary reads draft 7's RateLimit Dictionary d: limit and reset,
// required, and remaining; ok is false when d is "" or, reported, not
// draft 7's. Other keys and all parameters are ignored.
func (p *parser) dictionary(d string) (l draftLimit, ok bool) {
	if d == "" {
		return draftLimit{}, false
	}
	member := func(key string) (int64, bool, Reason) {
		m, ok := dictGet(d, key)
		switch {
		case !ok:
			return 0, false, ""
		case m.typ != sfInteger:
			return 0, false, ReasonMalformed
		}
		return m.n, true, count(m.n)
	}
	l.field = wire.FieldRateLimit
	var limitReason, remainingReason Reason
	l.limit, l.hasLimit, limitReason = member("limit")
	l.remaining, l.hasRemaining, remainingReason = member("remaining")
	reset, hasReset, resetReason := member("reset")
	reason := cmp.Or(limitReason, remainingReason, resetReason)
	if reason == "" && (!l.hasLimit || !hasReset) {
		reason = ReasonMalformed
	}
	if reason != "" {
		p.report(wire.FieldRateLimit, reason)
		return draftLimit{}, false
	}
	l.reset = p.delay(wire.FieldRateLimit, reset, 0, true)
	return l, true
}

// separateFields reads draft 6's RateLimit-Limit, RateLimit-Remaining
// and RateLimit-Reset, each an Integer; its parameters are ignored.
func (p *parser) separateFields() draftLimit {
	l := draftLimit{field: fieldRemaining}
	l.limit, l.hasLimit = read(p, fieldLimit, parseInteger)
	l.remaining, l.hasRemaining = read(p, fieldRemaining, parseInteger)
	if l.hasRemaining {
		if reset, ok := read(p, fieldReset, parseInteger); ok {
			l.reset = p.delay(fieldReset, reset, 0, true)
		}
	}
	return l
}

// parseInteger reads a non-negative RFC 9651 Integer field.
func parseInteger(v string) (int64, Reason) {
	if it, ok := parseItem(v); ok && it.typ == sfInteger {
		return it.n, count(it.n)
	}
	return 0, ReasonMalformed
}

// unnamed sets p.info from l and the unnamed policies, l's first, and
// reports whether they said anything. A remaining count without a limit
// counts against no known quota: it is ignored.
func (p *parser) unnamed(l draftLimit, policies []Policy) bool {
	if !l.hasLimit {
		if l.hasRemaining {
			p.report(l.field, ReasonMalformed)
		}
		p.info.Policies = policies
		return len(policies) > 0
	}
	lead := Policy{Quota: l.limit, Unit: unitRequests}
	if i := slices.IndexFunc(policies, func(q Policy) bool { return q.Quota == l.limit }); i >= 0 {
		lead.Window = policies[i].Window
		policies = slices.Delete(policies, i, i+1)
	}
	if len(policies) == MaxItems {
		p.report(wire.FieldPolicy, ReasonTooMany)
		policies = policies[:MaxItems-1]
	}
	p.info.Policies = slices.Insert(policies, 0, lead)
	if l.hasRemaining {
		if l.remaining > l.limit {
			p.report(l.field, ReasonContradicts)
		} else {
			p.info.Limits = []Limit{{Remaining: l.remaining, Reset: l.reset}}
		}
	}
	return true
}

// isName reports whether m is a String (draft 11) or Token (8 to 10).
func isName(m sfItem) bool {
	return m.typ == sfString || m.typ == sfToken
}

// intParam reads the Integer parameter key, from 0 to MaxInt; ok is
// false when it is absent, malformed when required.
func intParam(params, key string, required bool) (n int64, ok bool, reason Reason) {
	switch v, ok := param(params, key); {
	case !ok && !required:
		return 0, false, ""
	case !ok || v.typ != sfInteger:
		return 0, false, ReasonMalformed
	case count(v.n) != "":
		return 0, false, count(v.n)
	default:
		return v.n, true, ""
	}
}

// partition returns the parameter pk, a Byte Sequence of at most
// MaxPartition bytes, as its base64; "" when absent.
func partition(params string) (string, Reason) {
	v, ok := param(params, "pk")
	switch {
	case !ok:
		return "", ""
	case v.typ != sfByteSequence:
		return "", ReasonMalformed
	case b64Len(v.text) > MaxPartition:
		return "", ReasonTooLarge
	}
	return v.text, ""
}
