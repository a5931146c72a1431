package resp

import (
	"bytes"
	"fmt"
	"testing"
)

// setStream is n SET commands of size-byte values, as a client sends them
// (the same stream as loadtest/redconbench's).
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

// BenchmarkReadSetValue parses SET commands as the server does: each value
// read straight into a shared-memory blob (created and freed per command,
// as a SET does). Compare with loadtest/redconbench's
// BenchmarkRedconReadSetValue on the same stream.
func BenchmarkReadSetValue(b *testing.B) {
	st := testStore(b, 256<<20)
	lim := limits{maxArgs: 1024, maxArgLen: 64 << 10, maxArgBytes: 1 << 20, maxInline: 64 << 10,
		maxValue: st.MaxChunkSize(), maxValues: 256 << 20}
	for _, size := range []int{32 << 10, 256 << 10, 2 << 20} {
		b.Run(fmt.Sprintf("%dKiB", size>>10), func(b *testing.B) {
			const batch = 16
			stream := setStream(batch, size)
			b.SetBytes(int64(batch * size))
			b.ResetTimer()
			for range b.N {
				rd := newReader(bytes.NewReader(stream), 64<<10, lim)
				for range batch {
					req, err := rd.read(st.CreateBlob, nil)
					if err != nil || len(req.values) != 1 || req.values[0].value == nil {
						b.Fatalf("read: %v", err)
					}
					req.free()
				}
			}
		})
	}
}
