package cli

import (
	"slices"
	"strings"

	"github.com/spf13/pflag"
)

// GivenFlags returns the settings given on fs, by long name, with their
// values as the flags hold them, but those skip names.
func GivenFlags(fs *pflag.FlagSet, skip []string) map[string][]string {
	m := map[string][]string{}
	fs.Visit(func(fl *pflag.Flag) {
		if !slices.Contains(skip, fl.Name) {
			m[fl.Name] = FlagValues(fl)
		}
	})
	return m
}

// FlagValues is what fl holds: the list of a repeatable flag, else its
// one value.
func FlagValues(fl *pflag.Flag) []string {
	if sv, ok := fl.Value.(pflag.SliceValue); ok {
		return sv.GetSlice()
	}
	return []string{fl.Value.String()}
}

// FlagText is a flag and its values as a command line would give them.
func FlagText(name string, values []string) string {
	var parts []string
	for _, v := range values {
		parts = append(parts, "--"+name+" "+v)
	}
	if len(parts) == 0 {
		return "no --" + name
	}
	return strings.Join(parts, " ")
}
