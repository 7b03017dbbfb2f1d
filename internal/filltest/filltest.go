// Package filltest fills every exported field of a value, at any depth,
// with a distinct non-zero value. Conversion tests use it: a value filled
// this way and converted there and back comes back equal only if the
// conversion carried every field, so a field added to one side and not
// converted fails the test without anyone listing fields by hand.
package filltest

import (
	"fmt"
	"reflect"
	"time"
)

// Filler fills values; its zero value is ready to use. Each filled leaf
// takes the next number of one counter, so no two fields share a value
// and a conversion that swaps two fields is caught too.
type Filler struct {
	// Types gives the value of every field of a type whose values must be
	// valid (a version, say), from the counter's next number.
	Types map[reflect.Type]func(n int) any
	// Fields gives the value of a string field by its name, for fields
	// that hold a structured string (a version as "1.N.X", say); ok false
	// leaves the field to the default.
	Fields func(name string, n int) (value string, ok bool)

	n int
}

// Base is the time the filled times count from, in whole seconds (UTC),
// as every format molt writes keeps them exactly.
var Base = time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)

// Fill sets every exported field reachable from ptr, which must be a
// non-nil pointer: slices get two elements, maps one entry, pointers a
// filled value. It panics on a kind it does not know (channels,
// functions, interfaces), so a type that grows one is noticed.
func (f *Filler) Fill(ptr any) {
	v := reflect.ValueOf(ptr)
	if v.Kind() != reflect.Pointer || v.IsNil() {
		panic(fmt.Sprintf("filltest: Fill wants a non-nil pointer, got %T", ptr))
	}
	f.fill(v.Elem(), "")
}

// New returns a filled T.
func New[T any](f *Filler) T {
	var v T
	f.Fill(&v)
	return v
}

func (f *Filler) next() int {
	f.n++
	return f.n
}

func (f *Filler) fill(v reflect.Value, name string) {
	if gen, ok := f.Types[v.Type()]; ok {
		v.Set(reflect.ValueOf(gen(f.next())).Convert(v.Type()))
		return
	}
	if v.Type() == reflect.TypeFor[time.Time]() {
		v.Set(reflect.ValueOf(Base.Add(time.Duration(f.next()) * time.Second)))
		return
	}
	switch v.Kind() {
	case reflect.Bool:
		v.SetBool(true)
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		v.SetInt(int64(f.next()))
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		v.SetUint(uint64(f.next()))
	case reflect.Float32, reflect.Float64:
		v.SetFloat(float64(f.next()))
	case reflect.String:
		n := f.next()
		if f.Fields != nil {
			if s, ok := f.Fields(name, n); ok {
				v.SetString(s)
				return
			}
		}
		v.SetString(fmt.Sprintf("%s-%d", name, n))
	case reflect.Pointer:
		v.Set(reflect.New(v.Type().Elem()))
		f.fill(v.Elem(), name)
	case reflect.Slice:
		v.Set(reflect.MakeSlice(v.Type(), 2, 2))
		for i := range v.Len() {
			f.fill(v.Index(i), name)
		}
	case reflect.Map:
		v.Set(reflect.MakeMapWithSize(v.Type(), 1))
		k := reflect.New(v.Type().Key()).Elem()
		f.fill(k, name+"-key")
		e := reflect.New(v.Type().Elem()).Elem()
		f.fill(e, name)
		v.SetMapIndex(k, e)
	case reflect.Struct:
		for i := range v.NumField() {
			if sf := v.Type().Field(i); sf.IsExported() {
				f.fill(v.Field(i), sf.Name)
			}
		}
	default:
		panic(fmt.Sprintf("filltest: cannot fill %s (%s) of field %s", v.Type(), v.Kind(), name))
	}
}
