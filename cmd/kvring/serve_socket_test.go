package main

import (
	"os"
	"strings"
	"testing"
)

// TestServeSocketDefaultsToTheDataDirectory: without --socket the local socket is kvring.sock in the data
// directory; --socket (on the command line, or KVRING_SOCKET even when empty) wins, and "" turns it off; a
// path longer than a Unix socket's is refused naming the flag. Not parallel: it sets KVRING_SOCKET.
func TestServeSocketDefaultsToTheDataDirectory(t *testing.T) {
	long := "/tmp/" + strings.Repeat("d", 120)
	for _, c := range []struct {
		name    string
		env     *string
		args    []string
		want    string
		wantErr string
	}{
		{name: "default data dir", want: "kvring-data/kvring.sock"},
		{name: "own data dir", args: []string{"--data-dir", "n1"}, want: "n1/kvring.sock"},
		{name: "flag wins", args: []string{"--data-dir", "n1", "--socket", "/run/x.sock"}, want: "/run/x.sock"},
		{name: "flag turns it off", args: []string{"--socket", ""}, want: ""},
		{name: "env turns it off", env: new(""), want: ""},
		{name: "env sets it", env: new("/var/run/kvring/vineyard.sock"), want: "/var/run/kvring/vineyard.sock"},
		{name: "derived too long", args: []string{"--data-dir", long}, wantErr: "set --socket to a shorter path"},
		{name: "flag too long", args: []string{"--socket", long + "/s.sock"}, wantErr: "--socket \"/tmp/ddd"},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Setenv("KVRING_SOCKET", "")
			if c.env != nil {
				t.Setenv("KVRING_SOCKET", *c.env)
			} else {
				os.Unsetenv("KVRING_SOCKET") // t.Setenv restores it
			}
			serve := subcommand(t, newRootCmd(), "serve")
			if err := serve.ParseFlags(c.args); err != nil {
				t.Fatal(err)
			}
			if err := loadFlags(serve); err != nil {
				t.Fatal(err)
			}
			get := func(name string) string { return serve.Flags().Lookup(name).Value.String() }
			got, err := servedSocketPath(serve, get("socket"), get("data-dir"))
			switch {
			case c.wantErr != "":
				if err == nil || !strings.Contains(err.Error(), c.wantErr) {
					t.Fatalf("servedSocketPath = %q, %v; want an error containing %q", got, err, c.wantErr)
				}
			case err != nil || got != c.want:
				t.Fatalf("servedSocketPath = %q, %v; want %q", got, err, c.want)
			}
		})
	}
}

// TestServeHelpNamesEveryAdminAction: --admin-actions' help names each write action the admin API has.
func TestServeHelpNamesEveryAdminAction(t *testing.T) {
	t.Parallel()
	usage := subcommand(t, newRootCmd(), "serve").Flags().Lookup("admin-actions").Usage
	for _, action := range []string{"drain", "undrain", "forget", "drop-namespace", "evict", "namespaces set"} {
		if !strings.Contains(usage, action) {
			t.Errorf("--admin-actions help %q does not name %s", usage, action)
		}
	}
}
