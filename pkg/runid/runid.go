// Package runid names everything cnibench creates on a host.
//
// Every namespace, link, nftables table, OVS bridge and file that cnibench
// creates is called cnb-<id>-<suffix>, so `cnibench lab clean` can find what a
// killed run left behind by its prefix alone. Linux limits interface names to
// 15 bytes (IFNAMSIZ-1), which is why the id is only 4 characters: "cnb-" +
// 4 + "-" leaves 6 bytes for the suffix.
package runid

import (
	"crypto/rand"
	"fmt"
	"regexp"
	"strings"
)

// Prefix starts every name cnibench gives to a host object.
const Prefix = "cnb-"

// MaxIfName is the longest interface name the kernel accepts.
const MaxIfName = 15

const alphabet = "abcdefghijklmnopqrstuvwxyz0123456789"

var idRE = regexp.MustCompile(`^[a-z0-9]{4}$`)

// New returns a fresh random 4-character run id.
func New() string {
	var b [4]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(fmt.Sprintf("runid: crypto/rand: %v", err)) // the kernel's RNG does not fail
	}
	for i := range b {
		b[i] = alphabet[int(b[i])%len(alphabet)]
	}
	return string(b[:])
}

// Valid reports whether id has the form New returns.
func Valid(id string) bool { return idRE.MatchString(id) }

// Name returns cnb-<id>-<suffix>.
func Name(id, suffix string) string { return Prefix + id + "-" + suffix }

// IfName is Name for a network interface; it fails when the result does not
// fit in IFNAMSIZ.
func IfName(id, suffix string) (string, error) {
	n := Name(id, suffix)
	if len(n) > MaxIfName {
		return "", fmt.Errorf("interface name %q is longer than %d bytes", n, MaxIfName)
	}
	return n, nil
}

// Parse splits a name made by Name into its id and suffix.
func Parse(name string) (id, suffix string, ok bool) {
	if !strings.HasPrefix(name, Prefix) {
		return "", "", false
	}
	rest := name[len(Prefix):]
	if len(rest) < 5 || rest[4] != '-' || !Valid(rest[:4]) {
		return "", "", false
	}
	return rest[:4], rest[5:], true
}
