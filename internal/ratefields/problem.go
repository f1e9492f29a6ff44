package ratefields

import (
	"bytes"
	"encoding/json"
	"strings"

	"github.com/ratelimit-go/ratelimit/internal/wire"
)

// problemDetails reads body, when application/problem+json, and
// reports whether its type is the draft's; then p.info.Violated is its
// "violated-policies". Those two members must be of the right type and
// given once; other members are not read.
func (p *parser) problemDetails(body []byte) bool {
	if len(body) == 0 || !isProblemJSON(p.h[fieldContentType]) {
		return false
	}
	if len(body) > MaxBody {
		p.report(fieldBody, ReasonTooLarge)
		return false
	}
	if !json.Valid(body) {
		p.report(fieldBody, ReasonMalformed)
		return false
	}
	m, reason := problemMembers(body)
	if reason != "" {
		p.report(fieldBody, reason)
		return false
	}
	switch m.typ {
	case wire.ProblemQuotaExceeded, wire.ProblemReducedCapacity, wire.ProblemAbnormalUsage:
	default:
		return false
	}
	if m.tooLong {
		p.report(fieldBody, ReasonTooLarge)
	}
	if m.tooMany {
		p.report(fieldBody, ReasonTooMany)
	}
	p.info.Violated = m.violated
	return true
}

// isProblemJSON reports whether Content-Type is one line naming
// application/problem+json, whatever its parameters.
func isProblemJSON(lines []string) bool {
	if len(lines) != 1 {
		return false
	}
	typ, _, _ := strings.Cut(lines[0], ";")
	return strings.EqualFold(trimOWS(typ), "application/problem+json")
}

// members are what problemMembers reads of a problem details document.
type members struct {
	typ      string
	violated []string // nil when none
	tooLong  bool     // a violated policy's name was left out: longer than MaxName
	tooMany  bool     // violated policies past MaxItems were left out
}

// problemMembers reads "type" and "violated-policies" of valid JSON.
func problemMembers(body []byte) (members, Reason) {
	var m members
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber() // a number no float64 holds is still JSON
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return members{}, ReasonMalformed
	}
	var haveType, haveViolated bool
	for dec.More() {
		tok, err := dec.Token()
		ok := err == nil
		switch {
		case !ok:
		case tok == "type" && haveType, tok == "violated-policies" && haveViolated:
			return members{}, ReasonDuplicate
		case tok == "type":
			haveType = true
			tok, err := dec.Token()
			m.typ, ok = tok.(string)
			ok = ok && err == nil
		case tok == "violated-policies":
			haveViolated, ok = true, m.names(dec)
		default:
			ok = dec.Decode(new(json.RawMessage)) == nil
		}
		if !ok {
			return members{}, ReasonMalformed
		}
	}
	return m, ""
}

// names reads an array of strings into m.violated, the first MaxItems
// of at most MaxName bytes, and reports whether dec held one.
func (m *members) names(dec *json.Decoder) bool {
	if tok, err := dec.Token(); err != nil || tok != json.Delim('[') {
		return false
	}
	for dec.More() {
		tok, err := dec.Token()
		s, ok := tok.(string)
		switch {
		case err != nil || !ok:
			return false
		case len(s) > MaxName:
			m.tooLong = true
		case len(m.violated) == MaxItems:
			m.tooMany = true
		default:
			m.violated = append(m.violated, s)
		}
	}
	_, err := dec.Token() // the closing ']'
	return err == nil
}
