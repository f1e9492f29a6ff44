package main

import (
	"encoding/json"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/ratelimit-go/ratelimit/testkits/redistest"
)

// clientCounts is what ./client -json prints for one way.
type clientCounts struct {
	Sent, Admitted, Refused, HeldBack, Failed int64
}

// TestClientSharesOneBudget: ./client's 32 workers in two processes
// against POST /v1/generate, each way with an API key whose gen-rpm an
// operator raised to 600 a minute (so that the run sends hundreds), 20ms
// a request, 4 in flight at most (gen-concurrent): sent as they are, at
// least half are refused; through outbound.Transport, sharing one budget
// through a redis-server, at most 1%, and hundreds are admitted.
func TestClientSharesOneBudget(t *testing.T) {
	t.Parallel()
	server := build(t)["net/http"]
	client := filepath.Join(t.TempDir(), "client")
	if out, err := exec.Command("go", "build", "-o", client, "./client").CombinedOutput(); err != nil {
		t.Fatalf("go build ./client: %v\n%s", err, out)
	}
	redisURL := "redis://" + redistest.Require(t).Addr + "/0"
	u, out := startWith(t, nil, server, "-redis", redisURL, "-fallback-budget", steadyBudget,
		"-admin", "127.0.0.1:0", "-admin-token", adminToken)
	admin := adminURL(t, out)
	for _, key := range []string{"cs-raw", "cs-client"} {
		if status, body := adminCall(t, "PUT", admin+"/overrides", `{"policy":"gen-rpm","key":"`+key+`","quota":600}`); status != 204 {
			t.Fatalf("PUT overrides: %d %s", status, body)
		}
	}
	cmd := exec.Command(client, "-url", u, "-key", "cs", "-redis", redisURL, "-duration", "6s", "-hold-ms", "20", "-json")
	stdout, err := cmd.Output()
	if err != nil {
		t.Fatalf("./client: %v\n%s", err, stdout)
	}
	var got map[string]clientCounts
	if err := json.Unmarshal(stdout, &got); err != nil {
		t.Fatalf("./client printed %q: %v", stdout, err)
	}
	raw, through := got["without the client"], got["with the client"]
	t.Logf("without the client: %+v; with it: %+v", raw, through)
	if raw.Sent == 0 || 2*raw.Refused < raw.Sent {
		t.Errorf("without the client: %d of %d refused; want at least half", raw.Refused, raw.Sent)
	}
	if through.Admitted < 100 || 100*through.Refused > through.Sent || through.Failed != 0 {
		t.Errorf("with the client: %d admitted, %d of %d refused, %d failed; want at least 100 admitted, at most 1%% refused, none failed", through.Admitted, through.Refused, through.Sent, through.Failed)
	}
}
