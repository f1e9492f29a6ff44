package testkit

import (
	"bufio"
	"os"
	"os/exec"
	"strings"
	"testing"
)

// StartChild starts the test binary again, running no test, with env
// ("NAME=value") added to its environment, so that its TestMain serves
// as a child process: an instance of a service. It kills the child when
// t ends, and returns it and the first line it prints, where it listens.
func StartChild(t testing.TB, env string) (*exec.Cmd, string) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), env)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
	})
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		t.Fatalf("the child process said nothing: %v", err)
	}
	return cmd, strings.TrimSpace(line)
}
