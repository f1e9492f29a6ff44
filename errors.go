package ratelimit

import "errors"

// ErrInvalid is wrapped by every error about input that can never work: a
// bad [Limit] or option, an empty key, a cost below 1 or above a limit's
// capacity. Such errors are returned before any store is contacted;
// retrying will not help. Test with errors.Is(err, ratelimit.ErrInvalid).
var ErrInvalid = errors.New("ratelimit: invalid input")

// ErrNoKey is wrapped by the errors of KeyFuncs that find no key in a
// request: a missing header, no user in the context, no route pattern.
var ErrNoKey = errors.New("ratelimit: no key in request")
