package memory

import (
	"github.com/ratelimit-go/ratelimit"
	"github.com/ratelimit-go/ratelimit/internal/spec"
	"github.com/ratelimit-go/ratelimit/store/internal/limitset"
)

// banState is one key's ban state (see ratelimit.Ban), shared by every set
// of limits with a ban, kept step for step as decide.lua keeps its ban
// hash; the comments there explain the rules. Times are µs.
type banState struct {
	strikes int64 // denials counted since first
	first   int64 // when the first of them came
	ends    int64 // when the last ban ends; 0: none yet
	level   int64 // the last ban's level: 1 for the first of a series
	expires int64 // when the ban key would expire
}

// banned returns how long the key is still banned at now, or 0. Locked.
func (k *memoryKey) banned(now int64) int64 {
	if b := k.ban; b != nil && now < b.ends { // a ban ends before its state expires
		return b.ends - now
	}
	return 0
}

// strike counts a denial at now under b and returns the ban it starts,
// or 0. The key is locked.
func (k *memoryKey) strike(b *spec.Ban, now int64) (length int64) {
	s := k.ban
	if s == nil {
		s = new(banState)
		k.ban = s
	} else if now >= s.expires {
		*s = banState{} // expired, as the ban key would have
	}
	if s.strikes == 0 || now-s.first >= b.Within {
		s.strikes, s.first = 1, now
	} else {
		s.strikes++
	}
	if s.strikes >= b.After {
		if s.ends > 0 && now-s.ends < b.Max {
			s.level++
		} else {
			s.level = 1
		}
		length = b.Length(s.level)
		s.strikes, s.ends = 0, now+length
	}
	// Nothing matters once the strikes are Within old and the last ban
	// ended Max ago. Rounded up to the ms, as the script's PEXPIRE, so that
	// limits with other bans find the state as they would on Redis.
	expires := int64(0)
	if s.strikes > 0 {
		expires = s.first + b.Within
	}
	if s.ends > 0 {
		expires = max(expires, s.ends+b.Max)
	}
	s.expires = now + ceilDiv(expires-now, 1000)*1000
	return length
}

// bannedDecision answers a request of a key banned for left more: denied
// by every limit, nothing remaining, until the ban ends.
func bannedDecision(limits []ratelimit.Limit, left int64) ratelimit.Decision {
	var buf [limitset.MaxInline]ratelimit.Result
	rs := limitset.Results(limits, &buf)
	for i := range rs {
		rs[i].Window, rs[i].ResetAfter, rs[i].RetryAfter = us(left), us(left), us(left)
	}
	d := ratelimit.MakeDecision(rs...)
	d.Banned = us(left)
	return d
}

// startBan turns d, a denial whose strike started a ban of length, into
// the ban's first answer: every limit denies, nothing remains, and each
// time is at least the ban's.
func startBan(d ratelimit.Decision, length int64) ratelimit.Decision {
	banned := us(length)
	var buf [limitset.MaxInline]ratelimit.Result
	rs := append(buf[:0], d.Results()...)
	for i := range rs {
		r := &rs[i]
		r.Allowed, r.Remaining, r.Window = false, 0, banned // nothing passes until the ban ends
		r.ResetAfter, r.RetryAfter = max(r.ResetAfter, banned), max(r.RetryAfter, banned)
	}
	b := ratelimit.MakeDecision(rs...)
	b.Fallback, b.Banned = d.Fallback, banned
	return b
}

// BanExpires returns when key's ban state expires, in µs on the store's
// clock, or 0 when it holds none: for a test to step a pinned clock to it.
func (m *Store) BanExpires(key string) int64 {
	k := m.lookup(key)
	if k == nil {
		return 0
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.ban == nil {
		return 0
	}
	return k.ban.expires
}
