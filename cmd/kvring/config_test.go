package main

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/spf13/cobra"
)

// configTestRoot is a command tree shaped like kvring's: a persistent
// --config, a command "a" with a size, a list, a string and a bool flag, and a
// command "b" with a flag of its own. Running "a" records what loadFlags
// settled.
type configTestResult struct {
	mem   byteSize
	join  []string
	admin string
	json  bool
}

func runConfigTestRoot(t *testing.T, args ...string) (configTestResult, error) {
	t.Helper()
	var got configTestResult
	root := &cobra.Command{Use: "kvring", SilenceUsage: true, SilenceErrors: true}
	root.PersistentFlags().String(configFlag, "", "")
	a := &cobra.Command{Use: "a", RunE: func(cmd *cobra.Command, _ []string) error { return loadFlags(cmd) }}
	got.mem = 1 << 20
	a.Flags().Var(&got.mem, "memory-limit", "")
	a.Flags().StringSliceVar(&got.join, "join", nil, "")
	a.Flags().StringVar(&got.admin, "admin", "default", "")
	a.Flags().BoolVar(&got.json, "json", false, "")
	b := &cobra.Command{Use: "b", RunE: func(*cobra.Command, []string) error { return nil }}
	b.Flags().String("only-b", "", "")
	root.AddCommand(a, b)
	root.SetArgs(args)
	err := root.Execute()
	return got, err
}

func writeConfig(t *testing.T, text string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "kvring.yaml")
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestConfigFileLosesToEnvironmentWhichLosesToFlags checks the precedence
// flag > KVRING_* > file > default, one layer at a time.
func TestConfigFileLosesToEnvironmentWhichLosesToFlags(t *testing.T) {
	path := writeConfig(t, "memory-limit: 1GiB\nadmin: from-file\njoin: [s1:7946, s2:7946]\njson: true\nonly-b: x\n")

	got, err := runConfigTestRoot(t, "a", "--config", path)
	if err != nil {
		t.Fatal(err)
	}
	if got.mem != 1<<30 || got.admin != "from-file" || !slices.Equal(got.join, []string{"s1:7946", "s2:7946"}) || !got.json {
		t.Fatalf("file alone: %+v", got)
	}

	t.Setenv("KVRING_MEMORY_LIMIT", "2GiB")
	t.Setenv("KVRING_JOIN", "e1:7946")
	got, err = runConfigTestRoot(t, "a", "--config", path)
	if err != nil {
		t.Fatal(err)
	}
	if got.mem != 2<<30 || !slices.Equal(got.join, []string{"e1:7946"}) || got.admin != "from-file" {
		t.Fatalf("environment over file: %+v", got)
	}

	got, err = runConfigTestRoot(t, "a", "--config", path, "--memory-limit", "3GiB", "--join", "f1:7946")
	if err != nil {
		t.Fatal(err)
	}
	if got.mem != 3<<30 || !slices.Equal(got.join, []string{"f1:7946"}) || got.admin != "from-file" {
		t.Fatalf("flags over environment: %+v", got)
	}

	t.Setenv("KVRING_CONFIG", path)
	os.Unsetenv("KVRING_MEMORY_LIMIT")
	os.Unsetenv("KVRING_JOIN")
	if got, err = runConfigTestRoot(t, "a"); err != nil || got.mem != 1<<30 {
		t.Fatalf("file named by KVRING_CONFIG: %+v %v", got, err)
	}
}

// TestConfigFileErrorsNameTheProblem: unknown keys, values of the wrong
// shape and unreadable files are errors naming the key or the file; keys of
// another command's flags are accepted.
func TestConfigFileErrorsNameTheProblem(t *testing.T) {
	cases := []struct {
		text string
		want string // "" for no error
	}{
		{"", ""},
		{"# nothing\n", ""},
		{"only-b: x\n", ""},
		{"join: a:1,b:2\n", ""},
		{"memroy-limit: 1GiB\n", `unknown key "memroy-limit"`},
		{"memory-limit: lots\n", `line 1: memory-limit: `},
		{"admin: [a, b]\n", "admin: takes one value, not a list"},
		{"admin: {x: 1}\n", "admin: takes a value or a list, not a mapping"},
		{"admin:\n", "admin: no value"},
		{"- a\n- b\n", "want a mapping of flag names"},
		{"admin: a\nadmin: b\n", `key "admin" appears twice`},
		{"config: other.yaml\n", "cannot name another"},
		{"admin: [\n", "cannot parse config file"},
	}
	for _, c := range cases {
		_, err := runConfigTestRoot(t, "a", "--config", writeConfig(t, c.text))
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%q: %v, want no error", c.text, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%q: %v, want an error containing %q", c.text, err, c.want)
		}
	}
	_, err := runConfigTestRoot(t, "a", "--config", "/nonexistent/kvring.yaml")
	if err == nil || !strings.Contains(err.Error(), "/nonexistent/kvring.yaml") {
		t.Errorf("missing file: %v, want an error naming it", err)
	}
}
