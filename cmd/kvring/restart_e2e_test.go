package main

import (
	"context"
	"strings"
	"testing"
)

// Stopped nodes keep their ports. A node's ports are picked by the kernel
// when it first starts; once it stops they are free, and the kernel may hand
// them to a node or a connection of another test running in parallel. Two
// things would then break: a restart on the same addresses (the client's
// seed, the cluster's gossip peer) would find its port taken, and a call that
// must be refused by the stopped node would reach someone else. So a node
// that is killed or stopped holds its ports (launch.Node.Kill and Stop) until
// restartNode starts it there again or the test ends.

// restartNode starts the stopped node n again on its data directory and its
// addresses with the test flags and extra (launch.Node.Restart: a port
// taken in between is tried again) and waits until it is ready.
func restartNode(t *testing.T, n *e2eNode, extra ...string) *e2eNode {
	t.Helper()
	return restartNodeBin(t, n, kvringBinary(t), extra...)
}

// restartNodeBin is restartNode with another kvring binary: a rolling
// upgrade's (or downgrade's) step.
func restartNodeBin(t *testing.T, n *e2eNode, bin string, extra ...string) *e2eNode {
	t.Helper()
	if n.ln == nil {
		t.Fatalf("BUG: node %s was not started by the launcher (startNode)", n.id)
	}
	again, err := n.ln.RestartAs(context.Background(), bin, append(append([]string(nil), e2eServeFlags...), extra...))
	if err != nil {
		t.Fatal(err)
	}
	return launched(t, again)
}

// lineContaining returns the first line of s that contains sub, or "".
func lineContaining(s, sub string) string {
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			return l
		}
	}
	return ""
}
