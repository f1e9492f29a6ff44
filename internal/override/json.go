package override

import (
	"bytes"
	"encoding/json"
	"fmt"
	"time"
)

// jsonOverride is an Override's JSON, with Window in milliseconds.
type jsonOverride struct {
	Policy    string `json:"policy,omitempty"`
	StoredKey string `json:"stored_key,omitempty"`
	Key       string `json:"key,omitempty"`
	Label     string `json:"label,omitempty"`
	Quota     *int   `json:"quota,omitempty"`
	WindowMS  int64  `json:"window_ms,omitempty"`
	Unlimited bool   `json:"unlimited,omitempty"`
	Blocked   bool   `json:"blocked,omitempty"`
	Shadow    *bool  `json:"shadow,omitempty"`
	Enforced  bool   `json:"enforced,omitempty"`
}

// MarshalJSON writes o's fields that are set, Window as "window_ms".
func (o Override) MarshalJSON() ([]byte, error) {
	v := jsonOverride{Policy: o.Policy, StoredKey: o.StoredKey, Key: o.Key, Label: o.Label,
		WindowMS: o.Window.Milliseconds(), Unlimited: o.Unlimited, Blocked: o.Blocked, Enforced: o.Enforced}
	if o.Quota != 0 {
		v.Quota = &o.Quota
	}
	if o.Shadow {
		v.Shadow = &o.Shadow
	}
	return json.Marshal(v)
}

// UnmarshalJSON reads what MarshalJSON writes, refusing an unknown
// field and the forms that meant something else before (a quota of -1
// or 0, "shadow": false), naming what to write.
func (o *Override) UnmarshalJSON(b []byte) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	var v jsonOverride
	if err := dec.Decode(&v); err != nil {
		return err
	}
	*o = Override{Policy: v.Policy, StoredKey: v.StoredKey, Key: v.Key, Label: v.Label,
		Window: time.Duration(v.WindowMS) * time.Millisecond, Unlimited: v.Unlimited, Blocked: v.Blocked, Enforced: v.Enforced}
	switch {
	case v.Quota != nil && *v.Quota == -1:
		return fmt.Errorf(`%w: quota is -1: write "unlimited": true for unlimited`, ErrInvalid)
	case v.Quota != nil && *v.Quota == 0:
		return fmt.Errorf(`%w: quota is 0: write "blocked": true to block, or leave quota out for the limit's`, ErrInvalid)
	case v.Shadow != nil && !*v.Shadow:
		return fmt.Errorf(`%w: shadow is false: write "enforced": true to enforce, or leave shadow out for the limit's`, ErrInvalid)
	case v.Quota != nil:
		o.Quota = *v.Quota
	}
	o.Shadow = v.Shadow != nil
	return nil
}

// Stored returns the value of o stored in Redis: its JSON without the
// policy and keys, which name the field that holds it.
func (o Override) Stored() string {
	o = o.Effect()
	o.Policy = ""
	b, _ := json.Marshal(o)
	return string(b)
}

// Parse returns the override stored at the field of policy and
// storedKey with value (see Stored), and reads older values too: "quota"
// -1 (unlimited), -2 (blocked), 0 (the limit's), and "enforce".
func Parse(policy, storedKey, value string) (Override, error) {
	var v struct {
		jsonOverride
		Enforce bool `json:"enforce"`
	}
	if err := json.Unmarshal([]byte(value), &v); err != nil {
		return Override{}, err
	}
	o := Override{Policy: policy, StoredKey: storedKey, Window: time.Duration(v.WindowMS) * time.Millisecond,
		Unlimited: v.Unlimited, Blocked: v.Blocked, Shadow: v.Shadow != nil && *v.Shadow, Enforced: v.Enforced || v.Enforce}
	switch q := v.Quota; {
	case q == nil:
	case *q == -1:
		o.Unlimited = true
	case *q == -2:
		o.Blocked = true
	default:
		o.Quota = *q
	}
	return o, nil
}
