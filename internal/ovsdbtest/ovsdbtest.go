// Package ovsdbtest starts a private ovsdb-server for tests: its own
// database and socket in a temporary directory, so the host's Open vSwitch
// is never touched.
package ovsdbtest

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// Schema is the Open_vSwitch schema Debian's openvswitch-common installs;
// NBSchema and SBSchema are OVN's (Debian's ovn-common).
const (
	Schema   = "/usr/share/openvswitch/vswitch.ovsschema"
	NBSchema = "/usr/share/ovn/ovn-nb.ovsschema"
	SBSchema = "/usr/share/ovn/ovn-sb.ovsschema"
)

// Server starts ovsdb-server on a new database of Schema and returns its
// socket; with initialise, the database gets its Open_vSwitch row as
// `ovs-vsctl init` (and the openvswitch-switch service at boot) gives it.
// The test is skipped when Open vSwitch is not installed; the server is
// killed when the test ends.
func Server(t testing.TB, initialise bool) string {
	t.Helper()
	sock := ServerOf(t, Schema)
	if initialise {
		Vsctl(t, sock, "--no-wait", "init")
	}
	return sock
}

// ServerOf starts ovsdb-server on a new database of schema (Schema,
// NBSchema, SBSchema) and returns its socket, as Server; the test is
// skipped when the server or the schema is not installed.
func ServerOf(t testing.TB, schema string) string {
	t.Helper()
	server, err := exec.LookPath("ovsdb-server")
	if err != nil {
		t.Skip("ovsdb-server not installed (scripts/install-deps.sh installs openvswitch-switch)")
	}
	if _, err := os.Stat(schema); err != nil {
		t.Skip("no " + schema + " (scripts/install-deps.sh installs openvswitch-switch, ovn-central and ovn-host)")
	}
	dir := t.TempDir()
	db, sock := filepath.Join(dir, "conf.db"), filepath.Join(dir, "db.sock")
	if out, err := exec.Command("ovsdb-tool", "create", db, schema).CombinedOutput(); err != nil {
		t.Fatalf("ovsdb-tool create: %v\n%s", err, out)
	}
	srv := exec.Command(server, db, "--remote=punix:"+sock, "--unixctl="+filepath.Join(dir, "ctl"), "--no-chdir")
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Process.Kill(); _ = srv.Wait() })
	for i := 0; i < 250; i++ {
		if _, err := os.Stat(sock); err == nil {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	return sock
}

// Vsctl runs ovs-vsctl against the database at sock — the tool users know,
// to cross-check what the code under test wrote — and returns its output.
func Vsctl(t testing.TB, sock string, args ...string) string {
	t.Helper()
	out, err := exec.Command("ovs-vsctl", append([]string{"--db=unix:" + sock}, args...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("ovs-vsctl %v: %v\n%s", args, err, out)
	}
	return string(out)
}
