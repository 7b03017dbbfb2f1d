// Package envflag gives every flag of a command an environment fallback,
// so a systemd unit configures a binary with an EnvironmentFile instead of
// a command line: flag --heartbeat-interval of molt-agent reads
// MOLT_AGENT_HEARTBEAT_INTERVAL when it is not given. Only cmd/ uses it.
package envflag

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"strings"
)

// Name is the environment variable of flag name under prefix:
// prefix + the name upper-cased, dashes as underscores.
func Name(prefix, flagName string) string {
	return prefix + strings.ToUpper(strings.ReplaceAll(flagName, "-", "_"))
}

// Parse parses args, then sets every flag not given on the command line
// from its environment variable (Name) when that is set. A flag on the
// command line wins. Bad values name the variable.
func Parse(fs *flag.FlagSet, args []string, prefix string) error {
	if err := fs.Parse(args); err != nil {
		return err
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	var errs []error
	fs.VisitAll(func(f *flag.Flag) {
		if set[f.Name] {
			return
		}
		env := Name(prefix, f.Name)
		if v, ok := os.LookupEnv(env); ok {
			if err := f.Value.Set(v); err != nil {
				errs = append(errs, fmt.Errorf("%s: %w", env, err))
			}
		}
	})
	return errors.Join(errs...)
}
