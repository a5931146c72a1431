package main

import (
	"fmt"
	"os"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"go.yaml.in/yaml/v3"
)

// configFlag is the root's persistent flag naming an optional YAML file of
// flag values.
const configFlag = "config"

// loadFlags settles the flags of cmd, first thing in every RunE: a flag
// given on the command line wins, then its KVRING_* environment variable,
// then the YAML file named by --config (or KVRING_CONFIG), then the flag's
// default.
func loadFlags(cmd *cobra.Command) error {
	fs := cmd.Flags()
	if err := applyEnv(fs); err != nil {
		return err
	}
	path, err := fs.GetString(configFlag)
	if err != nil || path == "" {
		return nil
	}
	return applyConfigFile(fs, path, flagNames(cmd.Root()))
}

// applyConfigFile sets every flag of fs that neither the command line nor
// the environment set from the YAML file at path.
//
// The file is a mapping whose keys are flag names and whose values are
// scalars, written as on the command line (memory-limit: 4GiB,
// rejoin-interval: 30s), or, for list flags, a sequence (join: [a, b]) or a
// comma-separated scalar. One file can serve every command: a key that is a
// flag of another kvring command (known) is ignored here; any other key is
// an error naming it.
func applyConfigFile(fs *pflag.FlagSet, path string, known map[string]bool) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("cannot read config file: %w", err)
	}
	return applyConfig(fs, path, b, known)
}

// applyConfig is applyConfigFile for the file's contents b; path only names
// the file in errors.
func applyConfig(fs *pflag.FlagSet, path string, b []byte, known map[string]bool) error {
	var doc yaml.Node
	if err := yaml.Unmarshal(b, &doc); err != nil {
		return fmt.Errorf("cannot parse config file %s: %w", path, err)
	}
	if len(doc.Content) == 0 {
		return nil // empty file
	}
	top := doc.Content[0]
	if top.Kind != yaml.MappingNode {
		return fmt.Errorf("config file %s: line %d: want a mapping of flag names to values (memory-limit: 4GiB)", path, top.Line)
	}
	seen := make(map[string]bool)
	for i := 0; i+1 < len(top.Content); i += 2 {
		k, v := top.Content[i], top.Content[i+1]
		key := k.Value
		switch {
		case k.Kind != yaml.ScalarNode:
			return fmt.Errorf("config file %s: line %d: keys must be flag names", path, k.Line)
		case seen[key]:
			return fmt.Errorf("config file %s: line %d: key %q appears twice", path, k.Line, key)
		case key == configFlag:
			return fmt.Errorf("config file %s: line %d: key %q: a config file cannot name another", path, k.Line, key)
		case !known[key]:
			return fmt.Errorf("config file %s: line %d: unknown key %q (keys are kvring flag names, such as memory-limit)",
				path, k.Line, key)
		}
		seen[key] = true
		f := fs.Lookup(key)
		if f == nil || f.Changed {
			continue // another command's flag, or set by a flag or the environment
		}
		if _, ok := os.LookupEnv(envName(key)); ok {
			continue
		}
		if err := setFromYAML(fs, f, v); err != nil {
			return fmt.Errorf("config file %s: line %d: %s: %w", path, v.Line, key, err)
		}
	}
	return nil
}

// setFromYAML sets flag f from a YAML value.
func setFromYAML(fs *pflag.FlagSet, f *pflag.Flag, v *yaml.Node) error {
	if v.Kind == yaml.AliasNode {
		v = v.Alias
	}
	switch v.Kind {
	case yaml.ScalarNode:
		if v.Tag == "!!null" {
			return fmt.Errorf("no value")
		}
		return fs.Set(f.Name, v.Value)
	case yaml.SequenceNode:
		sv, ok := f.Value.(pflag.SliceValue)
		if !ok {
			return fmt.Errorf("takes one value, not a list")
		}
		vals := make([]string, 0, len(v.Content))
		for _, e := range v.Content {
			if e.Kind != yaml.ScalarNode || e.Tag == "!!null" {
				return fmt.Errorf("line %d: list items must be single values", e.Line)
			}
			vals = append(vals, e.Value)
		}
		if err := sv.Replace(vals); err != nil {
			return err
		}
		f.Changed = true
		return nil
	}
	return fmt.Errorf("takes a value or a list, not a mapping")
}

// flagNames returns the name of every flag of every command under root.
func flagNames(root *cobra.Command) map[string]bool {
	names := make(map[string]bool)
	var walk func(*cobra.Command)
	walk = func(c *cobra.Command) {
		add := func(f *pflag.Flag) { names[f.Name] = true }
		c.Flags().VisitAll(add)
		c.PersistentFlags().VisitAll(add)
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(root)
	delete(names, "help")
	return names
}
