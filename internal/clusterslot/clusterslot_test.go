package clusterslot

import "testing"

// The CRC16 of Redis Cluster's specification: "123456789" -> 0x31C3.
func TestCRC16(t *testing.T) {
	if got := crc16("123456789"); got != 0x31c3 {
		t.Errorf("crc16(123456789) = %#x, want 0x31c3", got)
	}
}

// Every slot has a tag, and the tag's keys are in it.
func TestTag(t *testing.T) {
	for slot := range Count {
		tag := Tag(slot)
		if got := Of("{" + tag + "}:x"); tag == "" || got != slot {
			t.Fatalf("Tag(%d) = %q, whose keys are in slot %d", slot, tag, got)
		}
	}
}
