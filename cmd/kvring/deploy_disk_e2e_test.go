package main

import (
	"context"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/kvring/kvring/client"
	"github.com/kvring/kvring/deploy"
	"github.com/kvring/kvring/internal/testutil"
)

// TestDeployDiskVariantKeepsTheCacheAcrossPods: a pod of the disk variant
// (kubernetes/disk), started with exactly its args and env (shared memory
// cut to 16 MiB for the test), stores 40 MiB; it is killed and a new pod
// starts with new emptyDirs and the same local persistent volume, as a pod
// rescheduled onto the same Kubernetes node does. The new pod holds the
// chunks its predecessor put on disk and reads them back byte-exact.
func TestDeployDiskVariantKeepsTheCacheAcrossPods(t *testing.T) {
	t.Parallel()
	m, err := deploy.Load(filepath.Join(deployDir, "disk"))
	if err != nil {
		t.Fatal(err)
	}
	c, err := deploy.Container(&m.StatefulSet.Spec.Template.Spec, "kvring")
	if err != nil {
		t.Fatal(err)
	}
	r := &rehearsal{t: t, m: m, c: c, ports: holdRehearsalPorts(t), sock: map[int]string{}, claims: map[string]string{},
		env: []string{"KVRING_MEMORY_LIMIT=16MiB"}}
	pod := r.startPod(0)
	engine := func(p *e2eNode) *client.Client {
		e, _ := newEngine(t, []string{p.grpc}, 0, 0)
		testutil.Eventually(t, "the client to connect", 10*time.Second, func() bool { return e.State().Status == client.ConnConnected })
		return e
	}
	const size, n = 256 << 10, 160
	putChunks(t, engine(pod), 0, n, size)
	testutil.Eventually(t, "the offloads to reach the disk", 30*time.Second, func() bool {
		return pod.diskStats(t).Disk.QueuedChunks == 0
	})
	onDisk := pod.diskStats(t).Disk.Chunks
	if onDisk < n/2 {
		t.Fatalf("%d of %d chunks on disk", onDisk, n)
	}
	pod.Signal(syscall.SIGKILL)
	<-pod.Done()
	r.ports.holdUDP(t, 0)
	pod = r.startPod(0)
	if got := pod.diskStats(t).Disk.Chunks; got != onDisk {
		t.Fatalf("the new pod found %d chunks on its volume, want %d", got, onDisk)
	}
	e := engine(pod)
	found := checkServed(t, e, 0, n, size, false)
	if int64(found) < onDisk {
		t.Fatalf("the new pod serves %d chunks, want the %d on its volume", found, onDisk)
	}
	res, err := e.Lookup(context.Background(), []client.ChunkID{diskChunk(0, size).ID}, 0)
	t.Logf("the new pod serves %d of %d chunks (%d from its volume); lookup of the first: %+v %v", found, n, onDisk, res, err)
}
