package ratefields

import (
	"strings"
	"testing"
)

// TestUnpaddedByteSequences: RFC 9651 section 4.2.7 asks parsers to
// accept a Byte Sequence without its "=" padding, and with pad bits that
// are not zero; httpsfv refuses the first. Padding given must be whole,
// and a single character left over is no base64.
func TestUnpaddedByteSequences(t *testing.T) {
	for _, tc := range []struct {
		field string
		want  string // decoded
		ok    bool
	}{
		{":cHJvamVjdA==:", "project", true},
		{":cHJvamVjdA:", "project", true},
		{":cHJvamVjdGE=:", "projecta", true},
		{":cHJvamVjdGE:", "projecta", true},
		{":cHJvamVj:", "projec", true},
		{":AB:", "\x00", true},
		{"::", "", true},
		{":cHJvamVjdA=:", "", false},
		{":cHJvamVjdA===:", "", false},
		{":cHJvamVjd:", "", false},
		{":AA=A:", "", false},
		{":====:", "", false},
	} {
		it, ok := parseItem(tc.field)
		if ok != tc.ok || ok && (it.typ != sfByteSequence || b64Value(it.text) != tc.want || !b64Equal(it.text, tc.want)) {
			t.Errorf("%s: got %q, %v; want %q, %v", tc.field, b64Value(it.text), ok, tc.want, tc.ok)
		}
	}
}

// TestReadingAllocatesNothing: reading a List, a Dictionary and their
// parameters allocates nothing, whatever their length.
func TestReadingAllocatesNothing(t *testing.T) {
	list := strings.Repeat(`"a\"b";q=1;w=60;pk=:AAAA:;qu=requests, ("x" 1.5);y=@1, `, 200) + "z"
	dict := strings.Repeat(`limit=100;x=%"caf%c3%a9", remaining=(1 2), `, 200) + "reset=60"
	allocs := testing.AllocsPerRun(20, func() {
		if n, ok := listLen(list); !ok || n != 401 {
			t.Fatalf("got a List of %d members, %v; want 401", n, ok)
		}
		named := 0
		l := newList(list)
		for m, ok := l.next(); ok; m, ok = l.next() {
			if pk, ok := param(m.params, "pk"); ok && textEqual(m.text, `a"b`) && b64Equal(pk.text, "\x00\x00\x00") {
				named++
			}
		}
		if named != 200 {
			t.Fatalf("got %d items named a\"b, want 200", named)
		}
		if n, ok := dictLen(dict); !ok || n != 401 {
			t.Fatalf("got a Dictionary of %d members, %v; want 401", n, ok)
		}
		if m, ok := dictGet(dict, "reset"); !ok || m.n != 60 {
			t.Fatalf("got reset %+v, want 60", m)
		}
	})
	if allocs != 0 {
		t.Errorf("got %v allocations, want 0", allocs)
	}
}
