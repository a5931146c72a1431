package main

import (
	"fmt"
	"strconv"
	"strings"
)

// byteSize is a flag value for sizes such as 1GiB, 512MiB, 64M or 1048576.
type byteSize int64

var sizeUnits = []struct {
	suffix string
	mult   int64
}{
	{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}, {"TiB", 1 << 40},
	{"KB", 1000}, {"MB", 1000 * 1000}, {"GB", 1000 * 1000 * 1000}, {"TB", 1000 * 1000 * 1000 * 1000},
	{"K", 1 << 10}, {"M", 1 << 20}, {"G", 1 << 30}, {"T", 1 << 40}, {"B", 1},
}

func (s *byteSize) String() string {
	n := int64(*s)
	for _, u := range []struct {
		suffix string
		mult   int64
	}{{"TiB", 1 << 40}, {"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}} {
		if n >= u.mult && n%u.mult == 0 {
			return fmt.Sprintf("%d%s", n/u.mult, u.suffix)
		}
	}
	return strconv.FormatInt(n, 10)
}

func (s *byteSize) Set(v string) error {
	v = strings.TrimSpace(v)
	mult := int64(1)
	num := v
	for _, u := range sizeUnits {
		if strings.HasSuffix(v, u.suffix) {
			mult, num = u.mult, strings.TrimSpace(strings.TrimSuffix(v, u.suffix))
			break
		}
	}
	n, err := strconv.ParseInt(num, 10, 64)
	if err != nil || n < 0 {
		return fmt.Errorf("size %q is not a non-negative number with an optional unit (KiB, MiB, GiB, ...)", v)
	}
	if n > (1<<62)/mult {
		return fmt.Errorf("size %q is too large", v)
	}
	*s = byteSize(n * mult)
	return nil
}

func (s *byteSize) Type() string { return "size" }
