package preflight

import (
	"fmt"
	"maps"
	"slices"
	"strings"
)

// maxNamed bounds how many items a message lists; Data has them all.
const maxNamed = 10

func pass(msg string, data map[string]string) Result {
	return Result{Status: Pass, Message: msg, Data: data}
}

func warn(msg string, data map[string]string) Result {
	return Result{Status: Warn, Message: msg, Data: data}
}

func fail(msg string, data map[string]string) Result {
	return Result{Status: Fail, Message: msg, Data: data}
}

// missing is the failure of a check whose data was not gathered.
func missing(what string) Result {
	return fail("cannot check: "+what, nil)
}

// nameList renders sorted names, at most maxNamed of them, for a message.
func nameList(names []string) string {
	s := slices.Sorted(slices.Values(names))
	if len(s) <= maxNamed {
		return strings.Join(s, ", ")
	}
	return fmt.Sprintf("%s and %d more", strings.Join(s[:maxNamed], ", "), len(s)-maxNamed)
}

// describe renders "key (value)" pairs of m, sorted by key, for a message.
func describe(m map[string]string) string {
	keys := slices.Sorted(maps.Keys(m))
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		parts = append(parts, k+" ("+m[k]+")")
	}
	return nameList(parts)
}

func plural(n int, one, many string) string {
	if n == 1 {
		return fmt.Sprintf("%d %s", n, one)
	}
	return fmt.Sprintf("%d %s", n, many)
}
