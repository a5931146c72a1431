package resp

import (
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
	long1 := m.Map([]byte(strings.Repeat("a", 300) + "1@h")).Namespace
	long2 := m.Map([]byte(strings.Repeat("a", 300) + "2@h")).Namespace
	if long1 == long2 {
		t.Error("two long prefixes that differ at the end share a namespace")
	}
}
