package trace

import (
	"bytes"
	_ "embed"
)

// builtinSynthetic is testdata/synthetic_trace.jsonl, the synthetic request trace of the Mooncake FAST'25
// release (kvcache-ai/Mooncake, Apache License 2.0: testdata/LICENSE-APACHE.mooncake; origin and format in
// testdata/README.mooncake-FAST25.md). It is read-only.
//
//go:embed testdata/synthetic_trace.jsonl
var builtinSynthetic []byte

// BuiltinSyntheticName names the trace ReadBuiltinSynthetic returns, for reports and help texts.
const BuiltinSyntheticName = "Mooncake FAST'25 synthetic_trace.jsonl (built in; Apache-2.0, kvcache-ai/Mooncake)"

// ReadBuiltinSynthetic returns the requests of the Mooncake FAST'25 synthetic trace, which is built into every
// binary that imports this package (1.1 MB), so a program can replay it with no file around it. It returns a
// new slice on every call; safe for concurrent use.
func ReadBuiltinSynthetic() ([]Request, error) { return Read(bytes.NewReader(builtinSynthetic)) }
