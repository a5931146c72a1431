package resp

import (
	"crypto/sha256"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"

	"github.com/kvring/kvring/store"
)

// TestLMCacheKeysMapToOneNamespacePerModelAndWorker checks the default key
// map on LMCache's keys: the namespace is the prefix before the chunk hash,
// a value and its metadata share a placement but not an id.
func TestLMCacheKeysMapToOneNamespacePerModelAndWorker(t *testing.T) {
	m := DefaultKeyMap()
	kv := m.Map([]byte("vllm@meta-llama/Llama-3.1-8B@1@0@1a2b3ckv_bytes"))
	meta := m.Map([]byte("vllm@meta-llama/Llama-3.1-8B@1@0@1a2b3cmetadata"))
	other := m.Map([]byte("vllm@meta-llama/Llama-3.1-8B@1@0@ffffkv_bytes"))
	if want := "resp:vllm:meta-llama/Llama-3.1-8B:1:0"; kv.Namespace != want || meta.Namespace != want {
		t.Fatalf("namespaces %q %q, want %q", kv.Namespace, meta.Namespace, want)
	}
	if kv.Place != meta.Place {
		t.Fatal("a value and its metadata are placed apart")
	}
	if kv.ID == meta.ID || kv.Place == other.Place {
		t.Fatal("distinct keys share an id, or distinct chunks a placement")
	}
	if w1 := m.Map([]byte("vllm@m@1@1@1a2b3ckv_bytes")); w1.Namespace == m.Map([]byte("vllm@m@1@0@1a2b3ckv_bytes")).Namespace {
		t.Fatal("two workers share a namespace")
	}
}

// TestHashTagsDecidePlacement checks that keys with the same hash tag share a
// placement whatever else they say.
func TestHashTagsDecidePlacement(t *testing.T) {
	m := DefaultKeyMap()
	a, b := m.Map([]byte("user:{42}:a")), m.Map([]byte("other{42}kv_bytes"))
	if a.Place != b.Place {
		t.Fatal("keys with one hash tag are placed apart")
	}
	if c := m.Map([]byte("user:{}:a")); c.Place == m.Map([]byte("user:{}:b")).Place {
		t.Fatal("an empty hash tag decided placement")
	}
}

// TestEveryKeyMapsToAValidNamespace feeds keys with bytes the registry does
// not allow in names, and a prefix longer than a name may be.
func TestEveryKeyMapsToAValidNamespace(t *testing.T) {
	m := DefaultKeyMap()
	for _, k := range []string{"plain", "@x", "a b\x00c@d", strings.Repeat("é", 300) + "@h", "x@y@z"} {
		ns := m.Map([]byte(k)).Namespace
		if err := store.ValidateNamespace(ns); err != nil || len(ns) > maxNamespaceName || !strings.HasPrefix(ns, NamespacePrefix) {
			t.Errorf("key %q → namespace %q: %v", k, ns, err)
		}
	}
	if ns := m.Map([]byte("plain")).Namespace; ns != "resp:default" {
		t.Errorf("key without separator → %q, want resp:default", ns)
	}
	long1 := m.Map([]byte(strings.Repeat("z", 300) + "1@h")).Namespace
	long2 := m.Map([]byte(strings.Repeat("z", 300) + "2@h")).Namespace
	if long1 == long2 {
		t.Error("two long prefixes that differ at the end share a namespace")
	}
}

// lmcacheLayouts are LMCache's chunk key layouts, as functions of a chunk
// hash (hex): today's (model first, dtype last), with a layer id, with
// tags, and the older one with its leading "vllm" format field.
var lmcacheLayouts = map[string]struct {
	key  func(h string) string
	want string
}{
	"model@world@worker@hash@dtype": {func(h string) string { return "Qwen/Qwen2.5-0.5B-Instruct@1@0@" + h + "@bfloat16" },
		"resp:Qwen/Qwen2.5-0.5B-Instruct:1:0:bfloat16"},
	"layer-wise": {func(h string) string { return "meta-llama/Llama-3.1-8B@2@1@" + h + "@half@17" },
		"resp:meta-llama/Llama-3.1-8B:2:1:half"},
	"tags": {func(h string) string { return "meta-llama/Llama-3.1-8B@1@0@" + h + "@bfloat16@user%alice" },
		"resp:meta-llama/Llama-3.1-8B:1:0:bfloat16:user_alice"},
	"vllm@model@world@worker@hash": {func(h string) string { return "vllm@meta-llama/Llama-3.1-8B@1@0@" + h },
		"resp:vllm:meta-llama/Llama-3.1-8B:1:0"},
}

// TestLMCacheLayoutsMapToOneNamespaceEach writes 100,000 distinct chunk keys
// of one model in each of LMCache's layouts, with both siblings, and finds
// exactly one namespace per layout: no per-chunk field lands in a name.
func TestLMCacheLayoutsMapToOneNamespaceEach(t *testing.T) {
	m := DefaultKeyMap()
	rng := rand.New(rand.NewPCG(1, 2))
	for name, l := range lmcacheLayouts {
		seen := map[string]int{}
		for i := range 100_000 {
			h := strconv.FormatUint(rng.Uint64(), 16)
			switch i % 4 {
			case 1:
				h = "-" + h // Python's f"{h:x}" of a negative hash
			case 2:
				h = fmt.Sprintf("%x", sha256.Sum256([]byte(h))) // a bytes hash, 64 digits
			}
			for _, sfx := range []string{"kv_bytes", "metadata"} {
				seen[m.Namespace([]byte(l.key(h)+sfx))]++
			}
		}
		if len(seen) != 1 || seen[l.want] != 200_000 {
			t.Errorf("layout %s: %d namespaces (%v), want only %q", name, len(seen), firstKeys(seen, 3), l.want)
		}
	}
}

func firstKeys(m map[string]int, n int) []string {
	var out []string
	for k := range m {
		if len(out) == n {
			break
		}
		out = append(out, k)
	}
	return out
}

// TestLMCacheNamespacesSeparateWorkersAndDtypes checks that what an engine
// cannot share stays apart: another worker, world size or dtype is another
// namespace.
func TestLMCacheNamespacesSeparateWorkersAndDtypes(t *testing.T) {
	m := DefaultKeyMap()
	base := m.Namespace([]byte("m@1@0@abc123@bfloat16kv_bytes"))
	for _, k := range []string{"m@1@1@abc123@bfloat16kv_bytes", "m@2@0@abc123@bfloat16kv_bytes",
		"m@1@0@abc123@halfkv_bytes", "n@1@0@abc123@bfloat16kv_bytes"} {
		if ns := m.Namespace([]byte(k)); ns == base {
			t.Errorf("%s shares namespace %s with m@1@0@...@bfloat16", k, ns)
		}
	}
}

// TestSiblingsShareTheirPlacementSlot checks Redis Cluster mode's placement
// of LMCache's keys without hash tags: "<k>metadata" is placed by the slot of
// "<k>kv_bytes", which is placed by its own, as other keys are.
func TestSiblingsShareTheirPlacementSlot(t *testing.T) {
	m := DefaultKeyMap()
	for i := range 1000 {
		k := fmt.Sprintf("Qwen/Qwen2.5-0.5B-Instruct@1@0@%x@bfloat16", i*7919)
		kv, meta := m.Map([]byte(k+"kv_bytes")), m.Map([]byte(k+"metadata"))
		if kv.PlaceSlot != kv.Slot || meta.PlaceSlot != kv.Slot {
			t.Fatalf("%s: kv_bytes placed by slot %d (own %d), metadata by %d", k, kv.PlaceSlot, kv.Slot, meta.PlaceSlot)
		}
	}
	if k := m.Map([]byte("plain")); k.PlaceSlot != k.Slot {
		t.Fatal("a key without siblings is not placed by its own slot")
	}
	if k := m.Map([]byte("{t}metadata")); k.PlaceSlot != Slot([]byte("t")) {
		t.Fatal("a key with a hash tag is not placed by its tag")
	}
}
