// Package filltest fills every exported field of a value, at any depth,
// with a distinct non-zero value. Conversion tests use it: a value filled
// this way and converted there and back comes back equal only if the
// conversion carried every field, so a field added to one side and not
// converted fails the test without anyone listing fields by hand.
package filltest

import (
	"fmt"
	"hash/fnv"
	"reflect"
	"time"
)

// Filler fills values; its zero value is ready to use. Each filled leaf
// gets a number derived from its path in the value (".Pools[1].Name"), so
// no two leaves are likely to share a value, a conversion that swaps two
// fields is caught too, and a field added to a type changes no other
// field's value: golden files of filled values only grow.
type Filler struct {
	// Types gives the value of every field of a type whose values must be
	// valid (a version, say), from the leaf's number.
	Types map[reflect.Type]func(n int) any
	// Fields gives the value of a string field by its name, for fields
	// that hold a structured string (a version as "1.N.X", say); ok false
	// leaves the field to the default.
	Fields func(name string, n int) (value string, ok bool)
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
	f.fill(v.Elem(), "", "")
}

// New returns a filled T.
func New[T any](f *Filler) T {
	var v T
	f.Fill(&v)
	return v
}

// number is the leaf's number: from 1 to 99,999, a function of its path.
func number(path string) int {
	h := fnv.New32a()
	h.Write([]byte(path))
	return int(h.Sum32()%99_999) + 1
}

// fill fills v, the field name of path (the last struct field on it).
func (f *Filler) fill(v reflect.Value, path, name string) {
	n := number(path)
	if gen, ok := f.Types[v.Type()]; ok {
		v.Set(reflect.ValueOf(gen(n)).Convert(v.Type()))
		return
	}
	if v.Type() == reflect.TypeFor[time.Time]() {
		v.Set(reflect.ValueOf(Base.Add(time.Duration(n) * time.Second)))
		return
	}
	switch v.Kind() {
	case reflect.Bool:
		v.SetBool(true)
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		v.SetInt(int64(n))
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		v.SetUint(uint64(n))
	case reflect.Float32, reflect.Float64:
		v.SetFloat(float64(n))
	case reflect.String:
		if f.Fields != nil {
			if s, ok := f.Fields(name, n); ok {
				v.SetString(s)
				return
			}
		}
		v.SetString(fmt.Sprintf("%s-%d", name, n))
	case reflect.Pointer:
		v.Set(reflect.New(v.Type().Elem()))
		f.fill(v.Elem(), path, name)
	case reflect.Slice:
		v.Set(reflect.MakeSlice(v.Type(), 2, 2))
		for i := range v.Len() {
			f.fill(v.Index(i), fmt.Sprintf("%s[%d]", path, i), name)
		}
	case reflect.Map:
		v.Set(reflect.MakeMapWithSize(v.Type(), 1))
		k := reflect.New(v.Type().Key()).Elem()
		f.fill(k, path+"{}", name+"-key")
		e := reflect.New(v.Type().Elem()).Elem()
		f.fill(e, path+"[]", name)
		v.SetMapIndex(k, e)
	case reflect.Struct:
		for i := range v.NumField() {
			if sf := v.Type().Field(i); sf.IsExported() {
				f.fill(v.Field(i), path+"."+sf.Name, sf.Name)
			}
		}
	default:
		panic(fmt.Sprintf("filltest: cannot fill %s (%s) at %s", v.Type(), v.Kind(), path))
	}
}
