package adaptertest

import "testing"

func TestCountedDown(t *testing.T) {
	for _, tt := range []struct {
		key, got, want string
		passed         int
		ok             bool
	}{
		{"RateLimit", `"try";r=0;t=59`, `"try";r=0;t=60`, 1, true},
		{"RateLimit", `"try";r=0;t=59`, `"try";r=0;t=60`, 0, false},
		{"RateLimit", `"try";r=0;t=58`, `"try";r=0;t=60`, 1, false},
		{"RateLimit", `"try";r=0;t=61`, `"try";r=0;t=60`, 1, false},
		{"RateLimit", `"try";r=1;t=59`, `"try";r=0;t=60`, 1, false},
		{"RateLimit", `"a";r=0;t=9, "b";r=3;t=59`, `"a";r=0;t=10, "b";r=3;t=60`, 2, true},
		{"RateLimit", `"a";r=0;t=9`, `"a";r=0;t=10, "b";r=3;t=60`, 2, false},
		{"RateLimit", `"a";r=0;t=0`, `"a";r=0;t=1`, 5, true},
		{"Retry-After", "59", "60", 1, true},
		{"Retry-After", "60", "60", 0, true},
		{"X-RateLimit-Reset", "57", "60", 2, false},
		{"X-RateLimit-Remaining", "4", "5", 3, false},
	} {
		if got := countedDown(tt.key, tt.got, tt.want, tt.passed); got != tt.ok {
			t.Errorf("countedDown(%s, %q, %q, %d) = %v, want %v", tt.key, tt.got, tt.want, tt.passed, got, tt.ok)
		}
	}
}
