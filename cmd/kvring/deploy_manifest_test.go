package main

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"

	"github.com/kvring/kvring/deploy"
	"github.com/kvring/kvring/node/membership"
)

// deployDir is deploy/kubernetes, from this package's directory.
var deployDir = filepath.Join("..", "..", "deploy", "kubernetes")

// subcommand returns the command of root called name.
func subcommand(t *testing.T, root *cobra.Command, name string) *cobra.Command {
	t.Helper()
	for _, c := range root.Commands() {
		if c.Name() == name {
			return c
		}
	}
	t.Fatalf("no subcommand %q", name)
	return nil
}

// deployServeFlags parses the StatefulSet's container arguments, its environment (downward API and $(VAR)
// expanded as the kubelet does; KVRING_* variables set for the test) and the ConfigMap's file with the real
// `kvring serve` flag set, and returns the container and the flags' values.
func deployServeFlags(t *testing.T, m *deploy.Manifests) (*corev1.Container, func(name string) string) {
	t.Helper()
	spec := m.StatefulSet.Spec.Template.Spec
	c, err := deploy.Container(&spec, "kvring")
	if err != nil {
		t.Fatal(err)
	}
	env, err := deploy.ExpandEnv(c, map[string]string{"metadata.name": "kvring-1", "status.podIP": "10.1.2.3"})
	if err != nil {
		t.Fatal(err)
	}
	cfgText, err := m.ServeConfig()
	if err != nil {
		t.Fatal(err)
	}
	cfgPath := filepath.Join(t.TempDir(), "kvring.yaml")
	if err := os.WriteFile(cfgPath, []byte(cfgText), 0o600); err != nil {
		t.Fatal(err)
	}
	root := newRootCmd()
	serve := subcommand(t, root, "serve")
	if len(c.Args) == 0 || c.Args[0] != "serve" || len(c.Command) != 0 {
		t.Fatalf("container command %q args %q, want the image's entrypoint with args [serve ...]", c.Command, c.Args)
	}
	if err := serve.ParseFlags(c.Args[1:]); err != nil {
		t.Fatal(err)
	}
	for _, kv := range env {
		name, val, _ := strings.Cut(kv, "=")
		if !strings.HasPrefix(name, envPrefix) {
			continue
		}
		flag := strings.ToLower(strings.ReplaceAll(strings.TrimPrefix(name, envPrefix), "_", "-"))
		if serve.Flags().Lookup(flag) == nil {
			t.Errorf("%s names no `kvring serve` flag", name)
		}
		if name == "KVRING_CONFIG" {
			val = cfgPath
		}
		t.Setenv(name, val)
	}
	if err := loadFlags(serve); err != nil {
		t.Fatalf("kvring serve rejects the manifests' settings: %v", err)
	}
	return c, func(name string) string { return serve.Flags().Lookup(name).Value.String() }
}

// TestDeployDiskVariantArgsParse: the disk variant's StatefulSet (kubernetes/disk: the base patched with a
// local persistent volume per pod) parses with the real `kvring serve` flags and turns the disk tier on, in
// a directory on the claimed volume, with the node's data directory there too. Not parallel: it sets
// KVRING_* variables.
func TestDeployDiskVariantArgsParse(t *testing.T) {
	m, err := deploy.Load(filepath.Join(deployDir, "disk"))
	if err != nil {
		t.Fatal(err)
	}
	c, get := deployServeFlags(t, m)
	mounted := false
	for _, vm := range c.VolumeMounts {
		mounted = mounted || strings.HasPrefix(get("disk-dir"), vm.MountPath+"/") && vm.Name == m.StatefulSet.Spec.VolumeClaimTemplates[0].Name
	}
	if !mounted || get("disk-limit") == "0" || get("data-dir") != "/var/lib/kvring-disk/node" {
		t.Errorf("--disk-dir %q (on the claimed volume: %v), --disk-limit %s, --data-dir %s", get("disk-dir"), mounted,
			get("disk-limit"), get("data-dir"))
	}
}

// TestDeployManifestArgsAndEnvParseWithServeFlags: the StatefulSet's container arguments, its environment
// (downward API and $(VAR) expanded as the kubelet does) and the ConfigMap's file are accepted by the real
// `kvring serve` flag set, and the settings they give match the ports, probes and grace period of the
// manifests. Not parallel: it sets KVRING_* variables, as the pod's environment does.
func TestDeployManifestArgsAndEnvParseWithServeFlags(t *testing.T) {
	m, err := deploy.Load(deployDir)
	if err != nil {
		t.Fatal(err)
	}
	spec := m.StatefulSet.Spec.Template.Spec
	c, get := deployServeFlags(t, m)
	ports := map[string]int32{}
	for _, p := range c.Ports {
		ports[p.Name] = p.ContainerPort
	}
	for flag, want := range map[string]string{
		"advertise-addr": "10.1.2.3:9600", "gossip-advertise-addr": "10.1.2.3:7946", "data-dir": "/var/lib/kvring/kvring-1",
		"grpc-addr": ":9600", "gossip-addr": ":7946", "admin-addr": ":9602", "join": "[kvring-peers:7946]", "shm-dir": "/dev/shm",
	} {
		if got := get(flag); got != want {
			t.Errorf("--%s = %q, want %q", flag, got, want)
		}
	}
	if ports["grpc"] != 9600 || ports["gossip"] != 7946 || ports["gossip-udp"] != 7946 || ports["admin"] != 9602 {
		t.Errorf("container ports %v do not match the listeners", ports)
	}
	for _, p := range []struct {
		name, path string
		probe      *corev1.Probe
	}{{"readiness", "/readyz", c.ReadinessProbe}, {"liveness", "/healthz", c.LivenessProbe}, {"startup", "/healthz", c.StartupProbe}} {
		if pr := p.probe; pr == nil || pr.HTTPGet == nil || pr.HTTPGet.Path != p.path || pr.HTTPGet.Port.String() != "admin" {
			t.Errorf("%s probe %+v, want GET %s on the admin port", p.name, pr, p.path)
		}
	}
	// The grace period covers the preStop pause, the drain (hand-off), the goodbye broadcast and the calls
	// in flight.
	drain, err := time.ParseDuration(get("drain-timeout"))
	if err != nil {
		t.Fatal(err)
	}
	shutdown, err := time.ParseDuration(get("shutdown-timeout"))
	if err != nil {
		t.Fatal(err)
	}
	if c.Lifecycle == nil || c.Lifecycle.PreStop == nil || c.Lifecycle.PreStop.Sleep == nil {
		t.Fatal("no preStop sleep")
	}
	preStop := time.Duration(c.Lifecycle.PreStop.Sleep.Seconds) * time.Second
	need := preStop + drain + shutdown + membership.DefaultConfig().BroadcastTimeout
	if grace := time.Duration(*spec.TerminationGracePeriodSeconds) * time.Second; grace <= need {
		t.Errorf("terminationGracePeriodSeconds %v, want more than preStop %v + drain %v + shutdown %v + broadcast %v", grace,
			preStop, drain, shutdown, membership.DefaultConfig().BroadcastTimeout)
	}
}

// TestDeployBenchJobArgsParse: the benchmark Job's arguments are accepted by `kvring bench`, which needs no
// trace file (the built-in trace) and reaches the cluster through the client Service.
func TestDeployBenchJobArgsParse(t *testing.T) {
	t.Parallel()
	m, err := deploy.Load(filepath.Join(deployDir, "bench"))
	if err != nil {
		t.Fatal(err)
	}
	c, err := deploy.Container(&m.Job.Spec.Template.Spec, "bench")
	if err != nil {
		t.Fatal(err)
	}
	bench := subcommand(t, newRootCmd(), "bench")
	if len(c.Args) == 0 || c.Args[0] != "bench" {
		t.Fatalf("job args %q, want bench ...", c.Args)
	}
	if err := bench.ParseFlags(c.Args[1:]); err != nil {
		t.Fatal(err)
	}
	if got := bench.Flags().Lookup("addr").Value.String(); got != "[kvring:9600]" {
		t.Errorf("--addr %s, want the client Service kvring:9600", got)
	}
	if got := bench.Flags().Lookup("trace").Value.String(); got != "" {
		t.Errorf("--trace %q: the image has no trace file; use the built-in one", got)
	}
}

// TestDeploySocketDirectoryBelongsToTheNodesUser: the StatefulSet's local socket is containerSocket (what
// `kvring serve --help` names) in the directory of a hostPath volume, and an init container hands that
// directory, which DirectoryOrCreate makes root's, to the user the node runs as before it starts, with no
// more privilege than chown needs. The init container's image is fully qualified, as the node's base image is.
func TestDeploySocketDirectoryBelongsToTheNodesUser(t *testing.T) {
	t.Parallel()
	m, err := deploy.Load(deployDir)
	if err != nil {
		t.Fatal(err)
	}
	spec := m.StatefulSet.Spec.Template.Spec
	c, err := deploy.Container(&spec, "kvring")
	if err != nil {
		t.Fatal(err)
	}
	env, err := deploy.ExpandEnv(c, map[string]string{"metadata.name": "kvring-0", "status.podIP": "10.1.2.3"})
	if err != nil {
		t.Fatal(err)
	}
	sock := ""
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, "KVRING_SOCKET="); ok {
			sock = v
		}
	}
	if sock != containerSocket {
		t.Fatalf("KVRING_SOCKET=%q, want %q, the path `kvring serve --help` and the docs name", sock, containerSocket)
	}
	vol := ""
	for _, vm := range c.VolumeMounts {
		if vm.MountPath == filepath.Dir(sock) {
			vol = vm.Name
		}
	}
	var host *corev1.HostPathVolumeSource
	for _, v := range spec.Volumes {
		if v.Name == vol {
			host = v.HostPath
		}
	}
	if host == nil {
		t.Fatalf("the socket's directory %s is not a hostPath volume the container mounts (volume %q)", filepath.Dir(sock), vol)
	}
	psc := spec.SecurityContext
	if psc == nil || psc.RunAsUser == nil || psc.RunAsGroup == nil || *psc.RunAsUser == 0 {
		t.Fatalf("the pod runs as %+v, want a non-root user and group", psc)
	}
	owner := fmt.Sprintf("%d:%d", *psc.RunAsUser, *psc.RunAsGroup)
	chowned := false
	for _, ic := range spec.InitContainers {
		if !strings.Contains(strings.SplitN(ic.Image, "/", 2)[0], ".") {
			t.Errorf("init container %s: image %q is not fully qualified (registry host first)", ic.Name, ic.Image)
		}
		mountedAt := ""
		for _, vm := range ic.VolumeMounts {
			if vm.Name == vol {
				mountedAt = vm.MountPath
			}
		}
		if mountedAt == "" || !slices.Equal(ic.Command, []string{"chown", owner, mountedAt}) {
			continue
		}
		chowned = true
		sc := ic.SecurityContext
		if sc == nil || sc.Capabilities == nil || !slices.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) ||
			!slices.Equal(sc.Capabilities.Add, []corev1.Capability{"CHOWN"}) || sc.AllowPrivilegeEscalation == nil ||
			*sc.AllowPrivilegeEscalation || sc.RunAsUser == nil || *sc.RunAsUser != 0 {
			t.Errorf("init container %s: security context %+v, want root with CAP_CHOWN alone and no escalation", ic.Name, sc)
		}
	}
	if !chowned {
		t.Errorf("no init container runs [chown %s <the %q volume>]: the node could not create %s in a directory DirectoryOrCreate made root's",
			owner, vol, sock)
	}
}

// TestDocsNameOneSocketPathForContainers: wherever the README, docs/ or the Python client's README name a
// vineyard.sock, it is the path the manifests use.
func TestDocsNameOneSocketPathForContainers(t *testing.T) {
	t.Parallel()
	files, err := filepath.Glob(filepath.Join("..", "..", "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	files = append(files, filepath.Join("..", "..", "README.md"), filepath.Join("..", "..", "python", "README.md"))
	re := regexp.MustCompile(`[\w./-]*vineyard\.sock`)
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range re.FindAllString(string(b), -1) {
			if p != containerSocket {
				t.Errorf("%s names %s; the manifests' socket is %s", f, p, containerSocket)
			}
		}
	}
}
