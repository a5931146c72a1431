package localsock

import (
	"bytes"
	"strconv"
)

func bytesReader(b []byte) *bytes.Reader { return bytes.NewReader(b) }
func itoa(n int) string                  { return strconv.Itoa(n) }
