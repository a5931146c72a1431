package main

import (
	"os"
	"strconv"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

// FuzzByteSize parses arbitrary text as a size flag (--memory-limit,
// --max-chunk-size, and their environment variables and YAML keys). A size
// it accepts is in [0, 2^62] and prints as text that parses back to the same
// size; plain digits mean bytes; anything it rejects leaves the flag as it
// was.
func FuzzByteSize(f *testing.F) {
	for _, s := range []string{"1GiB", "512MiB", "64M", "1048576", "0", "-1", " 1 KiB ", "1.5GiB", "", "GiB",
		"4611686018427387904", "4611686018427387905", "4194304TiB", "4194305TiB", "1e9", "+5", "0x10", "10kib", "7B", "9223372036854775807"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		const before = byteSize(12345)
		s := before
		if err := s.Set(in); err != nil {
			if s != before {
				t.Fatalf("Set(%q) failed (%v) but changed the size to %d", in, err, s)
			}
			return
		}
		if s < 0 || s > 1<<62 {
			t.Fatalf("Set(%q) = %d, outside [0, 2^62]", in, s)
		}
		if n, err := strconv.ParseInt(strings.TrimSpace(in), 10, 64); err == nil && byteSize(n) != s {
			t.Fatalf("Set(%q) = %d, want the plain number %d", in, s, n)
		}
		printed := s.String()
		var back byteSize
		if err := back.Set(printed); err != nil || back != s {
			t.Fatalf("Set(%q) = %d prints as %q, which parses as %d (%v)", in, s, printed, back, err)
		}
	})
}

// FuzzConfigFile feeds arbitrary bytes to the --config file parser with the
// real command tree. It must never panic; when it accepts a file, the file is
// empty or a mapping whose keys are all kvring flags, none twice, and each
// key that is a serve flag has been set (unless its environment variable
// wins); when it rejects one, the error names the file.
func FuzzConfigFile(f *testing.F) {
	for _, s := range []string{
		"",
		"# nothing\n",
		"memory-limit: 4GiB\njoin: [a:7946, b:7946]\nrejoin-interval: 30s\n",
		"grpc-addr: :9600\nadmin-addr: 127.0.0.1:0\npprof: true\nlog-format: json\n",
		"join: a:1,b:2\nreplication: 2\nmin-replicas: 1\n",
		"memroy-limit: 1GiB\n",
		"memory-limit: lots\n",
		"admin-addr: [a, b]\n",
		"admin-addr: {x: 1}\n",
		"admin-addr:\n",
		"- a\n- b\n",
		"admin-addr: a\nadmin-addr: b\n",
		"config: other.yaml\n",
		"a: &x 1GiB\nmemory-limit: *x\n",
		"memory-limit: &x 1GiB\nmax-chunk-size: *x\n",
		"join: &l [a:1]\nseeds: *l\n",
		"? [a]\n: b\n",
		"<<: {memory-limit: 1GiB}\n",
		"max-batch: !!binary aGVsbG8=\n",
		"join: [[a]]\n",
		"--- \nmemory-limit: 1GiB\n---\nmemory-limit: 2GiB\n",
		"admin-addr: [\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		root := newRootCmd()
		serve, _, err := root.Find([]string{"serve"})
		if err != nil {
			t.Fatal(err)
		}
		fs := serve.Flags()
		known := flagNames(root)
		err = applyConfig(fs, "fuzz.yaml", b, known)
		if err != nil {
			if !strings.Contains(err.Error(), "fuzz.yaml") {
				t.Fatalf("error %q does not name the file", err)
			}
			return
		}
		var doc yaml.Node
		if yerr := yaml.Unmarshal(b, &doc); yerr != nil {
			t.Fatalf("accepted a file yaml cannot parse: %v", yerr)
		}
		if len(doc.Content) == 0 {
			return
		}
		top := doc.Content[0]
		if top.Kind != yaml.MappingNode {
			t.Fatalf("accepted a file whose top level is kind %v, not a mapping", top.Kind)
		}
		seen := map[string]bool{}
		for i := 0; i+1 < len(top.Content); i += 2 {
			key := top.Content[i].Value
			if !known[key] || key == configFlag || seen[key] {
				t.Fatalf("accepted key %q (known %v, seen %v)", key, known[key], seen[key])
			}
			seen[key] = true
			if fl := fs.Lookup(key); fl != nil && !fl.Changed {
				if _, env := os.LookupEnv(envName(key)); !env {
					t.Fatalf("accepted key %q but did not set the flag", key)
				}
			}
		}
	})
}
