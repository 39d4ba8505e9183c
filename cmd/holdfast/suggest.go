package main

import (
	"flag"
	"fmt"
	"io"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"
)

// The command line's conventions: help on stdout with exit 0, a mistake in one line with a
// suggestion instead of the whole usage.

// usages are the help texts of the flag sets, printed where they are asked for.
var usages = map[*flag.FlagSet]func(w io.Writer){}

// distance is the edit distance of a and b (insertions, deletions, substitutions).
func distance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

// closest is the candidate nearest to s, if it is near enough to be a typo.
func closest(s string, candidates []string) (string, bool) {
	sort.Strings(candidates)
	best, bestD := "", 3
	for _, c := range candidates {
		if d := distance(s, c); d < bestD || (strings.HasPrefix(c, s) && len(s) >= 3 && bestD > 1) {
			best, bestD = c, min(d, 1)
		}
	}
	return best, best != ""
}

var (
	undefinedFlag = regexp.MustCompile(`^flag provided but not defined: -+(\S+)`)
	badValue      = regexp.MustCompile(`^invalid value "([^"]*)" for flag -+([^\s:]+)`)
)

// flagHint is one more line after the flag package's error: a near flag name, or the unit
// a duration needs.
func flagHint(fs *flag.FlagSet, err error) string {
	msg := err.Error()
	if m := undefinedFlag.FindStringSubmatch(msg); m != nil {
		var names []string
		fs.VisitAll(func(f *flag.Flag) { names = append(names, f.Name) })
		if c, ok := closest(m[1], names); ok {
			return fmt.Sprintf("did you mean --%s?", c)
		}
		return ""
	}
	if m := badValue.FindStringSubmatch(msg); m != nil {
		if f := fs.Lookup(m[2]); f != nil {
			if _, err := time.ParseDuration(f.DefValue); err == nil {
				if _, err := strconv.ParseFloat(m[1], 64); err == nil {
					return fmt.Sprintf("--%s needs a unit, e.g. %ss or %sms", m[2], m[1], m[1])
				}
			}
		}
	}
	return ""
}
