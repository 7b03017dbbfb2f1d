// Package conv holds the generic helpers of molt's type conversions (the
// wire types of package api to and from the engine's, the state machine's
// persisted types to and from the values it keeps in memory): each maps a
// container element by element and keeps the difference between nil and
// empty, which JSON encodes differently (null or absent, and [] or {}).
package conv

// Slice returns f applied to every element of s, in order: nil for a nil
// s, an empty slice for an empty one.
func Slice[E, T any](s []E, f func(E) T) []T {
	if s == nil {
		return nil
	}
	out := make([]T, len(s))
	for i, e := range s {
		out[i] = f(e)
	}
	return out
}

// Map returns m with f applied to every value: nil for a nil m, an empty
// map for an empty one.
func Map[K comparable, V, T any](m map[K]V, f func(V) T) map[K]T {
	if m == nil {
		return nil
	}
	out := make(map[K]T, len(m))
	for k, v := range m {
		out[k] = f(v)
	}
	return out
}

// Ptr returns a pointer to f applied to *p, or nil for a nil p. The result
// never shares memory with p.
func Ptr[E, T any](p *E, f func(E) T) *T {
	if p == nil {
		return nil
	}
	v := f(*p)
	return &v
}

// Same is the identity, for Slice, Map and Ptr over values that need no
// conversion but must not be shared.
func Same[E any](e E) E { return e }
