package store

import (
	"encoding/json"
	"errors"
	"io"
	"os"
	"os/exec"
	"testing"
)

// startInstance starts the test binary again as an instance process of a
// test: running no test, with the environment variable env set to cfg in
// JSON, which its TestMain hands to the instance. The function returned
// waits for the instance to end and reads the report it printed, as JSON,
// into report.
func startInstance(t *testing.T, env string, cfg, report any) (wait func() error) {
	t.Helper()
	b, err := json.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), env+"="+string(b))
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	return func() error {
		err := json.NewDecoder(out).Decode(report)
		io.Copy(io.Discard, out)
		return errors.Join(err, cmd.Wait())
	}
}
