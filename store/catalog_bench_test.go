package store

import (
	"testing"
	"time"
)

// BenchmarkCatalogCommit: what one commit's catalog write costs, with 20,000
// chunks already recorded: "journal" is the path a commit takes (an append
// to the journal; folds are the background's, and counted here as they
// come due), "bbolt" the bbolt transaction per commit it replaced. Each
// commit records 4 chunks (a commit group of 4 puts).
func BenchmarkCatalogCommit(b *testing.B) {
	for _, mode := range []string{"journal", "bbolt"} {
		b.Run(mode, func(b *testing.B) {
			c, err := openCatalog(b.TempDir(), testConfig(b, 1<<20).Logger, time.Now)
			if err != nil {
				b.Fatal(err)
			}
			defer c.close()
			for i := range 5000 {
				for j := range 4 {
					queueChunk(c, uint32(i/64+1), int32(i%64*4+j), uint64(i*4+j))
				}
			}
			if err := c.flush(); err != nil {
				b.Fatal(err)
			}
			if err := c.fold(); err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; b.Loop(); i++ {
				for j := range 4 {
					queueChunk(c, uint32(i/64+1000), int32(i%64*4+j), uint64(1e6+i*4+j))
				}
				if mode == "bbolt" {
					ops := compactOps(c.pending)
					c.pending = nil
					if err := c.write(ops); err != nil {
						b.Fatal(err)
					}
					continue
				}
				if err := c.flush(); err != nil {
					b.Fatal(err)
				}
				if c.foldDue() {
					if err := c.fold(); err != nil {
						b.Fatal(err)
					}
				}
			}
		})
	}
}
