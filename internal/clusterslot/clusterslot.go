// Package clusterslot computes Redis Cluster hash slots: the store's probe
// needs a key in each slot, and the test harness the slot of a key.
package clusterslot

import (
	"strconv"
	"strings"
	"sync"
)

// Count is the number of hash slots of a Redis Cluster.
const Count = 16384

// Of returns the slot of key: CRC16 of key, or of its non-empty {hash tag}, modulo Count.
func Of(key string) int {
	if i := strings.IndexByte(key, '{'); i >= 0 {
		if j := strings.IndexByte(key[i+1:], '}'); j > 0 {
			key = key[i+1 : i+1+j]
		}
	}
	return int(crc16(key) % Count)
}

// crc16 is CRC-16/XMODEM, the checksum Redis Cluster hashes keys with.
func crc16(s string) uint16 {
	var crc uint16
	for i := range len(s) {
		crc ^= uint16(s[i]) << 8
		for range 8 {
			if crc&0x8000 != 0 {
				crc = crc<<1 ^ 0x1021
			} else {
				crc <<= 1
			}
		}
	}
	return crc
}

// tags holds a hash tag in each slot.
var tags = sync.OnceValue(func() []string {
	tags := make([]string, Count)
	for i, left := 0, Count; left > 0; i++ {
		tag := strconv.Itoa(i)
		if n := crc16(tag) % Count; tags[n] == "" {
			tags[n] = tag
			left--
		}
	}
	return tags
})

// Tag returns a hash tag of slot: "{" + Tag(s) + "}..." is in slot s.
func Tag(slot int) string { return tags()[slot%Count] }
