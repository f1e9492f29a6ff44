package ratefields

import (
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/dunglas/httpsfv"
)

// FuzzStructuredFields reads arbitrary field lines ("\n" between them)
// as a List, a Dictionary and an Item, with structured.go's reader and
// with github.com/dunglas/httpsfv, a parser of all of RFC 9651: both
// must accept a value with the same members, parameters and values, or
// both refuse it. The one difference allowed is where httpsfv departs
// from RFC 9651: it refuses a Byte Sequence without its base64 padding,
// which section 4.2.7 asks parsers to accept; such a value must read as
// httpsfv reads it with the padding added.
func FuzzStructuredFields(f *testing.F) {
	for _, seed := range []string{
		`"api";q=100;w=60, "tokens";q=40000;w=60;qu="content-bytes";pk=:cHJvamVjdA==:`,
		"burst;q=100;w=60,daily;q=1000;w=86400\n\"a\";r=1;t=1",
		`"100-in-1min"; q=100; w=60; pk=:ZGVmYXVsdA:`,
		`limit=100, remaining=0, reset=60`,
		`limit=(100 "a";x), reset=5;x, policy="p", flag`,
		`("inner";q=1 tok:en/x), ?1;q=1, 5;w=1.5, -0.001, @-1700000000;x=%"caf%c3%a9"`,
		`"esc\"aped\\";pk=:AB:;pk=:AAA:;q=999999999999999;w=-999999999999.999`,
		`*tok;a=?0;b;c=:/+9=:, 1000000000000000, 1234567890123.1, 1.2345`,
		`%"%ff", %"\", (a  b), ( ), a;*=1;a-b.c_*=2`,
		"a\t,\tb, c,",
		` 42;limit=1 `,
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, field string) {
		lines := strings.Split(field, "\n")
		v := strings.Join(lines, ", ")
		for _, form := range []struct {
			name   string
			ours   func(string) (any, bool)
			theirs func([]string) (any, error)
		}{
			{"List", ourList, func(l []string) (any, error) { return httpsfv.UnmarshalList(l) }},
			{"Dictionary", ourDictionary, func(l []string) (any, error) { return httpsfv.UnmarshalDictionary(l) }},
			{"Item", ourItem, func(l []string) (any, error) { return httpsfv.UnmarshalItem(l) }},
		} {
			got, ok := form.ours(v)
			want, err := form.theirs(lines)
			switch {
			case !ok && err != nil:
				continue
			case !ok:
				t.Fatalf("%s %q: refused, httpsfv reads %#v", form.name, v, want)
			case err != nil:
				padded := padByteSequences(v)
				if padded == v {
					t.Fatalf("%s %q: read as %#v, httpsfv refuses it: %v", form.name, v, got, err)
				}
				if want, err = form.theirs([]string{padded}); err != nil {
					t.Fatalf("%s %q: read as %#v, httpsfv refuses it even padded (%q): %v", form.name, v, got, padded, err)
				}
			}
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("%s %q:\ngot  %#v\nwant %#v (httpsfv)", form.name, v, got, want)
			}
		}
	})
}

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

// ourList, ourDictionary and ourItem read v with structured.go's reader
// into httpsfv's types, for comparison.
func ourList(v string) (any, bool) {
	n, ok := listLen(v)
	if !ok {
		return nil, false
	}
	var list httpsfv.List
	l := newList(v)
	for m, ok := l.next(); ok; m, ok = l.next() {
		list = append(list, ourMember(m))
	}
	if l.bad || len(list) != n {
		panic("listLen and next disagree on " + strconv.Quote(v))
	}
	return list, true
}

func ourDictionary(v string) (any, bool) {
	if _, ok := dictLen(v); !ok {
		return nil, false
	}
	d := httpsfv.NewDictionary()
	last := map[string]sfItem{}
	p := sfParser{s: v}
	for p.skipSP(); !p.eof(); p.endMember() {
		k, m, _ := p.dictMember()
		d.Add(k, ourMember(m))
		last[k] = m
	}
	for k, m := range last {
		if got, _ := dictGet(v, k); got != m {
			panic("dictGet does not find the last member " + k)
		}
	}
	return d, true
}

func ourItem(v string) (any, bool) {
	it, ok := parseItem(v)
	if !ok {
		return nil, false
	}
	return httpsfv.Item{Value: ourBare(it), Params: ourParams(it.params)}, true
}

func ourMember(m sfItem) httpsfv.Member {
	if m.typ != sfInnerList {
		return httpsfv.Item{Value: ourBare(m), Params: ourParams(m.params)}
	}
	il := httpsfv.InnerList{Params: ourParams(m.params)}
	p := sfParser{s: m.text}
	for p.skipSP(); !p.eof(); p.skipSP() {
		it, _ := p.bareItem()
		it.params, _ = p.params()
		il.Items = append(il.Items, httpsfv.Item{Value: ourBare(it), Params: ourParams(it.params)})
	}
	return il
}

func ourParams(params string) *httpsfv.Params {
	ps := httpsfv.NewParams()
	last := map[string]sfItem{}
	p := sfParser{s: params}
	for p.at(';') {
		k, v, _ := p.parameter()
		ps.Add(k, ourBare(v))
		last[k] = v
	}
	for k, v := range last {
		if got, _ := param(params, k); got != v {
			panic("param does not find the last parameter " + k)
		}
	}
	return ps
}

func ourBare(it sfItem) any {
	switch it.typ {
	case sfInteger:
		return it.n
	case sfDecimal:
		d, err := strconv.ParseFloat(it.text, 64)
		if err != nil {
			panic(err)
		}
		return d
	case sfString:
		if textLen(it.text) != len(textValue(it.text)) || !textEqual(it.text, textValue(it.text)) {
			panic("textLen, textEqual and textValue disagree on " + it.text)
		}
		return textValue(it.text)
	case sfToken:
		return httpsfv.Token(it.text)
	case sfByteSequence:
		return []byte(b64Value(it.text))
	case sfBoolean:
		return it.text == "?1"
	case sfDate:
		return time.Unix(it.n, 0)
	case sfDisplayString:
		var b []byte
		for i := 0; i < len(it.text); i++ {
			if it.text[i] == '%' {
				n, _ := strconv.ParseUint(it.text[i+1:i+3], 16, 8)
				b = append(b, byte(n))
				i += 2
				continue
			}
			b = append(b, it.text[i])
		}
		return httpsfv.DisplayString(b)
	}
	panic("no bare item")
}

// padByteSequences returns v, a value structured.go's reader accepts,
// with "=" added to each Byte Sequence that lacks its padding. In such a
// value, a ":" starts a Byte Sequence where a bare item may start: first
// or after a space, a tab, ",", "(" or "="; elsewhere it is in a Token,
// or in a String or Display String, which are skipped.
func padByteSequences(v string) string {
	var b strings.Builder
	for i := 0; i < len(v); i++ {
		c := v[i]
		switch {
		case c == '"' || c == '%' && i+1 < len(v) && v[i+1] == '"':
			// To the closing quote; a String's \" is no closing quote,
			// a Display String has no backslash escapes.
			end := i + 1
			if c == '%' {
				end++
			}
			for ; v[end] != '"'; end++ {
				if c == '"' && v[end] == '\\' {
					end++
				}
			}
			b.WriteString(v[i : end+1])
			i = end
		case c == ':' && (i == 0 || strings.IndexByte(" \t,(=", v[i-1]) >= 0):
			end := i + 1 + strings.IndexByte(v[i+1:], ':')
			b64 := v[i+1 : end]
			b.WriteString(":" + b64 + strings.Repeat("=", (4-len(b64)%4)%4) + ":")
			i = end
		default:
			b.WriteByte(c)
		}
	}
	return b.String()
}
