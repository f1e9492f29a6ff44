package override

// Fixed returns a Source of t, which never changes: overrides as a
// Plane would have read them, for tests.
func Fixed(t *Table) Source { return fixed{t} }

type fixed struct{ t *Table }

func (f fixed) Table() *Table { return f.t }
func (fixed) Attach(Limiter)  {}
func (fixed) Denied(Denial)   {}
