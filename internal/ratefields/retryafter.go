package ratefields

import (
	"net/http"
	"time"

	"github.com/ratelimit-go/ratelimit/internal/wire"
)

// retryAfter reads Retry-After (RFC 9110, section 10.2.3), at most the
// cap; read is false when it is absent or ignored, not for a past date.
func (p *parser) retryAfter() (d time.Duration, read bool) {
	v, ok := p.single(wire.FieldRetryAfter)
	if !ok {
		return 0, false
	}
	if isDigits(v) {
		return p.delay(wire.FieldRetryAfter, digits(v), 0, false), true
	}
	if len(v) > 1 && v[0] == '-' && isDigits(v[1:]) {
		p.report(wire.FieldRetryAfter, ReasonNegative)
		return 0, false
	}
	at, err := http.ParseTime(v)
	if err != nil {
		p.report(wire.FieldRetryAfter, ReasonMalformed)
		return 0, false
	}
	return p.until(wire.FieldRetryAfter, at, false), true
}
