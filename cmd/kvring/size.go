package main

import (
	"fmt"
	"math"
	"os"
	"strconv"
	"strings"

	"github.com/spf13/pflag"
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

// sizeVar defines a size flag (byteSize's syntax) bound to *p, whose
// default is *p. An int field takes at most 2 GiB - 1 (gRPC's and
// net/http's limits are ints that size buffers).
func sizeVar[T int | int64](fs *pflag.FlagSet, p *T, name, usage string) {
	fs.Var(sizeValue[T]{p}, name, usage)
}

// sizeValue is a size flag bound to an int or int64 config field.
type sizeValue[T int | int64] struct{ p *T }

func (s sizeValue[T]) String() string {
	b := byteSize(*s.p)
	return b.String()
}

func (s sizeValue[T]) Set(v string) error {
	var b byteSize
	if err := b.Set(v); err != nil {
		return err
	}
	n := int64(b)
	if _, isInt := any(*s.p).(int); isInt {
		n = min(n, math.MaxInt32)
	}
	*s.p = T(n)
	return nil
}

func (s sizeValue[T]) Type() string { return "size" }

// fileMode is a flag of octal permission bits (--socket-mode 0660) bound to
// an os.FileMode field. Its Type is "string", as the flag's help has always
// shown it.
type fileMode os.FileMode

func (m *fileMode) String() string { return fmt.Sprintf("%04o", uint32(*m)) }

func (m *fileMode) Set(s string) error {
	v, err := strconv.ParseUint(s, 8, 32)
	if err != nil || v == 0 || v > 0o777 {
		return fmt.Errorf("%q: want octal permission bits such as 0660", s)
	}
	*m = fileMode(v)
	return nil
}

func (m *fileMode) Type() string { return "string" }
