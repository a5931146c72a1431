package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/kvring/kvring/internal/launch"
)

// writeEnv writes the nodes' addresses, pids and directories as bash
// arrays, and the control socket, to path, through a temporary file renamed into place, so a reader
// that sees the file sees all of it.
func writeEnv(path string, c *launch.Cluster, control string) error {
	nodes := c.Nodes()
	arrays := []struct {
		name string
		val  func(n *launch.Node) string
	}{
		{"grpcs", func(n *launch.Node) string { return n.GRPC }},
		{"admins", func(n *launch.Node) string { return n.Admin }},
		{"gossips", func(n *launch.Node) string { return n.Gossip }},
		{"resps", func(n *launch.Node) string { return n.RESP }},
		{"sockets", func(n *launch.Node) string {
			if n.Config().Socket {
				return n.SocketPath()
			}
			return ""
		}},
		{"ids", func(n *launch.Node) string { return n.ID }},
		{"node_pids", func(n *launch.Node) string { return strconv.Itoa(n.Pid()) }},
		{"logs", func(n *launch.Node) string { return n.LogPath() }},
		{"data_dirs", func(n *launch.Node) string { return n.DataDir() }},
		{"shm_dirs", func(n *launch.Node) string { return n.ShmDir() }},
	}
	var b strings.Builder
	fmt.Fprintf(&b, "# kvring nodes started by kvnodes (pid %d); source this file.\n", os.Getpid())
	fmt.Fprintf(&b, "kv_nodes=%d\nkv_control=%s\n", len(nodes), quote(control))
	for _, a := range arrays {
		vals := make([]string, len(nodes))
		for i, n := range nodes {
			vals[i] = quote(a.val(n))
		}
		fmt.Fprintf(&b, "%s=(%s)\n", a.name, strings.Join(vals, " "))
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".kvnodes-env-")
	if err != nil {
		return fmt.Errorf("cannot write %s: %w", path, err)
	}
	_, err = tmp.WriteString(b.String())
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), path)
	}
	if err != nil {
		os.Remove(tmp.Name())
		return fmt.Errorf("cannot write %s: %w", path, err)
	}
	return nil
}

// quote makes s one shell word: single-quoted, with its own single quotes
// written as '\”.
func quote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
