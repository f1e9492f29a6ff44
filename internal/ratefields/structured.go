package ratefields

import (
	"strings"
	"unicode/utf8"
)

// A strict reader of RFC 9651 Lists, Dictionaries and Items: every
// construct is checked as section 4.2 parses it, so that a field with
// anything malformed, even in a parameter no form reads, fails whole.
// It reads in place, allocating nothing: a caller copies what it keeps.

// An sfType is the type of a bare item or an Inner List.
type sfType uint8

const (
	sfInteger sfType = iota + 1
	sfDecimal
	sfString
	sfToken
	sfByteSequence
	sfBoolean
	sfDate
	sfDisplayString
	sfInnerList
)

// An sfItem is a bare item or an Inner List, as it stands in a value.
type sfItem struct {
	typ sfType

	// text is a String's text between its quotes, escapes kept (read it,
	// or a Token's, with textLen, textEqual and textValue); a Byte Sequence's
	// base64 (read with b64Len, b64Equal and b64Value); a Display String's or
	// Inner List's text inside its delimiters; else the item as sent, less a Date's "@".
	text string

	n int64 // an Integer's or a Date's value

	// params is the parameters' text from their first ";" (read with
	// param), for a List's or Dictionary's member or an Item field.
	params string
}

// boolTrue is the value of a parameter or member that has none.
var boolTrue = sfItem{typ: sfBoolean, text: "?1"}

// listLen returns how many members the List value has, and whether it is one (4.2.1).
func listLen(value string) (n int, ok bool) {
	l := newList(value)
	for {
		if _, ok := l.next(); !ok {
			return n, !l.bad
		}
		n++
	}
}

// An sfList reads the members of a List one by one.
type sfList struct {
	p   sfParser
	bad bool // the value is not a List
}

func newList(value string) sfList {
	l := sfList{p: sfParser{s: value}}
	l.p.skipSP()
	return l
}

// next returns the List's next member; ok is false at its end, or at
// an error (then l.bad is set).
func (l *sfList) next() (m sfItem, ok bool) {
	if l.bad || l.p.eof() {
		return sfItem{}, false
	}
	if m, ok = l.p.member(); ok {
		ok = l.p.endMember()
	}
	if !ok {
		l.bad = true
		return sfItem{}, false
	}
	return m, true
}

// dictLen returns how many members the Dictionary value has, a key
// given twice counting twice, and whether it is one (section 4.2.2).
func dictLen(value string) (n int, ok bool) {
	p := sfParser{s: value}
	p.skipSP()
	for !p.eof() {
		if _, _, ok := p.dictMember(); !ok || !p.endMember() {
			return 0, false
		}
		n++
	}
	return n, true
}

// dictGet returns the last member key of value, a Dictionary dictLen
// accepted, as section 4.2.2 overwrites.
func dictGet(value, key string) (v sfItem, found bool) {
	p := sfParser{s: value}
	p.skipSP()
	for !p.eof() {
		k, m, ok := p.dictMember()
		if !ok || !p.endMember() {
			break
		}
		if k == key {
			v, found = m, true
		}
	}
	return v, found
}

// parseItem reads value as an Item field (section 4.2.3).
func parseItem(value string) (sfItem, bool) {
	p := sfParser{s: value}
	p.skipSP()
	it, ok := p.bareItem()
	if ok {
		it.params, ok = p.params()
	}
	p.skipSP()
	if !ok || !p.eof() {
		return sfItem{}, false
	}
	return it, true
}

// param returns the last parameter key of params (section 4.2.3.2).
func param(params, key string) (v sfItem, found bool) {
	p := sfParser{s: params}
	for p.at(';') {
		k, pv, ok := p.parameter()
		if !ok {
			break
		}
		if k == key {
			v, found = pv, true
		}
	}
	return v, found
}

// sfParser reads RFC 9651 text from s at off; each method reads one
// construct of section 4.2 and reports whether it was well formed.
type sfParser struct {
	s   string
	off int
}

func (p *sfParser) eof() bool { return p.off == len(p.s) }

func (p *sfParser) at(c byte) bool { return p.off < len(p.s) && p.s[p.off] == c }

func (p *sfParser) skipSP() {
	for p.at(' ') {
		p.off++
	}
}

func (p *sfParser) skipOWS() {
	for p.at(' ') || p.at('\t') {
		p.off++
	}
}

// endMember reads what follows a member: the end, or a comma and another member.
func (p *sfParser) endMember() bool {
	p.skipOWS()
	if p.eof() {
		return true
	}
	if p.s[p.off] != ',' {
		return false
	}
	p.off++
	p.skipOWS()
	return !p.eof() // a trailing comma
}

// member reads an Item or Inner List and parameters (section 4.2.1.1).
func (p *sfParser) member() (m sfItem, ok bool) {
	if p.at('(') {
		m, ok = p.innerList()
	} else {
		m, ok = p.bareItem()
	}
	if ok {
		m.params, ok = p.params()
	}
	return m, ok
}

// dictMember reads a Dictionary's member: its key, then "=" and an Item
// or Inner List, or parameters alone for Boolean true (section 4.2.2).
func (p *sfParser) dictMember() (key string, m sfItem, ok bool) {
	if key, ok = p.key(); !ok {
		return "", sfItem{}, false
	}
	if p.at('=') {
		p.off++
		m, ok = p.member()
		return key, m, ok
	}
	m = boolTrue
	m.params, ok = p.params()
	return key, m, ok
}

// innerList reads an Inner List but its parameters (section 4.2.1.2).
func (p *sfParser) innerList() (sfItem, bool) {
	p.off++ // (
	start := p.off
	for !p.eof() {
		p.skipSP()
		if p.at(')') {
			m := sfItem{typ: sfInnerList, text: p.s[start:p.off]}
			p.off++
			return m, true
		}
		_, ok := p.bareItem()
		if ok {
			_, ok = p.params()
		}
		if !ok || !p.at(' ') && !p.at(')') {
			return sfItem{}, false
		}
	}
	return sfItem{}, false
}

// params reads parameters (section 4.2.3.2) and returns their text.
func (p *sfParser) params() (string, bool) {
	start := p.off
	for p.at(';') {
		if _, _, ok := p.parameter(); !ok {
			return "", false
		}
	}
	return p.s[start:p.off], true
}

// parameter reads one parameter, from its ";".
func (p *sfParser) parameter() (key string, v sfItem, ok bool) {
	p.off++ // ;
	p.skipSP()
	if key, ok = p.key(); !ok {
		return "", sfItem{}, false
	}
	if !p.at('=') {
		return key, boolTrue, true
	}
	p.off++
	v, ok = p.bareItem()
	return key, v, ok
}

// key reads a key (section 4.2.3.3).
func (p *sfParser) key() (string, bool) {
	start := p.off
	if p.eof() || !isLower(p.s[p.off]) && p.s[p.off] != '*' {
		return "", false
	}
	for p.off++; !p.eof(); p.off++ {
		c := p.s[p.off]
		if !isLower(c) && !isDigit(c) && c != '_' && c != '-' && c != '.' && c != '*' {
			break
		}
	}
	return p.s[start:p.off], true
}

// bareItem reads a bare item of any type (section 4.2.3.1).
func (p *sfParser) bareItem() (sfItem, bool) {
	if p.eof() {
		return sfItem{}, false
	}
	switch c := p.s[p.off]; {
	case c == '-' || isDigit(c):
		return p.number()
	case c == '"':
		return p.str()
	case c == '*' || isAlpha(c):
		return p.token(), true
	case c == ':':
		return p.byteSequence()
	case c == '?':
		return p.boolean()
	case c == '@':
		return p.date()
	case c == '%':
		return p.displayString()
	}
	return sfItem{}, false
}

// number reads an Integer or a Decimal (section 4.2.4): at most 15
// digits, or 12 and 1 to 3 after the point.
func (p *sfParser) number() (sfItem, bool) {
	start := p.off
	neg := p.at('-')
	if neg {
		p.off++
	}
	first := p.off
	if p.eof() || !isDigit(p.s[p.off]) {
		return sfItem{}, false
	}
	it := sfItem{typ: sfInteger}
	point := 0
	for ; !p.eof(); p.off++ {
		c := p.s[p.off]
		if c == '.' && it.typ == sfInteger {
			if p.off-first > 12 {
				return sfItem{}, false
			}
			it.typ, point = sfDecimal, p.off
		} else if !isDigit(c) {
			break
		}
		if n := p.off + 1 - first; it.typ == sfInteger && n > 15 || n > 16 {
			return sfItem{}, false
		}
	}
	it.text = p.s[start:p.off]
	if it.typ == sfDecimal {
		frac := p.off - point - 1
		return it, frac >= 1 && frac <= 3
	}
	for i := first; i < p.off; i++ {
		it.n = it.n*10 + int64(p.s[i]-'0')
	}
	if neg {
		it.n = -it.n
	}
	return it, true
}

// str reads a String (section 4.2.5): printable ASCII, with \" and \\.
func (p *sfParser) str() (sfItem, bool) {
	p.off++ // "
	start := p.off
	for !p.eof() {
		c := p.s[p.off]
		p.off++
		switch {
		case c == '\\':
			if !p.at('"') && !p.at('\\') {
				return sfItem{}, false
			}
			p.off++
		case c == '"':
			return sfItem{typ: sfString, text: p.s[start : p.off-1]}, true
		case c < 0x20 || c >= 0x7f:
			return sfItem{}, false
		}
	}
	return sfItem{}, false
}

// token reads a Token (section 4.2.6), its first character checked.
func (p *sfParser) token() sfItem {
	start := p.off
	for p.off++; !p.eof(); p.off++ {
		if c := p.s[p.off]; !isTchar(c) && c != ':' && c != '/' {
			break
		}
	}
	return sfItem{typ: sfToken, text: p.s[start:p.off]}
}

// byteSequence reads a Byte Sequence (section 4.2.7), padded or, as
// the section asks to accept, not.
func (p *sfParser) byteSequence() (sfItem, bool) {
	p.off++ // :
	start := p.off
	for ; !p.eof(); p.off++ {
		c := p.s[p.off]
		if c == ':' {
			b64 := p.s[start:p.off]
			p.off++
			return sfItem{typ: sfByteSequence, text: b64}, isBase64(b64)
		}
		if !isAlpha(c) && !isDigit(c) && c != '+' && c != '/' && c != '=' {
			return sfItem{}, false
		}
	}
	return sfItem{}, false
}

// boolean reads a Boolean (section 4.2.8).
func (p *sfParser) boolean() (sfItem, bool) {
	if p.off+1 >= len(p.s) || p.s[p.off+1] != '0' && p.s[p.off+1] != '1' {
		return sfItem{}, false
	}
	p.off += 2
	return sfItem{typ: sfBoolean, text: p.s[p.off-2 : p.off]}, true
}

// date reads a Date (section 4.2.9): "@" and an Integer.
func (p *sfParser) date() (sfItem, bool) {
	p.off++ // @
	it, ok := p.number()
	if !ok || it.typ != sfInteger {
		return sfItem{}, false
	}
	it.typ = sfDate
	return it, true
}

// displayString reads a Display String (section 4.2.10): printable
// ASCII and lowercase %-escapes, which must decode to UTF-8.
func (p *sfParser) displayString() (sfItem, bool) {
	if !strings.HasPrefix(p.s[p.off:], `%"`) {
		return sfItem{}, false
	}
	p.off += 2
	start := p.off
	var char [utf8.UTFMax]byte // the bytes of a character begun
	n := 0
	for !p.eof() {
		c := p.s[p.off]
		p.off++
		switch {
		case c < 0x20 || c >= 0x7f:
			return sfItem{}, false
		case c == '"':
			return sfItem{typ: sfDisplayString, text: p.s[start : p.off-1]}, n == 0
		case c == '%':
			if len(p.s)-p.off < 2 {
				return sfItem{}, false
			}
			hi, ok1 := unhex(p.s[p.off])
			lo, ok2 := unhex(p.s[p.off+1])
			if !ok1 || !ok2 {
				return sfItem{}, false
			}
			p.off += 2
			c = hi<<4 | lo
		}
		char[n] = c
		n++
		if utf8.FullRune(char[:n]) {
			if r, size := utf8.DecodeRune(char[:n]); r == utf8.RuneError && size == 1 {
				return sfItem{}, false
			}
			n = 0
		}
	}
	return sfItem{}, false
}

// unhex reads a lowercase hexadecimal digit.
func unhex(c byte) (byte, bool) {
	i := strings.IndexByte("0123456789abcdef", c)
	return byte(i), i >= 0
}

func isDigit(c byte) bool { return '0' <= c && c <= '9' }
func isLower(c byte) bool { return 'a' <= c && c <= 'z' }
func isAlpha(c byte) bool { return isLower(c) || 'A' <= c && c <= 'Z' }

// textLen returns the length of a String's or Token's value: its text
// less the escaping backslashes.
func textLen(text string) int {
	n := 0
	for i := 0; i < len(text); i++ {
		if text[i] == '\\' {
			i++
		}
		n++
	}
	return n
}

// textEqual reports whether a String's or Token's text has the value s.
func textEqual(text, s string) bool {
	j := 0
	for i := 0; i < len(text); i++ {
		if text[i] == '\\' {
			i++
		}
		if j == len(s) || text[i] != s[j] {
			return false
		}
		j++
	}
	return j == len(s)
}

// textValue returns the value of a String's or Token's text, a copy.
func textValue(text string) string {
	var b strings.Builder
	b.Grow(textLen(text))
	for i := 0; i < len(text); i++ {
		if text[i] == '\\' {
			i++
		}
		b.WriteByte(text[i])
	}
	return b.String()
}

// isBase64 reports whether s, of base64's characters, is base64 as
// StdEncoding or RawStdEncoding reads it. Non-zero pad bits are
// ignored, as RFC 9651 asks.
func isBase64(s string) bool {
	data := strings.TrimRight(s, "=")
	switch pad := len(s) - len(data); {
	case strings.IndexByte(data, '=') >= 0:
		return false
	case pad > 0:
		return pad <= 2 && len(s)%4 == 0
	}
	return len(s)%4 != 1
}

// b64Len returns how many bytes base64 that isBase64 accepted decodes to.
func b64Len(b64 string) int {
	return len(strings.TrimRight(b64, "=")) * 3 / 4
}

// b64Equal reports whether base64 that isBase64 accepted decodes to s.
func b64Equal(b64, s string) bool {
	if b64Len(b64) != len(s) {
		return false
	}
	for i := 0; i < len(s); i++ {
		if b64Byte(b64, i) != s[i] {
			return false
		}
	}
	return true
}

// b64Value returns what base64 that isBase64 accepted decodes to.
func b64Value(b64 string) string {
	n := b64Len(b64)
	var b strings.Builder
	b.Grow(n)
	for i := range n {
		b.WriteByte(b64Byte(b64, i))
	}
	return b.String()
}

// b64Byte returns byte i of base64 decoded: 4 characters hold 3 bytes.
func b64Byte(b64 string, i int) byte {
	q := i / 3 * 4
	switch i % 3 {
	case 0:
		return b64Bits(b64[q])<<2 | b64Bits(b64[q+1])>>4
	case 1:
		return b64Bits(b64[q+1])<<4 | b64Bits(b64[q+2])>>2
	}
	return b64Bits(b64[q+2])<<6 | b64Bits(b64[q+3])
}

// b64Alphabet holds base64's characters at the index of their 6 bits.
const b64Alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"

// b64Bits returns the 6 bits a base64 character stands for.
func b64Bits(c byte) byte { return byte(strings.IndexByte(b64Alphabet, c)) }
