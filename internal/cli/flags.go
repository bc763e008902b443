package cli

import (
	"flag"
	"fmt"
	"strings"
)

// ParseOwn parses a subcommand's own flags (fs: --json, --status …) wherever they appear in
// args, as -name, --name, -name=value or -name value, and returns the other args in order: the
// service's configuration flags and the positional arguments, for the service's config loader.
// Asked for help, it prints fs's flags and leaves -h in place so the loader prints its own.
func ParseOwn(fs *flag.FlagSet, args []string) ([]string, error) {
	var own, rest []string
	for i := 0; i < len(args); i++ {
		arg := args[i]
		if arg == "--" {
			rest = append(rest, args[i:]...)
			break
		}
		name, hasValue := flagName(arg)
		if name == "h" || name == "help" {
			fmt.Fprintf(fs.Output(), "Flags of %s:\n", fs.Name())
			fs.PrintDefaults()
			rest = append(rest, arg)
			continue
		}
		f := fs.Lookup(name)
		if name == "" || f == nil {
			rest = append(rest, arg)
			continue
		}
		own = append(own, arg)
		if b, ok := f.Value.(interface{ IsBoolFlag() bool }); !hasValue && !(ok && b.IsBoolFlag()) && i+1 < len(args) {
			i++
			own = append(own, args[i])
		}
	}
	if err := fs.Parse(own); err != nil {
		return nil, err
	}
	return rest, nil
}

// flagName returns the name of the flag arg spells, "" when arg is not a flag.
func flagName(arg string) (name string, hasValue bool) {
	if len(arg) < 2 || arg[0] != '-' {
		return "", false
	}
	name = strings.TrimPrefix(arg[1:], "-")
	name, _, hasValue = strings.Cut(name, "=")
	return name, hasValue
}
