package ring_test

import (
	"crypto/sha256"
	"fmt"

	"github.com/kvring/kvring/ring"
)

func Example() {
	cfg := ring.DefaultConfig()
	cfg.ReplicationFactor = 2 // namespaces may ask for up to 2 owners
	if err := cfg.Validate(); err != nil {
		panic(err)
	}
	members := []ring.Member{
		{ID: "node-c", Addr: "10.0.0.3:9600"},
		{ID: "node-a", Addr: "10.0.0.1:9600"},
		{ID: "node-b", Addr: "10.0.0.2:9600"},
	}
	r, err := ring.New(members, 1, cfg)
	if err != nil {
		panic(err)
	}

	id := sha256.Sum256([]byte("chunk-0")) // chunk ids are 32 bytes
	for _, m := range r.Owners("llama3-8b/bf16/16/tp0", id[:], 2) {
		fmt.Println("owner", m.ID, m.Addr)
	}

	// A join builds a new snapshot; about 1/4 of the partitions change primary, ideally all to node-d.
	bigger, err := ring.New(append(members, ring.Member{ID: "node-d", Addr: "10.0.0.4:9600"}), 2, cfg)
	if err != nil {
		panic(err)
	}
	fmt.Printf("epoch %d → %d: %d of %d partitions moved\n",
		r.Epoch(), bigger.Epoch(), ring.Moved(r, bigger), cfg.PartitionCount)
	// Output:
	// owner node-a 10.0.0.1:9600
	// owner node-b 10.0.0.2:9600
	// epoch 1 → 2: 18161 of 65521 partitions moved
}
