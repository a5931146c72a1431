package placement

import (
	"slices"
	"strings"
	"testing"

	"github.com/kvring/kvring/loadtest/trace"
	"github.com/kvring/kvring/ring"
)

func TestFromMooncakeSplitsBlocksInto16TokenChunks(t *testing.T) {
	t.Parallel()
	reqs := []trace.Request{
		{InputLength: 600, HashIDs: []int64{7, 8}}, // 512 + 88 tokens: 32 + 6 chunks
		{InputLength: 512, HashIDs: []int64{7}},
	}
	w, err := FromMooncake("m", reqs, ring.DefaultConfig(), DefaultNamespace)
	if err != nil {
		t.Fatal(err)
	}
	if len(w.Prompts[0]) != 38 || len(w.Prompts[1]) != 32 {
		t.Fatalf("prompt lengths %d, %d; want 38, 32", len(w.Prompts[0]), len(w.Prompts[1]))
	}
	if !slices.Equal(w.Prompts[0][:32], w.Prompts[1]) {
		t.Fatal("requests sharing block 7 do not share its 32 chunks")
	}
	if w.References() != 70 {
		t.Fatalf("References() = %d, want 70", w.References())
	}
	for _, p := range w.Parts {
		if p < 0 || int(p) >= ring.DefaultPartitionCount {
			t.Fatalf("partition %d out of range", p)
		}
	}
}

func TestFromTextPromptsChainsRunsOfWords(t *testing.T) {
	t.Parallel()
	shared := strings.Repeat("w ", WordsPerChunk)
	prompts := []string{shared + "x", shared + "y z", "x " + shared}
	w, err := FromTextPrompts("t", prompts, ring.DefaultConfig(), DefaultNamespace)
	if err != nil {
		t.Fatal(err)
	}
	p := w.Prompts
	if len(p[0]) != 2 || len(p[1]) != 2 || len(p[2]) != 2 {
		t.Fatalf("prompt lengths %d %d %d, want 2 each", len(p[0]), len(p[1]), len(p[2]))
	}
	if p[0][0] != p[1][0] || p[0][1] == p[1][1] {
		t.Fatalf("prompts %v and %v: want the first chunk shared and the second distinct", p[0], p[1])
	}
	if p[2][0] == p[0][0] {
		t.Fatal("a prompt with a different first run shares its first chunk")
	}
	if len(w.Parts) != 5 {
		t.Fatalf("%d distinct chunks, want 5", len(w.Parts))
	}
}

func TestReadTextPromptsRejectsMissingPrompt(t *testing.T) {
	t.Parallel()
	got, err := ReadTextPrompts(strings.NewReader(`{"timestamp": 1, "requests": [{"prompt": "a b"}, {"prompt": "c"}]}` + "\n\n"))
	if err != nil || !slices.Equal(got, []string{"a b", "c"}) {
		t.Fatalf("ReadTextPrompts = %v, %v", got, err)
	}
	if _, err := ReadTextPrompts(strings.NewReader(`{"timestamp": 1, "requests": [{}]}`)); err == nil {
		t.Fatal("a request without a prompt was accepted")
	}
}
