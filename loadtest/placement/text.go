package placement

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/cespare/xxhash/v2"
	"github.com/kvring/kvring/client"
	"github.com/kvring/kvring/ring"
)

// WordsPerChunk is how many words of a text prompt make one chunk: a word stands for a token.
const WordsPerChunk = 16

// textLine is one line of an AIBrix workload file: a timestamp and the requests sent at it.
type textLine struct {
	Timestamp *int64 `json:"timestamp"`
	Requests  []struct {
		Prompt *string `json:"prompt"`
	} `json:"requests"`
}

// FromTextPrompts turns text prompts into a Workload: each prompt is split on white space into runs of
// WordsPerChunk words (the last run may be shorter), each word becomes a token id (the low 32 bits of its
// xxHash64) and the runs are chain-hashed with client.NextChunkID from the zero id, as the SDK names chunks.
func FromTextPrompts(name string, prompts []string, cfg ring.Config, namespace string) (*Workload, error) {
	part, err := newPartitioner(cfg, namespace)
	if err != nil {
		return nil, fmt.Errorf("cannot build workload %q: %w", name, err)
	}
	w := &Workload{Name: name, Prompts: make([][]int32, len(prompts)), Partitions: cfg.PartitionCount}
	index := make(map[client.ChunkID]int32)
	tokens := make([]uint32, 0, WordsPerChunk)
	for r, text := range prompts {
		words := strings.Fields(text)
		prompt := make([]int32, 0, (len(words)+WordsPerChunk-1)/WordsPerChunk)
		var id client.ChunkID
		for start := 0; start < len(words); start += WordsPerChunk {
			tokens = tokens[:0]
			for _, word := range words[start:min(start+WordsPerChunk, len(words))] {
				tokens = append(tokens, uint32(xxhash.Sum64String(word)))
			}
			id = client.NextChunkID(id, tokens)
			i, ok := index[id]
			if !ok {
				i = int32(len(w.Parts))
				index[id] = i
				w.Parts = append(w.Parts, part.partition(id))
			}
			prompt = append(prompt, i)
		}
		w.Prompts[r] = prompt
	}
	return w, nil
}

// ReadTextPrompts reads the prompts of an AIBrix workload file (JSONL; each line a timestamp and a list of
// requests with a "prompt" field), in file order.
func ReadTextPrompts(r io.Reader) ([]string, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), 64<<20)
	var prompts []string
	for n := 1; sc.Scan(); n++ {
		b := sc.Bytes()
		if len(strings.TrimSpace(string(b))) == 0 {
			continue
		}
		var l textLine
		if err := json.Unmarshal(b, &l); err != nil {
			return nil, fmt.Errorf("cannot parse line %d: %w", n, err)
		}
		if l.Timestamp == nil || l.Requests == nil {
			return nil, fmt.Errorf("line %d: missing timestamp or requests", n)
		}
		for i, req := range l.Requests {
			if req.Prompt == nil {
				return nil, fmt.Errorf("line %d: request %d has no prompt", n, i)
			}
			prompts = append(prompts, *req.Prompt)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("cannot read prompts: %w", err)
	}
	return prompts, nil
}

// TextPromptsFile reads an AIBrix workload file and builds its Workload (see FromTextPrompts).
func TextPromptsFile(name, path string, cfg ring.Config, namespace string) (*Workload, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("cannot open workload %q at %q: %w", name, path, err)
	}
	defer f.Close()
	prompts, err := ReadTextPrompts(f)
	if err != nil {
		return nil, fmt.Errorf("cannot read workload %q at %q: %w", name, path, err)
	}
	return FromTextPrompts(name, prompts, cfg, namespace)
}
