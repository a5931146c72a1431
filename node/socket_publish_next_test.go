package node

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"testing"

	"github.com/kvring/kvring/client/local"
)

// TestSocketPublishCreatesTheNextBlobs: a publish with create_sizes seals,
// publishes and deletes its blobs, then hands out new unsealed blobs in the
// same reply; they are written (WriteAt) and published like any other.
// When only the creation fails (a size the node cannot place) the publish
// stands: its results come back with the error, the chunk is readable and
// no blob is left behind.
func TestSocketPublishCreatesTheNextBlobs(t *testing.T) {
	t.Parallel()
	for _, framing := range []string{"binary", "JSON"} {
		t.Run(framing, func(t *testing.T) {
			t.Parallel()
			n, c, ns := socketNode(t, "next-blobs")
			if framing == "JSON" {
				c = socketClient(t, n, local.Config{Path: n.cfg.Socket.Path, JSON: true})
			}
			testPublishCreatesTheNextBlobs(t, n, c, ns)
		})
	}
}

// socketClient dials a second client to n's socket with cfg.
func socketClient(t *testing.T, n *Node, cfg local.Config) *local.Client {
	t.Helper()
	c, err := local.Dial(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func testPublishCreatesTheNextBlobs(t *testing.T, n *Node, c *local.Client, ns local.Namespace) {
	const size = 1 << 20
	b, err := c.CreateBlob(size)
	if err != nil {
		t.Fatal(err)
	}
	var want [][]byte
	var ids [][32]byte
	for i := range 3 {
		data := bytes.Repeat([]byte{byte(i + 1), 7, 9}, size/3+1)[:size]
		if k, err := b.WriteAt(data[:size/2+5], 0); err != nil || k != size/2+5 {
			t.Fatalf("WriteAt: %d %v", k, err)
		}
		if _, err := b.WriteAt(data[size/2+5:], size/2+5); err != nil {
			t.Fatal(err)
		}
		id := sha256.Sum256([]byte{'n', byte(i)})
		next := []int64{size}
		if i == 2 {
			next = nil // the last: nothing more to create
		}
		res, bs, err := c.SealPublishAndCreate(ns, [][32]byte{id}, []uint64{b.ID}, nil, next)
		if err != nil || len(res) != 1 || res[0].Status != "stored" || len(bs) != len(next) {
			t.Fatalf("publish %d: %+v, %d blobs, %v", i, res, len(bs), err)
		}
		want, ids = append(want, data), append(ids, id)
		if len(bs) > 0 {
			if bs[0].Sealed || len(bs[0].Data) != size {
				t.Fatalf("next blob: sealed %v, %d bytes", bs[0].Sealed, len(bs[0].Data))
			}
			b = bs[0]
		}
	}
	if st := n.Store().Stats(); st.BlobBytes != 0 {
		t.Fatalf("blob bytes %d once every blob is published", st.BlobBytes)
	}
	got, err := c.GetChunks(ns, ids, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range got {
		if !r.Found || !bytes.Equal(r.Blob.Data, want[i]) {
			t.Fatalf("chunk %d: found %v, bytes equal %v", i, r.Found, r.Found && bytes.Equal(r.Blob.Data, want[i]))
		}
	}
	if lr, err := c.Lookup(ns, ids, nil, 1000); err != nil || lr.Held != len(ids) || lr.LeaseID == 0 {
		t.Fatalf("lookup with a pin: %+v %v; want all %d held under a lease", lr, err, len(ids))
	}

	b, err = c.CreateBlob(4096)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.WriteAt(make([]byte, 10), 4090); !errors.Is(err, local.ErrOutOfRange) {
		t.Fatalf("WriteAt past the end: %v, want ErrOutOfRange", err)
	}
	id := sha256.Sum256([]byte("too large next"))
	res, bs, err := c.SealPublishAndCreate(ns, [][32]byte{id}, []uint64{b.ID}, nil, []int64{size, 1 << 40})
	var e *local.Error
	if !errors.As(err, &e) || e.Code != 41 || len(res) != 1 || res[0].Status != "stored" || bs != nil {
		t.Fatalf("publish with a next blob too large: %+v, %v, %v; want the result and error 41", res, bs, err)
	}
	if got, err := c.GetChunks(ns, [][32]byte{id}, nil); err != nil || !got[0].Found {
		t.Fatalf("the chunk published with a failed creation: %+v %v", got, err)
	}
	if st := n.Store().Stats(); st.BlobBytes != 0 {
		t.Fatalf("blob bytes %d after a creation that failed: the blobs it made must be freed", st.BlobBytes)
	}
}
