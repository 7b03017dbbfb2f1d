package filltest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
)

// Grown reports, as an error, how JSON document now is not old grown by
// additions alone: every object key of old must be in now with a value
// grown the same way, arrays keep their length, and other values are
// equal. A format that is append-only (fields are added, never renamed,
// removed or retyped) passes; its golden file of filled values may then
// be rewritten.
func Grown(old, now []byte) error {
	var o, n any
	for _, d := range []struct {
		b []byte
		v *any
	}{{old, &o}, {now, &n}} {
		dec := json.NewDecoder(bytes.NewReader(d.b))
		dec.UseNumber()
		if err := dec.Decode(d.v); err != nil {
			return err
		}
	}
	return grown("", o, n)
}

func grown(path string, old, now any) error {
	switch o := old.(type) {
	case map[string]any:
		n, ok := now.(map[string]any)
		if !ok {
			return fmt.Errorf("%s: was an object, is %s", path, describe(now))
		}
		keys := make([]string, 0, len(o))
		for k := range o {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range keys {
			v, ok := n[k]
			if !ok {
				return fmt.Errorf("%s.%s: gone", path, k)
			}
			if err := grown(path+"."+k, o[k], v); err != nil {
				return err
			}
		}
	case []any:
		n, ok := now.([]any)
		if !ok || len(n) != len(o) {
			return fmt.Errorf("%s: was an array of %d, is %s", path, len(o), describe(now))
		}
		for i := range o {
			if err := grown(fmt.Sprintf("%s[%d]", path, i), o[i], n[i]); err != nil {
				return err
			}
		}
	default:
		if !reflect.DeepEqual(old, now) {
			return fmt.Errorf("%s: was %s, is %s", path, describe(old), describe(now))
		}
	}
	return nil
}

func describe(v any) string {
	switch v := v.(type) {
	case map[string]any:
		return "an object"
	case []any:
		return fmt.Sprintf("an array of %d", len(v))
	}
	b, _ := json.Marshal(v) // a scalar: as the JSON spelled it
	return string(b)
}
