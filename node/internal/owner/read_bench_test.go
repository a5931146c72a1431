package owner

import (
	"fmt"
	"testing"

	kvringv1 "github.com/kvring/kvring/proto/kvring/v1"
	"github.com/kvring/kvring/store"
	"github.com/kvring/kvring/transfer"
)

// BenchmarkSend reads a held chunk out of the store as a get does (Send)
// and hands each frame to the codec as gRPC would, then reads the encoded
// frame once more, as gRPC's writer copies it into its write buffer: the
// owner's CPU per chunk read, without the network.
//
//	go test -run '^$' -bench Send -benchtime 2000x ./node/internal/owner/
func BenchmarkSend(b *testing.B) {
	for _, size := range []int{256 << 10, 2 << 20} {
		b.Run(fmt.Sprintf("%dKiB", size>>10), func(b *testing.B) {
			o, st, _ := newTestOwnerSized(b, 64<<20)
			ids := make([]store.ID, 16)
			data := make([]byte, size)
			for i := range ids {
				ids[i][0], ids[i][1] = 5, byte(i)
				data[0] = byte(i)
				sealChunk(b, st, "ns", ids[i], data)
			}
			codec := transfer.NewCodec()
			wbuf := make([]byte, 1<<20)
			send := func(h *kvringv1.ChunkHeader, f *transfer.EncodedFrame) error {
				if h != nil {
					return nil
				}
				bs, err := codec.Marshal(f)
				if err != nil {
					return err
				}
				for _, buf := range bs {
					copy(wbuf, buf.ReadOnlyData())
				}
				bs.Free()
				return nil
			}
			b.SetBytes(int64(size))
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				if _, readErr, err := o.Send("ns", ids[i%len(ids)], 0, nil, send); readErr != nil || err != nil {
					b.Fatal(readErr, err)
				}
				i++
			}
		})
	}
}
