package ratelimit_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/ratelimit-go/ratelimit"
)

// TestRoutesInAnotherSyntax: a WithRoutes pattern in Gin's, Echo's or
// chi's syntax is an error at New that names the pattern and how ServeMux
// writes it, never a route that silently falls back to the default
// limits.
func TestRoutesInAnotherSyntax(t *testing.T) {
	for pattern, want := range map[string]string{
		"GET /users/:id": `"{id}"`,
		"/static/*":      `"{...}"`,
		"/files/*path":   `"{path...}"`,
	} {
		_, err := ratelimit.New(newMemory(t), "test", ratelimit.WithRoutes(map[string][]ratelimit.Limit{pattern: {ratelimit.PerMinute(1)}}))
		if !errors.Is(err, ratelimit.ErrInvalid) || !strings.Contains(err.Error(), "WithRoutes: pattern "+`"`+pattern+`"`) || !strings.Contains(err.Error(), want) {
			t.Errorf("WithRoutes(%q): got %v, want an ErrInvalid naming the pattern and %s", pattern, err, want)
		}
	}
}
