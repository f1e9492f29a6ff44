package ratelimit

import "errors"

// ErrInvalid is wrapped by every error about input that can never work: a
// bad [Limit] or option, a request without a key (see [KeyFunc]), an empty
// store key, a cost below 1 or above a limit's capacity. Such errors are
// returned before any store is contacted; retrying will not help. Test
// with errors.Is(err, ratelimit.ErrInvalid).
var ErrInvalid = errors.New("ratelimit: invalid input")
