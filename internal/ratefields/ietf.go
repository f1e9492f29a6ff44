package ratefields

import (
	"time"

	"github.com/dunglas/httpsfv"
)

// The fields of draft-ietf-httpapi-ratelimit-headers: RateLimit-Policy
// and RateLimit as drafts 8 to 11 define them (named items), and as
// drafts 6 and 7 did (Integers, a Dictionary), with draft 6's
// RateLimit-Limit, RateLimit-Remaining and RateLimit-Reset.

// The quota units of the draft's registry.
const (
	unitRequests   = "requests"
	unitBytes      = "content-bytes"
	unitConcurrent = "concurrent-requests"
)

// ietf reads the draft's fields into p.info, drafts 8 to 11 before 6 and
// 7, and reports whether they said anything.
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

// policyField reads RateLimit-Policy: named policies (drafts 8 to 11) or
// unnamed ones (drafts 6 and 7), as its first item is; an item of the
// other kind is malformed.
func (p *parser) policyField() (named, unnamed []Policy) {
	lines := p.lines(fieldPolicy)
	if len(lines) == 0 {
		return nil, nil
	}
	list, err := httpsfv.UnmarshalList(lines)
	if err != nil || len(list) == 0 {
		p.report(fieldPolicy, ReasonMalformed)
		return nil, nil
	}
	const unknown, byName, byQuota = 0, 1, 2
	kind := unknown
	for _, m := range list {
		it, ok := m.(httpsfv.Item)
		if !ok {
			p.report(fieldPolicy, ReasonMalformed)
			continue
		}
		if name, ok := itemName(it); ok && kind != byQuota {
			kind = byName
			pol, reason := namedPolicy(name, it.Params)
			if reason != "" {
				p.report(fieldPolicy, reason)
				continue
			}
			named = p.addPolicy(named, pol, false)
		} else if q, ok := it.Value.(int64); ok && kind != byName {
			kind = byQuota
			pol, reason := quotaPolicy(q, it.Params)
			if reason != "" {
				p.report(fieldPolicy, reason)
				continue
			}
			unnamed = p.addPolicy(unnamed, pol, true)
		} else {
			p.report(fieldPolicy, ReasonMalformed)
		}
	}
	return named, unnamed
}

// namedPolicy reads a policy item of drafts 8 to 11: q, required; w, qu
// and pk. Other parameters are comments.
func namedPolicy(name string, params *httpsfv.Params) (Policy, Reason) {
	if len(name) > MaxName {
		return Policy{}, ReasonTooLarge
	}
	q, ok, reason := intParam(params, "q")
	if reason != "" {
		return Policy{}, reason
	}
	if !ok {
		return Policy{}, ReasonMalformed
	}
	pol := Policy{Name: name, Quota: q, Unit: unitRequests}
	if pol.Window, reason = window(params, false); reason != "" {
		return Policy{}, reason
	}
	if v, ok := params.Get("qu"); ok {
		if pol.Unit = unit(v); pol.Unit == "" {
			return Policy{}, ReasonMalformed
		}
	}
	if pol.Partition, reason = partition(params); reason != "" {
		return Policy{}, reason
	}
	return pol, ""
}

// quotaPolicy reads a policy item of drafts 6 and 7: the quota q, with w
// required. Other parameters are comments.
func quotaPolicy(q int64, params *httpsfv.Params) (Policy, Reason) {
	if reason := count(q); reason != "" {
		return Policy{}, reason
	}
	w, reason := window(params, true)
	if reason != "" {
		return Policy{}, reason
	}
	return Policy{Quota: q, Window: w, Unit: unitRequests}, ""
}

// window reads the parameter w: whole seconds, from 1 to MaxWindow.
func window(params *httpsfv.Params, required bool) (time.Duration, Reason) {
	w, ok, reason := intParam(params, "w")
	switch {
	case reason != "":
		return 0, reason
	case !ok && required, ok && w == 0:
		return 0, ReasonMalformed
	case w > int64(MaxWindow/time.Second):
		return 0, ReasonTooLarge
	}
	return time.Duration(w) * time.Second, ""
}

// unit returns the quota unit qu names, or "" when it names none of the
// draft's registry. The registry spells the first "request", the text
// "requests": both are read as "requests".
func unit(v any) string {
	s, ok := v.(string)
	if t, isToken := v.(httpsfv.Token); isToken {
		s, ok = string(t), true
	}
	if !ok {
		return ""
	}
	switch s {
	case "requests", "request":
		return unitRequests
	case unitBytes, unitConcurrent:
		return s
	}
	return ""
}

// addPolicy adds pol to ps, unless ps has one by the same key: name and
// partition or, byQuota, the quota (drafts 6 and 7 name none, and forbid
// two policies of one quota). Of two that differ, the tighter is kept:
// the smaller quota, or the same over the longer window.
func (p *parser) addPolicy(ps []Policy, pol Policy, byQuota bool) []Policy {
	for i, q := range ps {
		if byQuota && q.Quota != pol.Quota || !byQuota && (q.Name != pol.Name || q.Partition != pol.Partition) {
			continue
		}
		if q != pol {
			p.report(fieldPolicy, ReasonDuplicate)
			if pol.Quota < q.Quota || pol.Quota == q.Quota && pol.Window > q.Window {
				ps[i] = pol
			}
		}
		return ps
	}
	if len(ps) == MaxItems {
		p.report(fieldPolicy, ReasonTooMany)
		return ps
	}
	return append(ps, pol)
}

// rateLimitField reads RateLimit: the limits of drafts 8 to 11, a List of
// named items, or else draft 7's Dictionary, returned unread.
func (p *parser) rateLimitField() ([]Limit, *httpsfv.Dictionary) {
	lines := p.lines(fieldRateLimit)
	if len(lines) == 0 {
		return nil, nil
	}
	list, err := httpsfv.UnmarshalList(lines)
	if err != nil {
		d, err := httpsfv.UnmarshalDictionary(lines)
		if err != nil || len(d.Names()) == 0 {
			p.report(fieldRateLimit, ReasonMalformed)
			return nil, nil
		}
		return nil, d
	}
	if len(list) == 0 {
		p.report(fieldRateLimit, ReasonMalformed)
		return nil, nil
	}
	var limits []Limit
	for _, m := range list {
		it, ok := m.(httpsfv.Item)
		if !ok {
			p.report(fieldRateLimit, ReasonMalformed)
			continue
		}
		name, ok := itemName(it)
		if !ok {
			p.report(fieldRateLimit, ReasonMalformed)
			continue
		}
		l, reason := p.namedLimit(name, it.Params)
		if reason != "" {
			p.report(fieldRateLimit, reason)
			continue
		}
		limits = p.addLimit(limits, l)
	}
	return limits, nil
}

// namedLimit reads a limit item of drafts 8 to 11: r, required; t and pk.
// Other parameters are comments.
func (p *parser) namedLimit(name string, params *httpsfv.Params) (Limit, Reason) {
	if len(name) > MaxName {
		return Limit{}, ReasonTooLarge
	}
	r, ok, reason := intParam(params, "r")
	if reason != "" {
		return Limit{}, reason
	}
	if !ok {
		return Limit{}, ReasonMalformed
	}
	t, _, reason := intParam(params, "t")
	if reason != "" {
		return Limit{}, reason
	}
	pk, reason := partition(params)
	if reason != "" {
		return Limit{}, reason
	}
	return Limit{Name: name, Remaining: r, Reset: p.delay(fieldRateLimit, t, 0), Partition: pk}, ""
}

// addLimit adds l to ls, unless ls has one of the same name and
// partition. Of two that differ, the tighter is kept: the fewer units
// remaining, or the same for longer.
func (p *parser) addLimit(ls []Limit, l Limit) []Limit {
	for i, k := range ls {
		if k.Name != l.Name || k.Partition != l.Partition {
			continue
		}
		if k != l {
			p.report(fieldRateLimit, ReasonDuplicate)
			if l.Remaining < k.Remaining || l.Remaining == k.Remaining && l.Reset > k.Reset {
				ls[i] = l
			}
		}
		return ls
	}
	if len(ls) == MaxItems {
		p.report(fieldRateLimit, ReasonTooMany)
		return ls
	}
	return append(ls, l)
}

// withinQuota returns the limits that do not have more units remaining
// than a policy they count against allows, reporting the others.
func (p *parser) withinQuota(policies []Policy, limits []Limit) []Limit {
	kept := limits[:0]
	for _, l := range limits {
		ok := true
		for _, pol := range policies {
			if pol.Name == l.Name && (pol.Partition == "" || pol.Partition == l.Partition) && l.Remaining > pol.Quota {
				ok = false
			}
		}
		if !ok {
			p.report(fieldRateLimit, ReasonContradicts)
			continue
		}
		kept = append(kept, l)
	}
	if len(kept) == 0 {
		return nil
	}
	return kept
}

// draftLimit is the one limit of drafts 6 and 7: the quota it counts
// against, what remains, and when more comes back.
type draftLimit struct {
	limit, remaining int64
	hasLimit         bool
	hasRemaining     bool
	reset            time.Duration
	field            string // where remaining was read, for reports
}

// dictionary reads draft 7's RateLimit Dictionary d: limit and reset,
// required, and remaining; ok is false when d is nil or, reported, not
// what draft 7 defines. Other keys and all parameters are ignored.
func (p *parser) dictionary(d *httpsfv.Dictionary) (l draftLimit, ok bool) {
	if d == nil {
		return draftLimit{}, false
	}
	member := func(key string) (int64, bool, Reason) {
		m, ok := d.Get(key)
		if !ok {
			return 0, false, ""
		}
		it, ok := m.(httpsfv.Item)
		if !ok {
			return 0, false, ReasonMalformed
		}
		n, ok := it.Value.(int64)
		if !ok {
			return 0, false, ReasonMalformed
		}
		return n, true, count(n)
	}
	l.field = fieldRateLimit
	var hasReset bool
	var reset int64
	var reason Reason
	if l.limit, l.hasLimit, reason = member("limit"); reason == "" {
		if l.remaining, l.hasRemaining, reason = member("remaining"); reason == "" {
			reset, hasReset, reason = member("reset")
		}
	}
	if reason == "" && (!l.hasLimit || !hasReset) {
		reason = ReasonMalformed
	}
	if reason != "" {
		p.report(fieldRateLimit, reason)
		return draftLimit{}, false
	}
	l.reset = p.delay(fieldRateLimit, reset, 0)
	return l, true
}

// separateFields reads draft 6's RateLimit-Limit, RateLimit-Remaining
// and RateLimit-Reset, each an Integer; its parameters are ignored.
func (p *parser) separateFields() draftLimit {
	l := draftLimit{field: fieldRemaining}
	l.limit, l.hasLimit = p.integerField(fieldLimit)
	l.remaining, l.hasRemaining = p.integerField(fieldRemaining)
	if l.hasRemaining {
		if reset, ok := p.integerField(fieldReset); ok {
			l.reset = p.delay(fieldReset, reset, 0)
		}
	}
	return l
}

// integerField reads a single-valued field whose value is an RFC 9651
// Integer, not negative; ok is false when it is absent or, reported,
// anything else.
func (p *parser) integerField(field string) (n int64, ok bool) {
	v, ok := p.single(field)
	if !ok {
		return 0, false
	}
	it, err := httpsfv.UnmarshalItem([]string{v})
	if err != nil {
		p.report(field, ReasonMalformed)
		return 0, false
	}
	n, ok = it.Value.(int64)
	if !ok {
		p.report(field, ReasonMalformed)
		return 0, false
	}
	if reason := count(n); reason != "" {
		p.report(field, reason)
		return 0, false
	}
	return n, true
}

// unnamed sets p.info from the limit l of drafts 6 and 7 and the unnamed
// policies of RateLimit-Policy, the policy of l's limit first; it reports
// whether they said anything. A remaining count with no limit beside it
// would count against no known quota, and is ignored.
func (p *parser) unnamed(l draftLimit, policies []Policy) bool {
	if !l.hasLimit {
		if l.hasRemaining {
			p.report(l.field, ReasonMalformed)
		}
		p.info.Policies = policies
		return len(policies) > 0
	}
	lead := Policy{Quota: l.limit, Unit: unitRequests}
	all := make([]Policy, 1, 1+len(policies))
	for i, pol := range policies {
		if pol.Quota == l.limit {
			lead.Window = pol.Window
			policies = append(policies[:i:i], policies[i+1:]...)
			break
		}
	}
	if len(policies) == MaxItems {
		p.report(fieldPolicy, ReasonTooMany)
		policies = policies[:MaxItems-1]
	}
	all[0] = lead
	p.info.Policies = append(all, policies...)
	if l.hasRemaining {
		if l.remaining > l.limit {
			p.report(l.field, ReasonContradicts)
		} else {
			p.info.Limits = []Limit{{Remaining: l.remaining, Reset: l.reset}}
		}
	}
	return true
}

// itemName returns the name an item of drafts 8 to 11 gives: a String
// (draft 11) or a Token (drafts 8 to 10).
func itemName(it httpsfv.Item) (string, bool) {
	switch v := it.Value.(type) {
	case string:
		return v, true
	case httpsfv.Token:
		return string(v), true
	}
	return "", false
}

// intParam reads the parameter key, an Integer from 0 to MaxInt; ok is
// false when it is absent.
func intParam(params *httpsfv.Params, key string) (n int64, ok bool, reason Reason) {
	v, ok := params.Get(key)
	if !ok {
		return 0, false, ""
	}
	n, ok = v.(int64)
	if !ok {
		return 0, false, ReasonMalformed
	}
	if reason := count(n); reason != "" {
		return 0, false, reason
	}
	return n, true, ""
}

// partition reads the parameter pk, a Byte Sequence of at most
// MaxPartition bytes, "" when absent.
func partition(params *httpsfv.Params) (string, Reason) {
	v, ok := params.Get("pk")
	if !ok {
		return "", ""
	}
	b, ok := v.([]byte)
	switch {
	case !ok:
		return "", ReasonMalformed
	case len(b) > MaxPartition:
		return "", ReasonTooLarge
	}
	return string(b), ""
}
