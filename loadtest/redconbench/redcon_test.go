package redconbench

import (
	"bytes"
	"fmt"
	"io"
	"testing"

	"github.com/tidwall/redcon"
)

// setStream is n SET commands of size-byte values, as a client sends them.
func setStream(n, size int) []byte {
	var b bytes.Buffer
	v := bytes.Repeat([]byte{'v'}, size)
	for i := range n {
		k := fmt.Sprintf("vllm@m@1@0@%08xkv_bytes", i)
		fmt.Fprintf(&b, "*3\r\n$3\r\nSET\r\n$%d\r\n%s\r\n$%d\r\n", len(k), k, size)
		b.Write(v)
		b.WriteString("\r\n")
	}
	return b.Bytes()
}

// BenchmarkRedconReadSetValue parses SET commands with redcon's reader and
// copies each value into a destination of its size (kvring's blob), the
// least a redcon-based kvring would do.
func BenchmarkRedconReadSetValue(b *testing.B) {
	for _, size := range []int{32 << 10, 256 << 10, 2 << 20} {
		b.Run(fmt.Sprintf("%dKiB", size>>10), func(b *testing.B) {
			const batch = 16
			stream := setStream(batch, size)
			dst := make([]byte, size)
			b.SetBytes(int64(batch * size))
			b.ResetTimer()
			for range b.N {
				rd := redcon.NewReader(bytes.NewReader(stream))
				for range batch {
					cmd, err := rd.ReadCommand()
					if err != nil {
						b.Fatal(err)
					}
					copy(dst, cmd.Args[2])
				}
				if _, err := rd.ReadCommand(); err != io.EOF {
					b.Fatalf("after the stream: %v", err)
				}
			}
		})
	}
}
