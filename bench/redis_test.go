package main

import (
	"testing"
	"time"
)

func TestParseInfoCPU(t *testing.T) {
	const info = "# CPU\r\nused_cpu_sys:1.250000\r\nused_cpu_user:0.500125\r\nused_cpu_sys_children:9.000000\r\nused_cpu_user_children:9.000000\r\nused_cpu_sys_main_thread:1.000000\r\nused_cpu_user_main_thread:0.400000\r\n"
	got, err := parseInfoCPU(info)
	if err != nil {
		t.Fatal(err)
	}
	if want := 1750125 * time.Microsecond; got != want {
		t.Errorf("got %v, want %v", got, want)
	}
	for _, bad := range []string{"", "# CPU\r\nused_cpu_sys:1.0\r\n", "used_cpu_sys:x\r\nused_cpu_user:1\r\n"} {
		if _, err := parseInfoCPU(bad); err == nil {
			t.Errorf("parseInfoCPU(%q): got no error", bad)
		}
	}
}

func TestCPUPer(t *testing.T) {
	tests := []struct {
		cpu      time.Duration
		measured bool
		ops      uint64
		want     string
	}{
		{time.Second, false, 100, ""},
		{time.Second, true, 0, ""},
		{time.Second, true, 200_000, "5.00"},
		{time.Second, true, 30_000, "33.3"},
		{0, true, 10, "0.00"},
	}
	for _, tt := range tests {
		if got := cpuPer(tt.cpu, tt.measured, tt.ops); got != tt.want {
			t.Errorf("cpuPer(%v, %v, %d): got %q, want %q", tt.cpu, tt.measured, tt.ops, got, tt.want)
		}
	}
}
