package override

import (
	"hash/maphash"
	"math/bits"
)

// A keyIndex finds the slot of a policy's exact key: an open-addressing
// hash table whose control bytes (a byte of the key's hash, 0 for empty)
// lie apart from its cells, a cache line each with a key of up to 52
// bytes inside. The control bytes stay in the caches, so a key not found
// reads no more (but for 1 in 100 or so) and a key found one cell, less
// than Go's map reads (BenchmarkMiddlewareOverrides).
type keyIndex struct {
	seed  maphash.Seed
	ctrl  []byte // a power of two of them, at most 3/4 in use
	cells []cell // as many
	long  string // the keys longer than a cell holds, end to end
}

// A cell holds a key and its slot. MaxOverrides fits 16 bits.
type cell struct {
	set, effect uint16
	n           uint16 // the key's length
	_           uint16
	off         uint32 // where the key is in long, when it is too long for key
	key         [52]byte
}

func newKeyIndex(m map[string]slot) keyIndex {
	x := keyIndex{seed: maphash.MakeSeed()}
	if len(m) == 0 {
		return x
	}
	size := 1 << bits.Len(uint(len(m)+len(m)/3))
	x.ctrl, x.cells = make([]byte, size), make([]cell, size)
	var long []byte
	mask := uint64(size - 1)
	for k, s := range m {
		h := maphash.String(x.seed, k)
		i := h & mask
		for x.ctrl[i] != 0 {
			i = (i + 1) & mask
		}
		c := &x.cells[i]
		x.ctrl[i] = fingerprint(h)
		*c = cell{set: uint16(s.set), effect: uint16(s.effect), n: uint16(len(k))}
		if len(k) <= len(c.key) {
			copy(c.key[:], k)
		} else {
			c.off = uint32(len(long))
			long = append(long, k...)
		}
	}
	x.long = string(long)
	return x
}

// fingerprint returns the control byte of hash h: its top byte, never 0.
func fingerprint(h uint64) byte { return max(byte(h>>56), 1) }

func (x *keyIndex) find(key string) (slot, bool) {
	if len(x.ctrl) == 0 {
		return noSlot, false
	}
	h := maphash.String(x.seed, key)
	fp, mask := fingerprint(h), uint64(len(x.ctrl)-1)
	for i := h & mask; ; i = (i + 1) & mask {
		switch x.ctrl[i] {
		case 0:
			return noSlot, false
		case fp:
			if c := &x.cells[i]; int(c.n) == len(key) && x.keyOf(c) == key {
				return slot{int32(c.set), int32(c.effect)}, true
			}
		}
	}
}

func (x *keyIndex) keyOf(c *cell) string {
	if int(c.n) <= len(c.key) {
		return string(c.key[:c.n])
	}
	return x.long[c.off : c.off+uint32(c.n)]
}
