package reflector

import (
	"slices"
	"strconv"
)

func itoa(i int) string { return strconv.Itoa(i) }

func sorted(s []string) []string {
	s = slices.Clone(s)
	slices.Sort(s)
	return s
}
